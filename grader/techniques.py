"""What the student's file compiles to, read without a GPU: forbidden symbols and required techniques.

- Symbols: `nm -C` on the object CMake built for the graded target (found through compile_commands.json;
  compiled here with the same command when it is not there). Every symbol counts, defined or not: CUB
  and Thrust are header-only, so their code shows up as defined symbols of the student object.
- Forbidden: a global list (main, GoogleTest internals, ending the process, starting processes, loading
  code, opening files, signals to other processes, raw system calls, sockets, limits) plus the lab's
  [forbid] globs. A hit means the binary is never run.
- Techniques ([[technique]] in lab.toml): kind "symbol" is a regular expression over the undefined host
  symbols; "ptx" over the PTX of the kernel whose name contains `kernel` (and of the device functions it
  calls), or over the whole PTX; "source" over the student file with comments stripped. The PTX comes
  from nvcc -ptx with the target's own flags (lab 11's -rdc=true included). A missing technique
  withholds its points (or the whole task's) from its task, with a note and a technique_missing entry.
"""

from __future__ import annotations

import fnmatch
import json
import re
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from .cmake import find_nvcc
from .labs import Lab, Technique
from .results import Category, LabResult, Status, TestResult
from .sandbox import strip_comments

COMPILE_TIMEOUT_S = 300.0
NM_TIMEOUT_S = 60.0
DEFAULT_VIRTUAL_ARCH = "compute_90"
TECHNIQUE_SUITE = "Techniques"

_EXIT = "ends the process"
_PROC = "starts another program or process"
_LOAD = "loads code at run time"
_FILE = "opens, creates or changes files"
_SYS = "reaches past the test harness"

# (glob over demangled symbol names, why it is forbidden). Exact C names match only themselves.
GLOBAL_FORBIDDEN: tuple[tuple[str, str], ...] = (
    ("main", "the test harness has its own main()"),
    ("*testing::*", "GoogleTest internals belong to the test harness"),
    ("exit", _EXIT), ("_exit", _EXIT), ("_Exit", _EXIT), ("quick_exit", _EXIT), ("at_quick_exit", _EXIT),
    ("fork", _PROC), ("vfork", _PROC), ("clone", _PROC), ("clone3", _PROC), ("system", _PROC),
    ("popen", _PROC), ("execl", _PROC), ("execle", _PROC), ("execlp", _PROC), ("execv", _PROC),
    ("execve", _PROC), ("execvp", _PROC), ("execvpe", _PROC), ("execveat", _PROC), ("fexecve", _PROC),
    ("posix_spawn", _PROC), ("posix_spawnp", _PROC), ("daemon", _PROC), ("pthread_atfork", _PROC),
    ("dlopen", _LOAD), ("dlmopen", _LOAD), ("dlsym", _LOAD), ("dlvsym", _LOAD),
    ("fopen", _FILE), ("fopen64", _FILE), ("freopen", _FILE), ("freopen64", _FILE), ("fdopen", _FILE),
    ("open", _FILE), ("open64", _FILE), ("openat", _FILE), ("openat64", _FILE), ("creat", _FILE),
    ("creat64", _FILE), ("rename", _FILE), ("renameat", _FILE), ("renameat2", _FILE), ("unlink", _FILE),
    ("unlinkat", _FILE), ("remove", _FILE), ("truncate", _FILE), ("truncate64", _FILE), ("mkdir", _FILE),
    ("mkdirat", _FILE), ("symlink", _FILE), ("symlinkat", _FILE), ("link", _FILE), ("linkat", _FILE),
    ("chmod", _FILE), ("mkstemp", _FILE), ("mkstemp64", _FILE), ("mkostemp", _FILE), ("tmpfile", _FILE),
    ("tmpfile64", _FILE), ("*std::basic_*fstream<*", _FILE), ("*std::basic_filebuf<*", _FILE),
    ("*std::filesystem::*", _FILE), ("*std::__fs::filesystem::*", _FILE),
    ("kill", _SYS), ("killpg", _SYS), ("tgkill", _SYS), ("ptrace", _SYS), ("syscall", _SYS),
    ("socket", _SYS), ("connect", _SYS), ("setrlimit", _SYS), ("setrlimit64", _SYS), ("prlimit", _SYS),
    ("prlimit64", _SYS), ("chdir", _SYS), ("chroot", _SYS), ("setenv", _SYS), ("putenv", _SYS),
    ("unsetenv", _SYS),
)


class InspectError(Exception):
    """The object or its PTX could not be produced or read."""


