"""The checks of one lab.toml's parsed data for `grader check` (grader/authoring/rubric.py runs them): every key
the grader reads, what each may hold, how points add up, and what the built binaries' tests must match.
Each problem names its file and key."""

from __future__ import annotations

import fnmatch
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grader.authoring.test_names import size_name_problem
from grader.execute.gtest import is_perf_suite
from grader.model.hidden import VISIBILITIES
from grader.model.labs import SCORINGS
from grader.execute.sanitizer import TOOLS as SANITIZER_TOOLS

TOTAL = 100.0  # a lab's points
TECHNIQUE_KINDS = ("symbol", "ptx")  # grader/inspect/techniques.py

# Every key the grader reads, per table (labs.py, sanitizer.py, hidden.py).
KNOWN_KEYS: dict[str, tuple[str, ...]] = {
    "lab": ("title", "student_files", "timeout_s", "max_host_memory_mib"),
    "task": ("id", "title", "points", "tests", "challenge", "hidden", "scoring", "kernels", "checkpoints"),
    "perf": ("test", "task", "points", "full_at", "zero_at", "profile_variants"),
    "technique": ("task", "kind", "pattern", "message", "kernel", "points"),
    "forbid": ("symbols",),
    "allow": ("symbols",),
    "sanitizer": ("tools", "points", "timeout_s", "cost", "skip"),
    "hidden": ("visibility",),
    "geometry": (),  # any name: a size the lab's kernels work in (checked in geometry())
}
ARRAYS = ("task", "perf", "technique")  # [[task]], [[perf]], [[technique]]


@dataclass(frozen=True)
class Problem:
    file: str  # relative to the root: labs/06-reduce/lab.toml
    key: str  # where in it: [[task]] "shuffle" tests
    message: str

    def __str__(self) -> str:
        return f"{self.file}: {self.key}: {self.message}"


@dataclass
class Listing:
    """A lab's tests, as its built binaries list them (None: no binary of that kind is built)."""

    public: list[str] | None = None
    hidden: list[str] | None = None
    public_binary: str = ""  # the binary the public tests came from: lab06_solution
    hidden_binary: str = ""
    hidden_expected: bool = False  # the lab has hidden tests (solutions/NN-slug/test_hidden_<topic>.cu)
    notes: list[str] = field(default_factory=list)  # what was not listed, and why


# --- the checks ---------------------------------------------------------------------------------------------


