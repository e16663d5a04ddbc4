"""Which files a student's file reads when it compiles, as the compiler itself says, and whether it may.

`nvcc -M` with the file's own compile command lists every file the preprocessor opens, for the host
pass and every device pass alike (an #include under #ifdef __CUDA_ARCH__ is listed too). Digraphs
(%:include), macros, line splices and comment tricks change nothing: this is the compiler's list, not a
reading of the text. Every listed file must be one of

  - the student's file itself;
  - in the lab's directory: one of its contract headers (*.cuh, *.h, *.hpp);
  - in common/include/cudalab: one of STUDENT_HEADERS;
  - a CUDA toolkit or system header, but not GoogleTest's and not a library the lab's [forbid] names;

and nothing else of the repository (no solution, no test, no other lab) or of the machine.
The preprocessor runs with a time and memory limit (an #include of /dev/zero must not hang the grader).
"""

from __future__ import annotations

import fnmatch
import functools
import os
import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from grader.isolate import process
from grader.model.labs import Lab

PREPROCESS_TIMEOUT_S = 120.0
PREPROCESS_MEMORY_BYTES = 4 << 30

# The cudalab headers a lab file may include; the others (gtest_cuda.hpp, compare.hpp, bench.cuh, ...)
# belong to the tests.
STUDENT_HEADERS = ("check.cuh", "launch.cuh", "device_buffer.cuh")
CONTRACT_SUFFIXES = (".cuh", ".h", ".hpp")

# Header families of libraries a lab may forbid, keyed by a word its [forbid] globs contain. Globs are
# matched against the path relative to each include directory (cub/device/device_reduce.cuh).
LIBRARY_HEADERS = {
    "cub": ("cub/*", "cub.cuh"),
    "thrust": ("thrust/*",),
    "cublas": ("cublas*",),
    "cusparse": ("cusparse*",),
    "cufft": ("cufft*",),
    "curand": ("curand*",),
    "cusolver": ("cusolver*",),
    "cudnn": ("cudnn*",),
}
TEST_ONLY_HEADERS = ("gtest/*", "gmock/*")


@dataclass(frozen=True)
class IncludeProblem:
    path: str  # as shown to the student (relative to the repository, or the system path)
    why: str

    def line(self) -> str:
        return f"{self.path}: {self.why}"


class PreprocessError(Exception):
    """The preprocessor could not list the file's dependencies (a missing header, a syntax error, a limit)."""


def forbidden_header_globs(lab: Lab) -> list[str]:
    """Header globs of the libraries the lab's [forbid] symbols name (cub, thrust, cublas, ...)."""
    words = " ".join(lab.forbidden_symbols).lower()
    return [g for lib, globs in LIBRARY_HEADERS.items() if lib in words for g in globs]


# --- the compiler's dependency list ----------------------------------------------------------------


# What the listing must not do: write an output, or nvcc's and the host compiler's intermediate files into
# the folder where the object's compile, running beside it (grader/grade/prepare.py), keeps its own.
_DROP_WITH_VALUE = {"-o", "-MT", "-MF", "-MQ", "--output-file", "--dependency-output", "-MJ", "--keep-dir", "-keep-dir"}
_DROP = {"-c", "--compile", "-MD", "-MMD", "-M", "-MM", "-MP", "-ptx", "--ptx", "-E", "--keep", "-keep",
         "--save-temps", "-save-temps"}


def dependency_command(compile_command: list[str], out: Path) -> list[str]:
    """The same compile, writing the make-style dependency list to out instead of an object."""
    kept: list[str] = []
    skip = False
    for arg in compile_command:
        if skip:
            skip = False
            continue
        if arg in _DROP:
            continue
        if arg in _DROP_WITH_VALUE:
            skip = True
            continue
        if any(arg.startswith(p + "=") for p in _DROP_WITH_VALUE) or arg.startswith(("-Xcompiler=-save-temps",)):
            continue
        if arg.startswith("-o") and len(arg) > 2:
            continue
        kept.append(arg)
    return kept + ["-M", "-o", str(out)]


