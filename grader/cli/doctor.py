"""`doctor`: is this machine ready to build and grade the labs? Each check says what is missing and
how to get it."""

from __future__ import annotations

import glob
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from grader.host.toolkit import find_nvcc
from grader.host.environment import GpuProbe, probe_gpu

MIN_CMAKE = (3, 24)
MIN_PYTHON = (3, 10)

_GTEST_CONFIG_GLOBS = (
    "/usr/lib/*/cmake/GTest/GTestConfig.cmake",
    "/usr/lib/cmake/GTest/GTestConfig.cmake",
    "/usr/lib64/cmake/GTest/GTestConfig.cmake",
    "/usr/local/lib/cmake/GTest/GTestConfig.cmake",
    "/usr/local/lib64/cmake/GTest/GTestConfig.cmake",
    "/usr/share/cmake*/Modules/FindGTest.cmake",
)
_GTEST_HEADERS = ("/usr/include/gtest/gtest.h", "/usr/local/include/gtest/gtest.h")


@dataclass
class Check:
    name: str
    ok: bool
    detail: str  # what was found, or what is missing
    fix: str = ""  # how to get it, when missing
    required: bool = True

    @property
    def status(self) -> str:
        return "ok" if self.ok else ("MISSING" if self.required else "warning")


def _version(argv: list[str]) -> str:
    try:
        out = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=20).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return out


def _parse_version(text: str) -> tuple[int, ...]:
    m = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", text)
    return tuple(int(g) for g in m.groups() if g is not None) if m else ()


def required_cmake(root: Path) -> tuple[int, ...]:
    """The newer of 3.24 and what CMakePresets.json asks for (presets of version 6 need 3.25)."""
    try:
        presets = json.loads((root / "CMakePresets.json").read_text())
        need = presets.get("cmakeMinimumRequired", {})
        asked = (int(need.get("major", 0)), int(need.get("minor", 0)))
    except (OSError, ValueError, AttributeError):
        asked = (0, 0)
    return max(MIN_CMAKE, asked)


def check_nvcc() -> Check:
    nvcc = find_nvcc()
    if nvcc is None:
        return Check("nvcc (CUDA toolkit)", False, "nvcc not found on PATH, in $CUDACXX or /usr/local/cuda/bin",
                     "install the CUDA Toolkit 13 (NVIDIA's apt repository: apt install cuda-toolkit-13-0) "
                     "and add /usr/local/cuda/bin to PATH")
    out = _version([nvcc, "--version"])
    release = re.search(r"release (\d+\.\d+)", out)
    version = release.group(1) if release else "unknown version"
    return Check("nvcc (CUDA toolkit)", True, f"{nvcc} (CUDA {version})")


def check_cmake(root: Path) -> Check:
    need = required_cmake(root)
    need_text = ".".join(map(str, need))
    path = shutil.which("cmake")
    if path is None:
        return Check("cmake", False, f"cmake not found (need >= {need_text})", "pip install cmake, or apt install cmake")
    have = _parse_version(_version([path, "--version"]))
    have_text = ".".join(map(str, have)) or "unknown version"
    if have < need:
        return Check("cmake", False, f"{path} is {have_text}; need >= {need_text}", "pip install --upgrade cmake")
    return Check("cmake", True, f"{path} ({have_text})")


def check_ninja() -> Check:
    path = shutil.which("ninja")
    if path is None:
        return Check("ninja", False, "ninja not found; CMake will use make (slower incremental builds)",
                     "apt install ninja-build, or pip install ninja", required=False)
    return Check("ninja", True, f"{path} ({_version([path, '--version']).strip()})")


def check_cxx() -> Check:
    path = shutil.which("g++")
    if path is None:
        return Check("g++ (host compiler)", False, "g++ not found", "apt install g++")
    first = _version([path, "--version"]).splitlines()
    return Check("g++ (host compiler)", True, f"{path} ({first[0] if first else 'unknown version'})")


def check_gtest() -> Check:
    prefixes = [p for p in os.environ.get("CMAKE_PREFIX_PATH", "").split(os.pathsep) if p]
    patterns = list(_GTEST_CONFIG_GLOBS[:-1]) + [f"{p}/lib*/cmake/GTest/GTestConfig.cmake" for p in prefixes]
    configs = [hit for pattern in patterns for hit in glob.glob(pattern)]
    if configs:
        return Check("GoogleTest", True, configs[0])
    headers = [h for h in _GTEST_HEADERS if Path(h).is_file()]
    if headers:
        return Check("GoogleTest", True, f"{headers[0]} (headers; CMake's FindGTest locates the library)")
    return Check("GoogleTest", False, "no GTestConfig.cmake and no gtest/gtest.h found", "apt install libgtest-dev")