def relative(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


def _number(value: Any) -> float | None:
    """A TOML number (not a bool, not NaN), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return None if math.isnan(value) else float(value)


def _fmt(x: float) -> str:
    return f"{x:g}"


def glob_problem(glob: Any) -> str:
    """Why a symbol glob is malformed ('' when it is not)."""
    if not isinstance(glob, str):
        return f"{glob!r} is not a string"
    if not glob.strip():
        return "an empty glob"
    if glob != glob.strip():
        return f"{glob!r} has space at its ends (names never do)"
    if set(glob) <= {"*"}:
        return f"{glob!r} matches every name"
    depth = 0
    for ch in glob:  # fnmatch takes a '[' without its ']' literally, which is never what was meant
        if ch == "[":
            depth += 1
        elif ch == "]" and depth:
            depth -= 1
    if depth:
        return f"{glob!r} has a '[' without its ']'"
    return ""


class TomlChecker:
    """The checks of one lab.toml's parsed data; each problem names its key."""

    def __init__(self, data: dict[str, Any], file: str, lab_dir: Path, root: Path, instructor_tree: bool) -> None:
        self.data = data
        self.file = file
        self.lab_dir = lab_dir
        self.root = root
        self.instructor_tree = instructor_tree
        self.problems: list[Problem] = []

    def add(self, key: str, message: str) -> None:
        self.problems.append(Problem(self.file, key, message))

    # -- shape -----------------------------------------------------------------------------------------------

    def table(self, name: str) -> dict[str, Any]:
        value = self.data.get(name, {})
        if isinstance(value, dict):
            return value
        self.add(f"[{name}]", f"is a {type(value).__name__}, not a table")
        return {}

    def entries(self, name: str) -> list[dict[str, Any]]:
        value = self.data.get(name, [])
        if isinstance(value, list) and all(isinstance(e, dict) for e in value):
            return value
        self.add(f"[[{name}]]", f"must be an array of tables ([[{name}]] entries)")
        return []

    def unknown_keys(self) -> None:
        for name, value in self.data.items():
            if name not in KNOWN_KEYS:
                array = isinstance(value, list) and bool(value) and all(isinstance(v, dict) for v in value)
                self.add(f"[{name}]" if isinstance(value, dict) else f"[[{name}]]" if array else name,
                         f"unknown {'table' if isinstance(value, (dict, list)) else 'key'} (the grader reads "
                         + ", ".join(f"[[{k}]]" if k in ARRAYS else f"[{k}]" for k in KNOWN_KEYS) + ")")
                continue
            blocks = value if name in ARRAYS and isinstance(value, list) else [value]
            for i, block in enumerate(blocks):
                if not isinstance(block, dict):
                    continue
                where = self.entry_key(name, block, i) if name in ARRAYS else f"[{name}]"
                if name == "geometry":
                    for key, size in block.items():
                        if not isinstance(size, int) or isinstance(size, bool) or size < 2:
                            self.add(f"[geometry] {key}", f"{size!r} is not a size (a whole number of at least 2)")
                    continue
                for key in block:
                    if key not in KNOWN_KEYS[name]:
                        self.add(f"{where} {key}", f"unknown key (known: {', '.join(KNOWN_KEYS[name])})")

    @staticmethod
    def entry_key(name: str, entry: dict[str, Any], index: int) -> str:
        """[[task]] "shuffle", [[perf]] "ReducePerf.Shuffle/1", [[technique]] #2 (task "shuffle")."""
        if name == "task" and isinstance(entry.get("id"), str):
            return f'[[task]] "{entry["id"]}"'
        if name == "perf" and isinstance(entry.get("test"), str):
            return f'[[perf]] "{entry["test"]}"'
        if name == "technique" and isinstance(entry.get("task"), str):
            return f'[[technique]] #{index + 1} (task "{entry["task"]}")'
        return f"[[{name}]] #{index + 1}"

    def number(self, key: str, value: Any, minimum: float = 0.0, positive: bool = False) -> float | None:
        x = _number(value)
        if x is None:
            self.add(key, f"{value!r} is not a number")
        elif x < minimum or (positive and x <= 0):
            self.add(key, f"{_fmt(x)} must be {'above' if positive else 'at least'} {_fmt(minimum)}")
            return None
        return x

    def strings(self, key: str, value: Any, what: str) -> list[str]:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            self.add(key, f"must be a list of {what} (strings)")
            return []
        return value

    # -- [lab] -----------------------------------------------------------------------------------------------

    def lab(self) -> str:
        """[lab]'s checks; returns the topic (the first student file's stem), or ''."""
        if "lab" not in self.data:
            self.add("[lab]", "missing")
            return ""
        meta = self.table("lab")
        if not isinstance(meta.get("title"), str) or not meta.get("title", "").strip():
            self.add("[lab] title", "missing or empty")
        for key, positive in (("timeout_s", True), ("max_host_memory_mib", True)):
            if key in meta:
                self.number(f"[lab] {key}", meta[key], positive=positive)
        if "student_files" not in meta:
            self.add("[lab] student_files", "missing")
            return ""
        files = self.strings("[lab] student_files", meta["student_files"], "file names")
        if not files:
            if isinstance(meta["student_files"], list):
                self.add("[lab] student_files", "is empty")
            return ""
        solution_dir = self.root / "solutions" / self.lab_dir.name
        for name in files:
            rel = Path(name)
            if rel.is_absolute() or ".." in rel.parts or not name.strip():
                self.add("[lab] student_files", f"{name!r} is not a file name inside the lab directory")
                continue
            if not (self.lab_dir / rel).is_file():
                self.add("[lab] student_files", f"{name} does not exist in {relative(self.lab_dir, self.root)}/")
            if solution_dir.is_dir() and not (solution_dir / rel).is_file():
                self.add("[lab] student_files", f"{name} does not exist in {relative(solution_dir, self.root)}/, so "
                                                "the reference is never built")
        topic = Path(files[0]).stem
        if not (self.lab_dir / f"test_{topic}.cu").is_file():
            self.add("[lab] student_files", f"the first file names the topic '{topic}', but "
                                            f"{relative(self.lab_dir, self.root)}/test_{topic}.cu does not exist")
        return topic

    # -- tasks, perf, techniques -----------------------------------------------------------------------------

    def tasks(self) -> list[dict[str, Any]]:
        tasks = self.entries("task")
        seen: set[str] = set()
        for i, t in enumerate(tasks):
            key = self.entry_key("task", t, i)
            task_id = t.get("id")
            if not isinstance(task_id, str) or not task_id.strip():
                self.add(f"{key} id", "missing or empty")
            elif task_id in seen:
                self.add(f"{key} id", "appears twice (a perf entry or technique could mean either)")
            else:
                seen.add(task_id)
            if "points" in t:
                self.number(f"{key} points", t["points"])
            if "tests" not in t:
                self.add(f"{key} tests", "missing")
            elif not self.strings(f"{key} tests", t["tests"], "test globs") and isinstance(t["tests"], list):
                self.add(f"{key} tests", "is empty: the task can never earn its points")
            for flag in ("challenge", "hidden"):
                if flag in t and not isinstance(t[flag], bool):
                    self.add(f"{key} {flag}", f"{t[flag]!r} is not true or false")
            if "scoring" in t and t["scoring"] not in SCORINGS:
                self.add(f"{key} scoring", f"{t['scoring']!r} is not one of {', '.join(SCORINGS)}")
            if "kernels" in t:
                for glob in self.strings(f"{key} kernels", t["kernels"], "kernel name globs"):
                    if not glob.strip():
                        self.add(f"{key} kernels", "an empty glob owns no kernel")
            self.checkpoints(key, t.get("checkpoints", []))
        return tasks

    def checkpoints(self, key: str, value: Any) -> None:
        """A task's checkpoints: a list of tables, each a title, test globs and optionally max_n."""
        if not isinstance(value, list) or not all(isinstance(c, dict) for c in value):
            self.add(f"{key} checkpoints", "must be a list of { title = ..., tests = [...], max_n = ... } tables")
            return
        for j, c in enumerate(value, start=1):
            where = f"{key} checkpoint #{j}"
            extra = sorted(set(c) - {"title", "tests", "max_n"})
            if extra:
                self.add(where, f"unknown key(s) {', '.join(extra)} (title, tests, max_n)")
            if not isinstance(c.get("title"), str) or not c["title"].strip():
                self.add(f"{where} title", "missing or empty: the report shows it as the step's name")
            if not c.get("tests"):
                self.add(f"{where} tests", "missing or empty")
            else:
                self.strings(f"{where} tests", c["tests"], "test globs")
            if "max_n" in c and (not isinstance(c["max_n"], int) or isinstance(c["max_n"], bool) or c["max_n"] < 1):
                self.add(f"{where} max_n", f"{c['max_n']!r} is not a size (a whole number of at least 1)")

    def task_ids(self) -> set[str]:
        return {t["id"] for t in self.data.get("task", []) if isinstance(t, dict) and isinstance(t.get("id"), str)}

    def perf(self) -> list[dict[str, Any]]:
        entries = self.entries("perf")
        ids = self.task_ids()
        for i, p in enumerate(entries):
            key = self.entry_key("perf", p, i)
            if not isinstance(p.get("test"), str) or not p.get("test", "").strip():
                self.add(f"{key} test", "missing or empty")
            if "task" in p and p["task"] not in ids:
                self.add(f"{key} task", f"names unknown task {p['task']!r} (tasks: {', '.join(sorted(ids)) or 'none'})")
            points = self.number(f"{key} points", p["points"]) if "points" in p else 0.0
            full = self.number(f"{key} full_at", p["full_at"], positive=True) if "full_at" in p else 0.9
            zero = self.number(f"{key} zero_at", p["zero_at"]) if "zero_at" in p else 0.5
            if points and full is not None and zero is not None and not zero < full:
                self.add(f"{key} zero_at", f"{_fmt(zero)} must be below full_at ({_fmt(full)})")
        return entries

    def techniques(self) -> None:
        ids = self.task_ids()
        for i, t in enumerate(self.entries("technique")):
            key = self.entry_key("technique", t, i)
            if "task" not in t:
                self.add(f"{key} task", "missing")
            elif t["task"] not in ids:
                self.add(f"{key} task", f"names unknown task {t['task']!r}")
            kind = t.get("kind")
            if kind not in TECHNIQUE_KINDS:
                self.add(f"{key} kind", f"{kind!r} is not one of {', '.join(TECHNIQUE_KINDS)}")
            pattern = t.get("pattern")
            if not isinstance(pattern, str) or not pattern:
                self.add(f"{key} pattern", "missing or empty")
            else:
                try:
                    re.compile(pattern)
                except re.error as err:
                    self.add(f"{key} pattern", f"{pattern!r} is not a regular expression: {err}")
            if kind == "ptx" and (not isinstance(t.get("kernel"), str) or not t.get("kernel", "").strip()):
                self.add(f"{key} kernel", "missing: a \"ptx\" technique names the kernel whose PTX must match")
            if "points" in t:
                self.number(f"{key} points", t["points"])
            if "message" in t and not isinstance(t["message"], str):
                self.add(f"{key} message", "is not a string")

    # -- symbols, sanitizer, hidden --------------------------------------------------------------------------

    def symbols(self) -> None:
        for name in ("forbid", "allow"):
            table = self.table(name)
            if "symbols" not in table:
                continue
            for glob in self.strings(f"[{name}] symbols", table["symbols"], "globs"):
                why = glob_problem(glob)
                if why:
                    self.add(f"[{name}] symbols", why)

    def sanitizer(self) -> float:
        table = self.table("sanitizer")
        if "tools" in table:
            for tool in self.strings("[sanitizer] tools", table["tools"], "tool names"):
                if tool not in SANITIZER_TOOLS:
                    self.add("[sanitizer] tools", f"unknown tool {tool!r} (known: {', '.join(SANITIZER_TOOLS)})")
        if "timeout_s" in table:
            self.number("[sanitizer] timeout_s", table["timeout_s"])
        if "cost" in table:
            cost = self.number("[sanitizer] cost", table["cost"])
            if cost is not None and cost > 1:
                self.add("[sanitizer] cost", f"{cost:g} is more than 1 (the whole task)")
        if "skip" in table:
            self.sanitizer_skip(table)
        points = self.number("[sanitizer] points", table["points"]) if "points" in table else 0.0
        return points or 0.0

    def sanitizer_skip(self, table: dict[str, Any]) -> None:
        """[sanitizer] skip = { racecheck = ["Quicksort*"] }: per tool, test globs it leaves out."""
        skip = table["skip"]
        if not isinstance(skip, dict):
            self.add("[sanitizer] skip", "is not a table of tool = [test globs]")
            return
        tools = table.get("tools", [])
        for tool, globs in skip.items():
            if tool not in SANITIZER_TOOLS or not isinstance(tools, list) or tool not in tools:
                self.add(f"[sanitizer] skip.{tool}", "is not one of this lab's [sanitizer] tools")
            for glob in self.strings(f"[sanitizer] skip.{tool}", globs, "test globs"):
                if not glob.strip() or any(c in glob for c in ":-"):
                    self.add(f"[sanitizer] skip.{tool}", f"{glob!r} is not a test glob (no ':' or '-')")

    def hidden(self, tasks: list[dict[str, Any]], hidden_tests: Path | None) -> None:
        table = self.table("hidden")
        if "visibility" in table and table["visibility"] not in VISIBILITIES:
            self.add("[hidden] visibility", f"{table['visibility']!r} is not one of {', '.join(VISIBILITIES)}")
        hidden_tasks = [self.entry_key("task", t, i) for i, t in enumerate(tasks) if t.get("hidden") is True]
        if hidden_tasks and hidden_tests is None:
            where = "a student release has no hidden tests" if not self.instructor_tree else "no hidden tests"
            for key in hidden_tasks:
                self.add(f"{key} hidden", f"{where}: solutions/{self.lab_dir.name}/test_hidden_<topic>.cu "
                                          "does not exist")

    # -- points ----------------------------------------------------------------------------------------------

    def points(self, tasks: list[dict[str, Any]], perf: list[dict[str, Any]], sanitizer: float) -> str:
        def pts(entry: dict[str, Any]) -> float:
            return max(0.0, _number(entry.get("points", 0)) or 0.0)

        public = sum(pts(t) for t in tasks if t.get("hidden") is not True)
        hidden = sum(pts(t) for t in tasks if t.get("hidden") is True)
        perf_points = sum(pts(p) for p in perf)
        total = public + hidden + perf_points + sanitizer
        parts = [f"tasks {_fmt(public)}"] + ([f"hidden tasks {_fmt(hidden)}"] if hidden else [])
        parts += [f"perf {_fmt(perf_points)}"] + ([f"sanitizer {_fmt(sanitizer)}"] if sanitizer else [])
        how = f"{_fmt(total)} ({' + '.join(parts)})"
        if self.instructor_tree and not math.isclose(total, TOTAL, abs_tol=1e-6):
            self.add("points", f"add up to {how}, not {_fmt(TOTAL)}: [[task]] points (hidden tasks included) + "
                               "[[perf]] points + [sanitizer] points make a lab's 100")
        elif not self.instructor_tree and total > TOTAL + 1e-6:
            self.add("points", f"add up to {how}, more than {_fmt(TOTAL)} ([[task]] + [[perf]] + [sanitizer] "
                               "points; a student release has dropped the hidden tasks, so it may count fewer)")
        return how

    # -- tests -----------------------------------------------------------------------------------------------

    def tests(self, tasks: list[dict[str, Any]], perf: list[dict[str, Any]], listing: Listing) -> None:
        def globs(entry: dict[str, Any]) -> list[str]:
            value = entry.get("tests", [])
            return [g for g in value if isinstance(g, str)] if isinstance(value, list) else []

        perf_globs = [p["test"] for p in perf if isinstance(p.get("test"), str)]
        for hidden, names, binary in ((False, listing.public, listing.public_binary),
                                      (True, listing.hidden, listing.hidden_binary)):
            if names is None:
                continue
            own = [t for t in tasks if (t.get("hidden") is True) == hidden]
            for i, t in enumerate(tasks):
                if t not in own:
                    continue
                for g in globs(t):
                    if not any(fnmatch.fnmatchcase(n, g) for n in names):
                        self.add(f"{self.entry_key('task', t, i)} tests", f"{g!r} matches no test of {binary}")
            for i, t in enumerate(tasks):
                if t not in own or not isinstance(t.get("checkpoints"), list):
                    continue
                mine = [n for n in names if any(fnmatch.fnmatchcase(n, g) for g in globs(t))]
                for j, c in enumerate(t["checkpoints"], start=1):
                    for g in (c.get("tests") or []) if isinstance(c, dict) and isinstance(c.get("tests"), list) else []:
                        if isinstance(g, str) and not any(fnmatch.fnmatchcase(n, g) for n in mine):
                            self.add(f"{self.entry_key('task', t, i)} checkpoint #{j} tests",
                                     f"{g!r} matches no test of this task in {binary}")
            for name in names:
                if (why := size_name_problem(name)) is not None:
                    self.add("tests", f"{why} ({binary})")
                by_task = any(fnmatch.fnmatchcase(name, g) for t in own for g in globs(t))
                by_perf = is_perf(name) and any(fnmatch.fnmatchcase(name, g) for g in perf_globs)
                if not (by_task or by_perf):
                    claim = ("hidden task" if hidden else "task") + (" or [[perf]] entry" if is_perf(name) else "")
                    self.add("tests", f"{name} ({binary}): no {claim} claims it, so it earns no points")
        listed = [n for names in (listing.public, listing.hidden) if names is not None for n in names]
        listed_all = listing.public is not None and (listing.hidden is not None or not listing.hidden_expected)
        skip = self.table("sanitizer").get("skip")
        if isinstance(skip, dict) and listing.public is not None:
            for tool, skipped in skip.items():
                for glob in (g for g in skipped if isinstance(g, str)) if isinstance(skipped, list) else ():
                    if not any(fnmatch.fnmatchcase(n, glob) for n in listing.public if not is_perf(n)):
                        self.add(f"[sanitizer] skip.{tool}", f"{glob!r} matches no correctness test of "
                                                              f"{listing.public_binary}")
        for i, p in enumerate(perf):
            glob = p.get("test")
            if not isinstance(glob, str):
                continue
            hits = [n for n in listed if fnmatch.fnmatchcase(n, glob)]
            if hits and not any(is_perf(n) for n in hits):
                self.add(f"{self.entry_key('perf', p, i)} test",
                         "matches only correctness tests: perf entries score tests of a suite named ...Perf")
            elif not hits and listed_all:
                binaries = " or ".join(b for b in (listing.public_binary, listing.hidden_binary) if b)
                self.add(f"{self.entry_key('perf', p, i)} test", f"matches no test of {binaries}")


def is_perf(name: str) -> bool:
    return is_perf_suite(name.split(".", 1)[0])
