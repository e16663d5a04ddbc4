"""Configure the project with a CMake preset and build one target at a time, so one lab's compile
error never stops another lab from building. Compiler output is kept (bounded) and classified."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from grader.model.errors import Exit, GraderError
from grader.host.toolkit import find_nvcc
from grader.model.results import BuildResult, Category
from grader.model.text import truncate

CONFIGURE_TIMEOUT_S = 900.0
BUILD_TIMEOUT_S = 1800.0

# Linker diagnostics (GNU ld, gold, lld, nvlink); a link step runs only after every compile succeeded.
_LINK_ERROR = re.compile(
    r"undefined reference to|undefined symbol|multiple definition of|ld returned \d+ exit status|"
    r"nvlink error|nvlink fatal|collect2: error|cannot find -l|relocation .* against",
)
# The first line worth showing: nvcc "file.cu(12): error: ...", gcc "file.cpp:3:4: error: ...", "nvcc fatal".
_ERROR_LINE = re.compile(r"(\berror\b|\bfatal\b|undefined reference|multiple definition)", re.I)
# ...or an input the grader should have built is not there (the pristine build's test object): not the student's.
_UNKNOWN_TARGET = re.compile(r"unknown target|No rule to make target|missing and no known rule to make it", re.I)
# Configure output that means the CUDA toolkit itself is missing or unusable (exit 4, not 3).
_NO_TOOLKIT = re.compile(
    r"No CMAKE_CUDA_COMPILER could be found|Failed to find nvcc|Could NOT find CUDAToolkit|"
    r"CMAKE_CUDA_COMPILER.*(not|could not be) found|Failed to detect a default CUDA architecture",
    re.I,
)


def categorize_build_log(log: str) -> Category:
    """COMPILE_ERROR or LINK_ERROR from a failed build's output (HARNESS when the target is unknown)."""
    if _UNKNOWN_TARGET.search(log):  # nothing was compiled: the target does not exist
        return Category.HARNESS
    return Category.LINK_ERROR if _LINK_ERROR.search(log) else Category.COMPILE_ERROR


def first_error(log: str) -> str:
    """The first diagnostic line of a build log, for a one-line summary."""
    for line in log.splitlines():
        text = line.strip()
        if not text or text.startswith(("FAILED:", "ninja: build stopped", "gmake", "make[", "[")):
            continue
        if _ERROR_LINE.search(text):
            for marker in ("undefined reference to", "multiple definition of"):  # drop the object's tmpxft_... name
                if marker in text:
                    text = text[text.index(marker):]
            return text[:300]
    return ""


def cached_variable(build_dir: Path, name: str) -> str | None:
    """A variable of build_dir's CMakeCache.txt: None when the build is not configured, "" when unset."""
    try:
        cache = (Path(build_dir) / "CMakeCache.txt").read_text(errors="replace")
    except OSError:
        return None
    m = re.search(rf"^{re.escape(name)}:[A-Z]+=(.*)$", cache, re.MULTILINE)
    return m.group(1) if m else ""


class Builder(Protocol):
    """What the grade pipeline needs from a build system (tests substitute a fake)."""

    @property
    def bin_dir(self) -> Path: ...

    def configure(self, labs: list[str]) -> None: ...

    def build(self, target: str) -> BuildResult: ...


# One `cmake --build` at a time per build folder in this process: a grade prepares labs in a thread
# (grader/grade/ahead.py) while its main thread may build the GPU health probe in the same tree, and
# two builds of one folder at once can break ninja's log and each other's outputs.
_BUILD_LOCKS: dict[str, threading.Lock] = {}
_LOCKS_GUARD = threading.Lock()


def build_lock(build_dir: Path) -> threading.Lock:
    key = str(Path(build_dir).resolve())
    with _LOCKS_GUARD:
        return _BUILD_LOCKS.setdefault(key, threading.Lock())