def check_gpu(gpu: GpuProbe) -> Check:
    if not gpu.available:
        return Check("GPU", False, f"none ({gpu.reason}): everything builds, GPU tests are skipped",
                     "run on a machine with an NVIDIA GPU and its driver (nvidia-smi -L lists it)", required=False)
    cc = f", compute capability {gpu.compute_capability} ({gpu.sm})" if gpu.compute_capability else ""
    return Check("GPU", True, f"{gpu.name}{cc}")


def _optional_tool(name: str, path: str | None, missing: str, fix: str) -> Check:
    return Check(name, True, path) if path else Check(name, False, missing, fix, required=False)


def check_cupti() -> Check:
    from grader.host.toolkit import find_cupti, toolkit_root

    found = find_cupti()
    if found is None:
        return Check("CUPTI", False, f"cupti.h or libcupti.so not found under {toolkit_root() or 'the CUDA toolkit'}: "
                     "lab 02 is not built (its grid contract test asks CUPTI which kernels ran)",
                     "it comes with the CUDA toolkit (extras/CUPTI; apt install cuda-cupti-dev-13-0)")
    return Check("CUPTI", True, f"{found[1]}")


def check_sanitizer() -> Check:
    from grader.host.toolkit import find_sanitizer

    return _optional_tool("compute-sanitizer", find_sanitizer(),
                          "not found: the sanitizer stage (race and memory checks) is reported as not run",
                          "it comes with the CUDA toolkit (apt install cuda-sanitizer-13-0)")


def check_bwrap() -> Check:
    from grader.host.toolkit import find_bwrap

    return _optional_tool("bubblewrap (bwrap)", find_bwrap(),
                          "not found: submissions' test binaries run without a sandbox (fine for your own code)",
                          "apt install bubblewrap, on machines that grade other people's submissions")


def check_confinement() -> list[Check]:
    """What the supervisor of untrusted runs (grader/isolate/confine.py) can use on this machine."""
    import os
    import subprocess

    from grader.isolate import confine

    abi = confine.landlock_abi()
    checks = [_optional_tool("Landlock", f"ABI {abi}: runs write only to their own directory" if abi else None,
                             "not in this kernel: test runs can write wherever the grading user can",
                             "a Linux kernel of 5.13 or newer with Landlock enabled, or install bubblewrap")]
    probe = subprocess.run([sys.executable, "-I", "-S", "-c",
                            "import ctypes, os\nlibc = ctypes.CDLL(None)\n"
                            "os._exit(0 if libc.unshare(0x20000000) == 0 else 1)"], check=False)
    ok = probe.returncode == 0
    checks.append(_optional_tool("PID namespaces", "every process a run starts dies with it" if ok else None,
                                 "not allowed here: a child subreaper collects what a run starts instead",
                                 "grade as root, or allow unprivileged user namespaces" if os.getuid() else ""))
    return checks


def check_python() -> list[Check]:
    version = ".".join(map(str, sys.version_info[:3]))
    checks = [
        Check("python", sys.version_info[:2] >= MIN_PYTHON, f"{sys.executable} ({version})",
              "use Python 3.10 or newer"),
    ]
    if sys.version_info[:2] < (3, 11):
        ok = importlib.util.find_spec("tomli") is not None
        checks.append(Check("python: tomli", ok, "found" if ok else "missing (needed on Python 3.10)", "pip install tomli"))
    ok = importlib.util.find_spec("jinja2") is not None
    checks.append(Check("python: jinja2", ok, "found" if ok else "missing (HTML report)",
                        "pip install -r requirements.txt (or pip install jinja2)"))
    ok = importlib.util.find_spec("rich") is not None
    checks.append(Check("python: rich", ok, "found" if ok else "missing (plain-text progress is used instead)",
                        "pip install rich", required=False))
    ok = importlib.util.find_spec("copydetect") is not None
    checks.append(Check("python: copydetect", ok, "found" if ok else "missing (the batch's similarity report is skipped)",
                        "pip install copydetect", required=False))
    return checks


def run_checks(root: Path, gpu: GpuProbe | None = None) -> list[Check]:
    gpu = probe_gpu() if gpu is None else gpu
    return [
        check_nvcc(), check_cmake(root), check_ninja(), check_cxx(), check_gtest(), check_gpu(gpu),
        check_cupti(), check_sanitizer(), check_bwrap(), *check_confinement(), *check_python(),
    ]


def format_checks(checks: list[Check]) -> str:
    width = max(len(c.name) for c in checks)
    lines = []
    for c in checks:
        lines.append(f"{c.status:>8}  {c.name:<{width}}  {c.detail}")
        if not c.ok and c.fix:
            lines.append(f"{'':>8}  {'':<{width}}  -> {c.fix}")
    missing = [c.name for c in checks if c.required and not c.ok]
    lines.append("")
    lines.append(f"missing: {', '.join(missing)}" if missing else "ready to build and grade")
    return "\n".join(lines)