def parse_depfile(text: str) -> list[str]:
    """The prerequisites of a make rule ('target: a.h b\\ c.h \\\\\n d.h') with escaped spaces undone."""
    body = text.replace("\\\r\n", " ").replace("\\\n", " ")
    _, sep, deps = body.partition(": ")
    if not sep:
        _, _, deps = body.partition(":")
    out: list[str] = []
    current = ""
    i = 0
    while i < len(deps):
        c = deps[i]
        if c == "\\" and i + 1 < len(deps) and deps[i + 1] in " #":
            current += deps[i + 1]
            i += 2
            continue
        if c.isspace():
            if current:
                out.append(current)
                current = ""
        else:
            current += c
        i += 1
    if current:
        out.append(current)
    return list(dict.fromkeys(out))


def list_dependencies(compile_command: list[str], cwd: Path | None) -> list[str]:
    """Every file the preprocessor opens for this compile (absolute paths). Raises PreprocessError."""
    with tempfile.TemporaryDirectory(prefix="cudalab-deps-") as tmp:
        out = Path(tmp) / "deps.d"
        argv = dependency_command(compile_command, out)
        limits = process.Limits(file_bytes=64 << 20, address_space=PREPROCESS_MEMORY_BYTES, cpu_s=None)
        res = process.run(argv, PREPROCESS_TIMEOUT_S, cwd=cwd, limits=limits)
        if res.timed_out:
            raise PreprocessError(f"the preprocessor did not finish within {PREPROCESS_TIMEOUT_S:g} s "
                                  "(an #include of something that never ends?)")
        if res.returncode != 0:
            raise PreprocessError(_first_error(res.output) or f"the preprocessor failed (exit code {res.returncode})")
        try:
            text = out.read_text(errors="replace")
        except OSError as err:
            raise PreprocessError(f"the preprocessor wrote no dependency list ({err.strerror})") from None
    base = cwd or Path.cwd()
    return [str((base / d) if not os.path.isabs(d) else Path(d)) for d in parse_depfile(text)]


def _first_error(output: str) -> str:
    for line in output.splitlines():
        if re.search(r"\b(error|fatal)\b", line, re.I):
            return line.strip()[:300]
    return ""


# --- which directories are which -------------------------------------------------------------------


def _search_list(stderr: str) -> list[str]:
    """The directories of every '#include <...> search starts here:' block of a compiler's -v output."""
    dirs, inside = [], False
    for line in stderr.splitlines():
        if line.startswith("#include <...> search starts here"):
            inside = True
            continue
        if line.startswith("End of search list"):
            inside = False
            continue
        if inside and line.strip():
            dirs.append(os.path.realpath(line.strip().split(" (")[0]))
    return list(dict.fromkeys(dirs))


@functools.lru_cache(maxsize=32)
def _host_include_dirs(key: tuple[str, ...]) -> tuple[str, ...]:
    command = list(key)
    with tempfile.TemporaryDirectory(prefix="cudalab-dirs-") as tmp:
        empty = Path(tmp) / "empty.cu"
        empty.write_text("")
        argv = dependency_command(command, Path(tmp) / "deps.d")[:-3]  # no -M -o: preprocess only
        argv = [a for a in argv if a != "-x" and a != "cu"] + ["-E", "-Xcompiler", "-v", "-x", "cu", str(empty),
                                                                 "-o", str(Path(tmp) / "out.ii")]
        res = process.run(argv, PREPROCESS_TIMEOUT_S, cwd=Path(tmp))
    return tuple(_search_list(res.stderr + res.stdout))


def compiler_include_dirs(compile_command: list[str] | None = None) -> tuple[str, ...]:
    """The host compiler's own #include <...> search list (libstdc++, libc, the compiler's headers), as
    the compile itself sees it: its command with the source swapped for an empty file and -v asked of
    the host compiler (nvcc's host compiler, which need not be PATH's c++)."""
    if compile_command:
        key = tuple(a for a in compile_command if not a.endswith((".cu", ".o")) and not a.startswith("-o"))
        dirs = _host_include_dirs(key)
        if dirs:
            return dirs
    return _fallback_include_dirs()