# --- symbols ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Symbol:
    name: str  # demangled
    type: str  # nm's letter: U undefined, T text, W weak, ...

    @property
    def undefined(self) -> bool:
        return self.type in ("U", "w", "v")  # lower-case w/v: weak and undefined


_NM_LINE = re.compile(r"^\s*(?:[0-9a-fA-F]+\s+)?([A-Za-z?\-])\s+(.+?)\s*$")


def parse_nm(text: str) -> list[Symbol]:
    symbols = []
    for line in text.splitlines():
        m = _NM_LINE.match(line)
        if m and not line.endswith(":"):
            symbols.append(Symbol(name=m.group(2), type=m.group(1)))
    return symbols


def read_symbols(obj: Path, nm: str | None = None) -> list[Symbol]:
    nm = nm or shutil.which("nm")
    if nm is None:
        raise InspectError("nm is not installed (binutils)")
    try:
        proc = subprocess.run([nm, "-C", str(obj)], capture_output=True, text=True, errors="replace",
                              timeout=NM_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise InspectError(f"nm {obj.name} failed: {err}") from None
    if proc.returncode != 0:
        raise InspectError(f"nm {obj.name} failed: {proc.stderr.strip()[:300]}")
    return parse_nm(proc.stdout)


_EXIT_WORD = re.compile(r"\b(?:_?exit|_Exit|quick_exit)\b")


def _mentions_exit(sources: Iterable[Path]) -> bool:
    for src in sources:
        try:
            code = strip_comments(src.read_text(errors="replace"))
        except OSError:
            continue
        code = re.sub(r'"(?:\\.|[^"\\\n])*"', '""', code)  # string literals
        if _EXIT_WORD.search(code):
            return True
    return False


def _base_name(name: str) -> str:
    """'exit@GLIBC_2.2.5' -> 'exit' (versioned names appear in linked binaries)."""
    return name.split("@", 1)[0]


def forbidden_hits(symbols: Iterable[Symbol], lab: Lab | None = None) -> list[str]:
    """One line per forbidden kind of symbol found: 'exit: ends the process',
    'std::basic_ofstream<>::basic_ofstream(...) and 3 more like it: opens, creates or changes files'."""
    lab_globs = [(g, f"this lab forbids {g}") for g in (lab.forbidden_symbols if lab is not None else ())]
    found: dict[str, list[str]] = {}  # pattern -> symbols
    whys: dict[str, str] = {}
    for sym in symbols:
        name = _base_name(sym.name)
        for pattern, why in (*GLOBAL_FORBIDDEN, *lab_globs):
            if fnmatch.fnmatchcase(name, pattern):
                names = found.setdefault(pattern, [])
                if name not in names:
                    names.append(name)
                whys[pattern] = why
                break
    lines = []
    for pattern, names in found.items():
        more = f" and {len(names) - 1} more like it" if len(names) > 1 else ""
        lines.append(f"{_short(_untemplated(names[0]))}{more}: {whys[pattern]}")
    return lines


def _untemplated(name: str) -> str:
    """'std::basic_ofstream<char, std::char_traits<char> >::open(...)' -> 'std::basic_ofstream<>::open(...)'."""
    out, depth = [], 0
    for c in name:
        if c == "<":
            depth += 1
            if depth == 1:
                out.append("<")
        elif c == ">" and depth:
            depth -= 1
            if depth == 0:
                out.append(">")
        elif depth == 0:
            out.append(c)
    return "".join(out)


def _short(name: str, limit: int = 120) -> str:
    return name if len(name) <= limit else name[: limit - 3] + "..."


# --- compiling the student's file ------------------------------------------------------------------


def _rdc(lab: Lab) -> bool:
    try:
        return bool(re.search(r"\bRDC\b", (lab.path / "CMakeLists.txt").read_text()))
    except OSError:
        return False


def fallback_command(root: Path, lab: Lab, source: Path, nvcc: str) -> list[str]:
    """An nvcc -c command like CMake's (used when the build directory has no compile_commands.json)."""
    cmd = [nvcc, f"-I{lab.path}", f"-I{root / 'common' / 'include'}", "-O3", "-DNDEBUG",
           f"--generate-code=arch={DEFAULT_VIRTUAL_ARCH},code=[{DEFAULT_VIRTUAL_ARCH},sm_{DEFAULT_VIRTUAL_ARCH[8:]}]",
           "-lineinfo", "-std=c++17"]
    if _rdc(lab):
        cmd.append("-rdc=true")
    return cmd + ["-x", "cu", "-c", str(source)]


_DROP_WITH_VALUE = {"-o", "-MT", "-MF", "-MQ", "-gencode", "--generate-code", "-arch", "--gpu-architecture",
                    "-code", "--gpu-code", "--output-file", "--dependency-output"}
_DROP = {"-c", "--compile", "-MD", "-MMD", "-ptx", "--ptx"}


def to_ptx_command(cmd: list[str], out: Path) -> list[str]:
    """The same compile, producing PTX for one virtual architecture (the first the command names)."""
    arch = DEFAULT_VIRTUAL_ARCH
    for arg in cmd:
        m = re.search(r"compute_(\d+[a-z]?)", arg)
        if m:
            arch = f"compute_{m.group(1)}"
            break
    kept: list[str] = []
    skip = False
    for arg in cmd:
        if skip:
            skip = False
            continue
        if arg in _DROP:
            continue
        if arg in _DROP_WITH_VALUE:
            skip = True
            continue
        if any(arg.startswith(p + "=") for p in _DROP_WITH_VALUE) or arg.startswith(("-arch=", "-gencode=")):
            continue
        if arg.startswith("-o") and len(arg) > 2 and not arg.startswith("-o="):
            continue
        kept.append(arg)
    return kept + [f"-arch={arch}", "-ptx", "-o", str(out)]


def to_object_command(cmd: list[str], out: Path) -> list[str]:
    """The same compile, writing its object to out."""
    kept: list[str] = []
    skip = False
    for arg in cmd:
        if skip:
            skip = False
            continue
        if arg in ("-o", "-MT", "-MF", "-MQ"):
            skip = True
            continue
        if arg in ("-MD", "-MMD"):
            continue
        kept.append(arg)
    return kept + ["-o", str(out)]


@dataclass
class CompileDb:
    """compile_commands.json of one build directory."""

    build_dir: Path
    entries: list[dict] = field(default_factory=list)

    @classmethod
    def load(cls, build_dir: Path | None) -> CompileDb | None:
        if build_dir is None:
            return None
        try:
            data = json.loads((build_dir / "compile_commands.json").read_text())
        except (OSError, ValueError):
            return None
        return cls(build_dir, [e for e in data if isinstance(e, dict)]) if isinstance(data, list) else None

    def entry(self, source: Path, target: str) -> dict | None:
        src = str(source.resolve())
        hits = [e for e in self.entries if str(Path(e.get("file", "")).resolve()) == src]
        mine = [e for e in hits if f"/{target}.dir/" in _output(e)]
        return (mine or [])[0] if mine else None

    def command(self, entry: dict) -> list[str]:
        if isinstance(entry.get("arguments"), list):
            return [str(a) for a in entry["arguments"]]
        return shlex.split(str(entry.get("command", "")))

    def object_of(self, entry: dict) -> Path | None:
        out = _output(entry)
        if not out:
            return None
        path = Path(out)
        return path if path.is_absolute() else Path(entry.get("directory", self.build_dir)) / path


def _output(entry: dict) -> str:
    if entry.get("output"):
        return str(entry["output"])
    args = entry["arguments"] if isinstance(entry.get("arguments"), list) else shlex.split(str(entry.get("command", "")))
    for i, a in enumerate(args):
        if a == "-o" and i + 1 < len(args):
            return str(args[i + 1])
    return ""


def _run(cmd: list[str], cwd: Path | None, what: str) -> None:
    try:
        proc = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              errors="replace", timeout=COMPILE_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise InspectError(f"{what} failed: {err}") from None
    if proc.returncode != 0:
        line = next((ln.strip() for ln in proc.stdout.splitlines() if "error" in ln.lower()), proc.stdout.strip()[:300])
        raise InspectError(f"{what} failed: {line[:300]}")


# --- PTX -------------------------------------------------------------------------------------------

_FUNC_HEAD = re.compile(
    r"^[ \t]*(?:\.(?:visible|weak|extern)[ \t]+)*\.(entry|func)[ \t]+(?:\([^)]*\)[ \t]*)?([A-Za-z_$%][\w$]*)", re.MULTILINE
)
_CALL = re.compile(r"\bcall(?:\.uni)?\s+(?:\([^)]*\)\s*,\s*)?([A-Za-z_$][\w$]*)")


@dataclass(frozen=True)
class PtxFunction:
    name: str
    kind: str  # "entry" (a kernel) or "func"
    body: str


def ptx_functions(ptx: str) -> dict[str, PtxFunction]:
    """Kernels and device functions with a body, by mangled name."""
    found: dict[str, PtxFunction] = {}
    for m in _FUNC_HEAD.finditer(ptx):
        brace, semi = ptx.find("{", m.end()), ptx.find(";", m.end())
        if brace < 0 or (0 <= semi < brace):
            continue  # a declaration
        depth, i = 0, brace
        while i < len(ptx):
            if ptx[i] == "{":
                depth += 1
            elif ptx[i] == "}":
                depth -= 1
                if depth == 0:
                    break
            i += 1
        found[m.group(2)] = PtxFunction(m.group(2), m.group(1), ptx[m.start():i + 1])
    return found


def kernel_ptx(ptx: str, key: str) -> tuple[str, list[str]]:
    """The PTX of every kernel whose name contains key, with the device functions they call
    (transitively); and the names of those kernels."""
    funcs = ptx_functions(ptx)
    kernels = [f for f in funcs.values() if f.kind == "entry" and key in f.name]
    seen: set[str] = set()
    parts: list[str] = []
    stack = [k.name for k in kernels]
    while stack:
        name = stack.pop()
        if name in seen or name not in funcs:
            continue
        seen.add(name)
        parts.append(funcs[name].body)
        stack += [c for c in _CALL.findall(funcs[name].body) if c not in seen]
    return "\n".join(parts), [k.name for k in kernels]


# --- techniques ------------------------------------------------------------------------------------


@dataclass
class TechniqueOutcome:
    technique: Technique
    found: bool
    where: str  # what was searched
    detail: str = ""  # why it could not be found, beyond "no match"

    @property
    def message(self) -> str:
        t = self.technique
        text = f"technique missing: {t.message or t.pattern}. Expected /{t.pattern}/ in {self.where}"
        return text + (f" ({self.detail})" if self.detail else "")


def check_technique(t: Technique, symbols: list[Symbol] | None, ptx: str | None, source_text: str | None) -> TechniqueOutcome:
    pattern = re.compile(t.pattern)
    if t.kind == "symbol":
        where = "the undefined symbols of the compiled file (nm)"
        names = [s.name for s in symbols or [] if s.undefined]
        return TechniqueOutcome(t, any(pattern.search(n) for n in names), where)
    if t.kind == "source":
        where = "the source (comments stripped)"
        return TechniqueOutcome(t, bool(pattern.search(strip_comments(source_text or ""))), where)
    if t.kernel:
        text, kernels = kernel_ptx(ptx or "", t.kernel)
        where = f"the PTX of {t.kernel}"
        if not kernels:
            return TechniqueOutcome(t, False, where, f"no kernel named like {t.kernel} was compiled")
        return TechniqueOutcome(t, bool(pattern.search(text)), where)
    return TechniqueOutcome(t, bool(pattern.search(ptx or "")), "the PTX of the file")


@dataclass
class Inspection:
    """What one student file compiles to, as far as it could be read."""

    symbols: list[Symbol] | None = None
    ptx: str | None = None
    notes: list[str] = field(default_factory=list)


class Inspector:
    """Reads the graded object (and its PTX) of a lab target. build_dir: the build directory that
    built the target (compile_commands.json, the object); None: compile here with a command like CMake's."""

    def __init__(self, root: Path, nvcc: str | None = None, nm: str | None = None) -> None:
        self.root = root
        self.nvcc = nvcc or find_nvcc()
        self.nm = nm or shutil.which("nm")

    def _command(self, lab: Lab, source: Path, target: str, build_dir: Path | None) -> tuple[list[str], Path | None, Path | None]:
        """(compile command, its working directory, the object CMake built or None)."""
        db = CompileDb.load(build_dir)
        entry = db.entry(source, target) if db else None
        if entry is not None and db is not None:
            return db.command(entry), Path(entry.get("directory", db.build_dir)), db.object_of(entry)
        if self.nvcc is None:
            raise InspectError("nvcc was not found, so the compiled file cannot be inspected")
        return fallback_command(self.root, lab, source, self.nvcc), None, None

    def symbols(self, lab: Lab, source: Path, target: str, build_dir: Path | None) -> list[Symbol]:
        """The object's symbols (nm -C); an undefined `exit` only when the source names it."""
        cmd, cwd, obj = self._command(lab, source, target, build_dir)
        if obj is not None and obj.is_file():
            return self._own_symbols(obj, source)
        with tempfile.TemporaryDirectory(prefix="cudalab-inspect-") as tmp:
            out = Path(tmp) / "student.o"
            _run(to_object_command(cmd, out), cwd, f"compiling {source.name}")
            return self._own_symbols(out, source)

    def _own_symbols(self, obj: Path, source: Path) -> list[Symbol]:
        # nvcc's own host code calls exit (the stub of every __device__ function; with -rdc=true more
        # of it), and what that code looks like varies with the toolkit and the compiler: an undefined
        # `exit` counts only when the student's source names it. The other forbidden symbols are never
        # emitted by nvcc, so they count wherever they appear.
        symbols = read_symbols(obj, self.nm)
        if _mentions_exit([source]):
            return symbols
        return [s for s in symbols if not (s.undefined and _base_name(s.name) == "exit")]

    def ptx(self, lab: Lab, source: Path, target: str, build_dir: Path | None) -> str:
        cmd, cwd, _ = self._command(lab, source, target, build_dir)
        with tempfile.TemporaryDirectory(prefix="cudalab-ptx-") as tmp:
            out = Path(tmp) / "student.ptx"
            _run(to_ptx_command(cmd, out), cwd, f"nvcc -ptx {source.name}")
            return out.read_text(errors="replace")

    def forbidden(self, lab: Lab, sources: list[Path], target: str, build_dir: Path | None) -> tuple[list[str], Inspection]:
        """Forbidden symbols of the target's student object(s), and what was read."""
        insp = Inspection(symbols=[])
        for source in sources:
            try:
                assert insp.symbols is not None
                insp.symbols += self.symbols(lab, source, target, build_dir)
            except InspectError as err:
                insp.notes.append(f"forbidden symbols not checked for {source.name}: {err}")
                insp.symbols = None
                break
        return (forbidden_hits(insp.symbols, lab) if insp.symbols is not None else []), insp

    def techniques(self, lab: Lab, sources: list[Path], target: str, build_dir: Path | None,
                   inspection: Inspection | None = None) -> tuple[list[TechniqueOutcome], list[str]]:
        """Check every [[technique]] of the lab. Returns outcomes (only for techniques that could be
        checked) and notes about the ones that could not."""
        if not lab.techniques:
            return [], []
        notes: list[str] = []
        symbols = inspection.symbols if inspection is not None else None
        kinds = {t.kind for t in lab.techniques}
        if "symbol" in kinds and symbols is None:
            try:
                symbols = [s for src in sources for s in self.symbols(lab, src, target, build_dir)]
            except InspectError as err:
                notes.append(f"symbol techniques not checked: {err}")
        ptx: str | None = None
        if "ptx" in kinds:
            try:
                ptx = "\n".join(self.ptx(lab, src, target, build_dir) for src in sources)
            except InspectError as err:
                notes.append(f"PTX techniques not checked: {err}")
        text: str | None = None
        if "source" in kinds:
            try:
                text = "\n".join(src.read_text(errors="replace") for src in sources)
            except OSError as err:
                notes.append(f"source techniques not checked: {err}")
        outcomes = []
        for t in lab.techniques:
            available = {"symbol": symbols is not None, "ptx": ptx is not None, "source": text is not None}[t.kind]
            if available:
                outcomes.append(check_technique(t, symbols, ptx, text))
        return outcomes, notes


# --- scoring ---------------------------------------------------------------------------------------


def apply_techniques(lab: Lab, result: LabResult, outcomes: list[TechniqueOutcome], binary: str = "student") -> float:
    """After scoring: withhold points for missing techniques, note them on their tasks, and add a
    technique_missing entry per missing technique. Returns the points withheld."""
    missing = [o for o in outcomes if not o.found]
    withheld_total = 0.0
    by_task: dict[str, list[TechniqueOutcome]] = {}
    for o in missing:
        by_task.setdefault(o.technique.task, []).append(o)
    for task_id, outs in by_task.items():
        ts = next((t for t in result.tasks if t.id == task_id), None)
        whole = any(o.technique.points is None for o in outs)
        cap = float("inf") if whole else sum(o.technique.points or 0.0 for o in outs)
        withheld = 0.0
        if ts is not None:
            take = min(ts.earned, cap)
            ts.earned = round(ts.earned - take, 4)
            withheld += take
            take = min(ts.perf_earned, cap - withheld)
            ts.perf_earned = round(ts.perf_earned - take, 4)
            withheld += take
        for k, o in enumerate(outs, start=1):
            points = "the task's points" if o.technique.points is None else f"{o.technique.points:g} points"
            if ts is not None:
                ts.notes.append(f"technique missing: {o.technique.message or o.technique.pattern} ({points} withheld)")
            result.tests.append(TestResult(
                name=f"{TECHNIQUE_SUITE}.{task_id}" + (f"/{k}" if k > 1 else ""),
                status=Status.FAILED,
                kind="correctness",
                binary=binary,
                task=task_id,
                category=Category.TECHNIQUE_MISSING,
                message=o.message + f" ({points} withheld)",
            ))
        withheld_total += withheld
    if withheld_total:
        result.score = round(max(0.0, result.score - withheld_total), 4)
    return withheld_total
