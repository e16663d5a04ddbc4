"""`grader check`: what is wrong with each lab's rubric (lab.toml), every problem with its file and key.

The grader loads a lab.toml leniently: a misspelt key is ignored, a glob that matches nothing scores
nothing, a test no task claims earns nothing. This check says so before a student meets it:

- the file is TOML, and the grader loads it (labs.load_lab);
- no table or key the grader does not know (a misspelt key would be ignored);
- [lab]: a title, student_files that exist in labs/NN-slug/ (and in solutions/NN-slug/ where the lab
  has a solution), the first of them naming the topic (test_<topic>.cu beside it);
- points: tasks + perf + [sanitizer] points add up to 100. In the instructor's tree (one with
  solutions/) hidden tasks count too; a student release has dropped them, so there they add up to at
  most 100;
- tests, from --gtest_list_tests of the built binaries (the reference's where it is built, else the
  student's; the hidden binary's too where the lab has hidden tests): every test is claimed by a task
  or a perf entry, every task glob matches a test of its binary (hidden tasks the hidden binary's,
  the others the public one's), every perf entry matches a perf test. Without built binaries the
  tests are not checked, and the check says so;
- [[task]]: scoring "proportional" or "all-or-nothing", kernels a list of globs;
- [[perf]]: a test, a known task, zero_at below full_at;
- [[technique]]: a known task and kind, a pattern that compiles, a kernel for "ptx";
- [forbid] / [allow] symbols: well-formed globs;
- [sanitizer]: known tools, points and timeout_s not negative, cost between 0 and 1;
- [hidden]: a known visibility, and hidden tasks only where hidden tests exist.

The checks of the parsed file are in rubric_checks.py; this module lists the binaries' tests, runs
the checks over each lab and formats what they found.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grader.execute.gtest import GtestError
from grader.model.labs import LAB_DIR, LabError, lab_directories, load_lab, select
from grader.execute.runs import list_tests
from grader.authoring.rubric_checks import Listing, Problem, TomlChecker, glob_problem, relative
from grader.score import causes, hints

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

__all__ = ["LabCheck", "Listing", "Problem", "check_lab", "check_labs", "format_checks", "glob_problem", "lab_listing"]


@dataclass
class LabCheck:
    """One lab's check: its problems, and what the check could not look at."""

    name: str  # 06-reduce
    file: str  # labs/06-reduce/lab.toml
    problems: list[Problem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    points: str = ""  # how the points add up: "100 (tasks 85 + perf 15)"
    tests: int = 0  # tests listed, public and hidden

    @property
    def ok(self) -> bool:
        return not self.problems


@dataclass(frozen=True)
class LabDir:
    """A lab directory, selectable like a Lab even when its lab.toml does not load."""

    path: Path

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def number(self) -> int:
        m = LAB_DIR.match(self.name)
        return int(m.group(1)) if m else -1

    @property
    def slug(self) -> str:
        m = LAB_DIR.match(self.name)
        return m.group(2) if m else self.name


# --- the tests of the built binaries ------------------------------------------------------------------------


def _first_built(bin_dir: Path, targets: list[str]) -> Path | None:
    return next((bin_dir / t for t in targets if (bin_dir / t).is_file()), None)


def lab_listing(lab_dir: Path, root: Path, bin_dir: Path, hidden_expected: bool) -> tuple[Listing, list[Problem]]:
    """--gtest_list_tests of the lab's binaries in bin_dir: the reference's where built, else the student's."""
    m = LAB_DIR.match(lab_dir.name)
    prefix = f"lab{m.group(1)}" if m else lab_dir.name
    listing = Listing(hidden_expected=hidden_expected)
    problems: list[Problem] = []
    shown_dir = relative(bin_dir, root)
    kinds = [("public", [f"{prefix}_solution", f"{prefix}_student"])]
    if hidden_expected:
        kinds.append(("hidden", [f"{prefix}_hidden_solution", f"{prefix}_hidden_student"]))
    for kind, targets in kinds:
        binary = _first_built(bin_dir, targets)
        if binary is None:
            listing.notes.append(f"{kind} tests not checked: neither {' nor '.join(targets)} is built in {shown_dir} "
                                 f"(python3 -m grader build {lab_dir.name[:2]})")
            continue
        try:
            names = list_tests(binary)
        except (GtestError, OSError) as err:
            problems.append(Problem(relative(binary, root), "--gtest_list_tests", f"cannot list the tests: {err}"))
            continue
        setattr(listing, kind, names)
        setattr(listing, f"{kind}_binary", binary.name)
    return listing, problems


# --- one lab, every lab -------------------------------------------------------------------------------------


def check_lab(lab_dir: Path, root: Path, bin_dir: Path | None) -> LabCheck:
    """Every check of one lab directory; bin_dir None: the tests are not listed."""
    toml_path = lab_dir / "lab.toml"
    file = relative(toml_path, root)
    result = LabCheck(name=lab_dir.name, file=file)
    if not LAB_DIR.match(lab_dir.name):
        result.problems.append(Problem(relative(lab_dir, root), "directory", "a lab directory is named NN-slug, "
                                                                         "like 03-vector-add"))
    try:
        data = tomllib.loads(toml_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as err:
        result.problems.append(Problem(file, "file", f"cannot be read: {err}"))
        return result
    except tomllib.TOMLDecodeError as err:
        result.problems.append(Problem(file, "file", f"not valid TOML: {err}"))
        return result
    instructor_tree = (root / "solutions").is_dir()
    c = TomlChecker(data, file, lab_dir, root, instructor_tree)
    c.unknown_keys()
    topic = c.lab()
    tasks = c.tasks()
    perf = c.perf()
    c.techniques()
    c.symbols()
    sanitizer_points = c.sanitizer()
    hidden_src = root / "solutions" / lab_dir.name / f"test_hidden_{topic}.cu" if topic else None
    hidden_tests = hidden_src if hidden_src is not None and hidden_src.is_file() else None
    c.hidden(tasks, hidden_tests)
    result.points = c.points(tasks, perf, sanitizer_points)
    if not c.problems:  # what the grader itself refuses, should a check above have missed it
        try:
            load_lab(lab_dir, root)
        except LabError as err:
            c.add("file", str(err).removeprefix(f"{toml_path}: "))
    if bin_dir is None:
        result.notes.append("tests not checked (not asked to list them)")
    elif not topic:
        result.notes.append("tests not checked: [lab] student_files names no file, so no topic and no binaries")
    else:
        listing, listing_problems = lab_listing(lab_dir, root, bin_dir, hidden_tests is not None)
        c.problems += listing_problems
        result.notes += listing.notes
        result.tests = len(listing.public or []) + len(listing.hidden or [])
        c.tests(tasks, perf, listing)
    result.problems += c.problems + lab_hints_problems(lab_dir, root, [t.get("id") for t in tasks if not t.get("hidden")])
    result.problems += lab_answers_problems(lab_dir, root)
    return result


def lab_answers_problems(lab_dir: Path, root: Path) -> list[Problem]:
    """The lab's answers.md against the instructor's answers.toml: the same ids in the same order, each
    `qN.name`, and the student's file blank (a release ships it as it is)."""
    from grader.model.answers import ANSWERS_FILE, REFERENCE_FILE
    from grader.score import answers

    student, reference = lab_dir / ANSWERS_FILE, root / "solutions" / lab_dir.name / REFERENCE_FILE
    if not student.is_file():
        return [Problem(reference.relative_to(root).as_posix(), "file", f"no {ANSWERS_FILE} beside the lab for it")] \
            if reference.is_file() else []
    file = student.relative_to(root).as_posix()
    given = answers.read_answers(student.read_text(encoding="utf-8", errors="replace"))
    out = [Problem(file, i, f"holds a value ({v!r}): the student's file ships blank") for i, v in given.items() if v]
    if reference.is_file():
        try:
            ids = [r.id for r in answers.load_reference(reference)]
        except (OSError, ValueError, KeyError) as err:  # tomllib's error is a ValueError
            return out + [Problem(reference.relative_to(root).as_posix(), "file", str(err))]
        if ids != list(given):
            out.append(Problem(file, "ids", f"differ from {REFERENCE_FILE}'s (same ids, same order): "
                                            f"{sorted(set(ids) ^ set(given)) or 'the order'}"))
    return out


def lab_hints_problems(lab_dir: Path, root: Path, task_ids: list[Any]) -> list[Problem]:
    """The lab's own hints.toml: it parses, and each hint's task is one of the lab's public tasks (a
    student release keeps the file, so a hidden task's name must not be in it)."""
    path = lab_dir / hints.LAB_HINTS
    if not path.is_file():
        return []
    file = path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)
    try:
        own = hints.parse_hints(path.read_text(), file)
    except (OSError, UnicodeDecodeError, hints.HintsError) as err:
        return [Problem(file, "file", str(err).removeprefix(f"{file}: "))]
    out = [Problem(file, f"hint #{i} task", f"{task!r} is not a public task of this lab")
           for i, h in enumerate(own, start=1) for task in h.tasks if task not in task_ids]
    try:
        known = causes.declared(lab_dir)
    except causes.CausesError as err:
        return out + [Problem(file, "causes", str(err))]
    return out + [Problem(file, f"hint #{i} causes", f"{', '.join(bad)} declared in no [causes] table (this file's "
                                                     "or grader/score/hints.toml's)")
                  for i, h in enumerate(own, start=1) if (bad := causes.undeclared(h.causes, known))]


def check_labs(root: Path, selectors: list[str], bin_dir: Path | None) -> list[LabCheck]:
    """The check of every selected lab (all when selectors is empty). Raises LabError for a bad selector."""
    dirs = select([LabDir(p) for p in lab_directories(root)], selectors)
    return [check_lab(d.path, root, bin_dir) for d in dirs]


def format_checks(checks: list[LabCheck], instructor_tree: bool) -> str:
    if not checks:
        return "check: no labs found"
    width = max(len(c.name) for c in checks)
    lines = []
    for c in checks:
        status = "ok" if c.ok else f"{len(c.problems)} problem{'s' if len(c.problems) != 1 else ''}"
        facts = [f"points {c.points}"] if c.points else []
        if c.tests:
            facts.append(f"{c.tests} tests listed")
        lines.append(f"{c.name:<{width}}  {status:<11} {'; '.join(facts)}".rstrip())
        lines += [f"  {p}" for p in c.problems]
        lines += [f"  note: {n}" for n in c.notes]
    problems = sum(len(c.problems) for c in checks)
    tree = ("the instructor's tree: hidden tasks count toward 100" if instructor_tree
            else "a student release (no solutions/): hidden tasks were dropped, so a lab may count fewer than 100")
    lines.append(f"check: {len(checks)} lab(s), {problems} problem(s); {tree}")
    return "\n".join(lines)