@dataclass
class CMakeBuilder:
    root: Path
    preset: str
    jobs: int | None = None
    log_limit: int = 64_000

    @property
    def build_dir(self) -> Path:
        return self.root / "build" / self.preset

    @property
    def bin_dir(self) -> Path:
        return self.build_dir / "bin"

    @property
    def configured(self) -> bool:
        return (self.build_dir / "CMakeCache.txt").is_file()

    def presets(self) -> list[str]:
        """Configure presets of CMakePresets.json and CMakeUserPresets.json ([] when there are none)."""
        names: list[str] = []
        for file in ("CMakePresets.json", "CMakeUserPresets.json"):
            try:
                data = json.loads((self.root / file).read_text())
            except (OSError, ValueError):
                continue
            names += [p["name"] for p in data.get("configurePresets", []) if isinstance(p, dict) and "name" in p]
        return names

    def cached_labs(self) -> list[str] | None:
        """CUDALAB_LABS of the configured build: None when not configured, [] when every lab is in it."""
        labs = cached_variable(self.build_dir, "CUDALAB_LABS")
        return None if labs is None else [x for x in labs.split(";") if x]

    def configure_command(self, ninja: bool, labs: list[str] | None = None) -> list[str]:
        cmd = ["cmake", "--preset", self.preset]
        if ninja:
            cmd += ["-G", "Ninja"]
        if labs is not None:
            cmd.append(f"-DCUDALAB_LABS={';'.join(labs)}")
        return cmd

    def build_command(self, *targets: str, jobs: int | None = None) -> list[str]:
        cmd = ["cmake", "--build", str(self.build_dir), "--target", *targets]
        if jobs or self.jobs:
            cmd += ["--parallel", str(jobs or self.jobs)]
        return cmd

    def run_build(self, *targets: str, jobs: int | None = None, timeout_s: float | None = None,
                  memory_mib: float | None = None) -> tuple[int, str]:
        """`cmake --build` of these targets: (exit code, output); -1 and a note when it times out.
        memory_mib caps the virtual memory of every process of the build (compilers included)."""
        from grader.isolate import process

        limit = timeout_s or BUILD_TIMEOUT_S
        limits = process.Limits(core_bytes=0, file_bytes=None, cpu_s=int(limit * 4 + 60), open_files=None,
                                address_space=int(memory_mib * (1 << 20)) if memory_mib else None)
        # Under the supervisor: ninja starts each compiler in a process group of its own, so only a PID
        # namespace (or a subreaper) takes a compile that ran out of time down with the build.
        supervised = process.Confinement(self.root, landlock=False, namespaces=True)
        with build_lock(self.build_dir):
            res = process.run(self.build_command(*targets, jobs=jobs), limit, cwd=self.root, limits=limits,
                              confine=supervised)
        output = "\n".join(part for part in (res.stdout, res.stderr) if part)
        if res.timed_out:
            return -1, output + f"\nthe build did not finish in {limit:g} s"
        return (res.returncode if res.returncode is not None else -1), output

    def configure(self, labs: list[str]) -> None:
        """Configure build/<preset> for these labs (directory names), so a lab with a broken CMakeLists.txt
        never stops the others. Nothing to do when the build already has them; otherwise
        `cmake --preset X -DCUDALAB_LABS=...` with the labs it had plus these. Raises GraderError (3 or 4)."""
        current = self.cached_labs()
        if current is not None and (current == [] or set(labs) <= set(current)):
            return
        known = self.presets()
        if current is None and known and self.preset not in known:
            raise GraderError(f"unknown CMake preset '{self.preset}'; presets: {', '.join(known)}", Exit.USAGE)
        if shutil.which("cmake") is None:
            raise GraderError("cmake is not installed (python3 -m grader doctor says how to get it)", Exit.ENVIRONMENT)
        ninja = current is None and shutil.which("ninja") is not None  # the generator is chosen once, when new
        wanted = sorted(set(current or []) | set(labs))
        try:
            proc = subprocess.run(
                self.configure_command(ninja, wanted),
                cwd=self.root,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                errors="replace",
                timeout=CONFIGURE_TIMEOUT_S,
            )
        except subprocess.TimeoutExpired:
            raise GraderError(f"cmake --preset {self.preset} did not finish in {CONFIGURE_TIMEOUT_S:g} s", Exit.BUILD)
        if proc.returncode != 0:
            log = truncate(proc.stdout, 6_000)
            if _NO_TOOLKIT.search(proc.stdout) or find_nvcc() is None:
                raise GraderError(
                    f"cmake --preset {self.preset} failed: the CUDA toolkit (nvcc) was not found. "
                    f"Install CUDA 13 and put its bin/ on PATH (python3 -m grader doctor).\n{log}",
                    Exit.ENVIRONMENT,
                )
            raise GraderError(f"cmake --preset {self.preset} failed:\n{log}", Exit.BUILD)

    def build(self, target: str, timeout_s: float | None = None, memory_mib: float | None = None) -> BuildResult:
        start = time.monotonic()
        code, output = self.run_build(target, timeout_s=timeout_s, memory_mib=memory_mib)
        seconds = time.monotonic() - start
        if code == 0:
            return BuildResult(target=target, ok=True, seconds=seconds, log=truncate(output, self.log_limit))
        if timeout_s is not None and code == -1:
            return BuildResult(target=target, ok=False, seconds=seconds, category=Category.COMPILE_ERROR,
                               log=truncate(output, self.log_limit),
                               message=f"compile error: compiling took longer than {timeout_s:g} s, the most a lab "
                                       "file may take (a template or a loop that unrolls without end?)")
        return failed_build(target, output, seconds, self.log_limit)


def failed_build(target: str, output: str, seconds: float = 0.0, log_limit: int = 64_000) -> BuildResult:
    category = categorize_build_log(output)
    what = {
        Category.COMPILE_ERROR: "compile error",
        Category.LINK_ERROR: "link error",
        Category.HARNESS: "unknown build target",
    }.get(category, "build failed")
    if category is Category.HARNESS and "missing and no known rule" in output:
        what = "the grader's own build is incomplete (not your code)"
    line = first_error(output)
    return BuildResult(
        target=target,
        ok=False,
        seconds=seconds,
        category=category,
        log=truncate(output, log_limit),
        message=f"{what}: {line}" if line else what,
    )
