"""Compiling a lab file the way CMake compiles a student object, and checking it as the grader does,
for tests that need the real compiler (nvcc) and the real object checks."""

from __future__ import annotations

import glob
import subprocess
from pathlib import Path

from grader.host.toolkit import find_nvcc
from grader.inspect.elf import read_object
from grader.inspect.includes import IncludePolicy, check_dependencies, list_dependencies
from grader.model.labs import Lab
from grader.inspect.objcheck import check_object, contract_of

ROOT = Path(__file__).resolve().parents[2]


def _build_dir() -> Path | None:
    for preset in ("ci", "default"):
        d = ROOT / "build" / preset
        if (d / "compile_commands.json").is_file() and glob.glob(str(d / "labs/*/CMakeFiles/*_tests.dir/*.o")):
            return d
    return None


BUILD = _build_dir()


def compile_command(lab: Lab, source: Path, obj: Path) -> list[str]:
    rdc = ["-rdc=true"] if "RDC" in (lab.path / "CMakeLists.txt").read_text() else []
    return [str(find_nvcc()), "-O3", "-std=c++17", "--generate-code=arch=compute_90,code=[compute_90,sm_90]",
            "-Xcompiler=-fPIC", f"-I{lab.path}", f"-I{ROOT / 'common' / 'include'}", "-DCCCL_DISABLE_NVTX",
            "-DNVTX_DISABLE", *rdc, "--keep", f"--keep-dir={obj.parent}", "-Xcompiler=-save-temps=obj", "-x", "cu",
            "-c", str(source), "-o", str(obj)]


def compile_like_cmake(lab: Lab, source: Path, out_dir: Path) -> tuple[Path | None, str]:
    """(the object, or None when it did not compile; the compiler's output)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    obj = out_dir / (source.name + ".o")
    proc = subprocess.run(compile_command(lab, source, obj), capture_output=True, text=True, cwd=out_dir,
                          timeout=600, check=False)
    return (obj if proc.returncode == 0 else None), (proc.stdout + proc.stderr)[-3000:]


def contract(lab: Lab) -> set[str]:
    """The functions the lab's tests call (from the built test objects)."""
    assert BUILD is not None
    objs = glob.glob(str(BUILD / "labs" / lab.name / "CMakeFiles" / f"{lab.target_prefix}_*tests.dir" / "*.o"))
    return contract_of([read_object(Path(p)) for p in objs])


def static_findings(lab: Lab, source: Path, obj: Path) -> list[str]:
    """What the static checks refuse in this compiled file (includes, then the object): [] when it may run."""
    command = compile_command(lab, source, obj)
    deps = list_dependencies(command, obj.parent)
    policy = IncludePolicy.for_lab(lab, [source], find_nvcc(), command)
    problems = [p.line() for p in check_dependencies(deps, policy)]
    listing = obj.with_suffix(".s")
    findings = check_object(read_object(obj), lab, contract(lab), [source],
                            listing.read_text() if listing.is_file() else None)
    return problems + [f.line() for f in findings]