@functools.lru_cache(maxsize=1)
def _fallback_include_dirs() -> tuple[str, ...]:
    try:
        proc = subprocess.run(["c++", "-E", "-x", "c++", "-v", "/dev/null"], capture_output=True, text=True,
                              errors="replace", timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ("/usr/include", "/usr/local/include")
    return tuple(_search_list(proc.stderr)) or ("/usr/include", "/usr/local/include")


def toolkit_include_dirs(nvcc: str | None) -> tuple[str, ...]:
    """The CUDA toolkit's include directories (include/ and its CCCL folder), from where nvcc lives."""
    if not nvcc:
        return ()
    root = Path(os.path.realpath(nvcc)).parent.parent
    dirs = []
    for d in (root / "include", root / "targets" / "x86_64-linux" / "include",
              root / "targets" / "x86_64-linux" / "include" / "cccl", root / "include" / "cccl"):
        if d.is_dir():
            dirs.append(os.path.realpath(d))
    return tuple(dict.fromkeys(dirs))


def _under(path: str, root: str) -> str | None:
    """path relative to root when it lies under it, else None."""
    root = root.rstrip(os.sep)
    if path == root:
        return ""
    return path[len(root) + 1:] if path.startswith(root + os.sep) else None


@dataclass(frozen=True)
class IncludePolicy:
    repo: str  # the repository root (realpath)
    lab_dir: str  # labs/NN-slug (realpath)
    sources: tuple[str, ...]  # the student's own file(s) (realpath)
    toolkit: tuple[str, ...]
    system: tuple[str, ...]
    forbidden: tuple[str, ...]  # header globs of the lab's forbidden libraries

    @classmethod
    def for_lab(cls, lab: Lab, sources: list[Path], nvcc: str | None,
                compile_command: list[str] | None = None) -> IncludePolicy:
        return cls(os.path.realpath(lab.root), os.path.realpath(lab.path),
                   tuple(os.path.realpath(s) for s in sources), toolkit_include_dirs(nvcc),
                   compiler_include_dirs(compile_command), tuple(forbidden_header_globs(lab)))

    def shown(self, path: str) -> str:
        rel = _under(path, self.repo)
        return rel if rel is not None else path

    def problem(self, dep: str) -> str:
        """Why the file dep may not be read by the student's file ('' when it may)."""
        if dep.startswith(("/proc/", "/dev/", "/sys/")):
            return "a lab file may not read files of the running system (/proc, /dev, /sys)"
        path = os.path.realpath(dep)
        if path in self.sources:
            return ""
        in_repo = _under(path, self.repo)
        if in_repo is not None:
            in_lab = _under(path, self.lab_dir)
            if in_lab is not None and "/" not in in_lab and in_lab.endswith(CONTRACT_SUFFIXES):
                return ""
            if in_repo.startswith("common/include/cudalab/") and Path(in_repo).name in STUDENT_HEADERS:
                return ""
            if in_repo.startswith("solutions/") or "test_hidden" in in_repo:
                return "the reference solutions and hidden tests are not yours to include"
            if Path(in_repo).name.startswith("test_"):
                return "the tests are not yours to include"
            if in_repo.startswith("common/include/cudalab/"):
                return ("this cudalab header belongs to the tests; a lab file may include "
                        + ", ".join(f"<cudalab/{h}>" for h in STUDENT_HEADERS))
            return "only the lab's own header and standard, CUDA or cudalab headers may be included"
        for root in self.toolkit + self.system:
            rel = _under(path, root)
            if rel is None:
                continue
            if any(fnmatch.fnmatchcase(rel, g) for g in TEST_ONLY_HEADERS):
                return "GoogleTest belongs to the tests; a lab file must not include it"
            if any(fnmatch.fnmatchcase(rel, g) for g in self.forbidden):
                return f"this lab forbids the library ({rel.split('/')[0]}): write the code yourself"
        for root in self.toolkit + self.system:
            if _under(path, root) is not None:
                return ""
        return "a lab file may include only its contract header and standard, CUDA or cudalab headers"


def check_dependencies(deps: list[str], policy: IncludePolicy) -> list[IncludeProblem]:
    problems = []
    for dep in deps:
        why = policy.problem(dep)
        if why:
            shown = dep if dep.startswith(("/proc/", "/dev/", "/sys/")) else policy.shown(os.path.realpath(dep))
            problems.append(IncludeProblem(shown, why))
    return problems


def compile_command_of(source: Path, build_dir: Path | None, target: str) -> tuple[list[str], Path] | None:
    """The command CMake compiles source with for target (compile_commands.json), and its directory."""
    from grader.build.compiledb import CompileDb

    db = CompileDb.load(build_dir)
    entry = db.entry(source, target) if db is not None else None
    if db is None or entry is None:
        return None
    return db.command(entry), db.directory(entry)
