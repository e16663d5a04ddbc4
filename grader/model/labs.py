"""Discover the labs and read their rubrics (lab.toml)."""

from __future__ import annotations

import fnmatch
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Protocol, Sequence, TypeVar

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

LAB_DIR = re.compile(r"^(\d{2})-([a-z0-9-]+)$")
ROOT_ENV = "CUDALAB_ROOT"  # names the lab tree, like --root
# The checkout around this package, when the grader runs from one (an installed grader has none).
PACKAGE_CHECKOUT = Path(__file__).resolve().parents[2]


SCORINGS = ("proportional", "all-or-nothing")  # [[task]] scoring


class LabError(Exception):
    """A lab selector or a lab.toml that cannot be used (exit code 2)."""


@dataclass(frozen=True)
class Checkpoint:
    """A step of a big task that the report shows as progress (lab.toml: a task's checkpoints): the
    task's tests matching tests, at sizes up to max_n when given. Points do not change."""

    title: str
    tests: tuple[str, ...]
    max_n: int | None = None

    def covers(self, test_name: str, size: int | None) -> bool:
        if not any(fnmatch.fnmatchcase(test_name, pattern) for pattern in self.tests):
            return False
        return self.max_n is None or (size is not None and size <= self.max_n)


@dataclass(frozen=True)
class Task:
    id: str
    title: str
    points: float
    tests: tuple[str, ...]
    challenge: bool = False
    hidden: bool = False  # scored by the hidden binary's tests only (grader/model/hidden.py)
    # "proportional": points x passed / counted; "all-or-nothing": every point, or none when any test fails.
    scoring: str = "proportional"
    kernels: tuple[str, ...] = ()  # globs of the kernels this task owns: a sanitizer finding in one costs it
    checkpoints: tuple[Checkpoint, ...] = ()  # the steps the report shows for a big task (score/checkpoints.py)

    def matches(self, test_name: str) -> bool:
        return any(fnmatch.fnmatchcase(test_name, pattern) for pattern in self.tests)

    def owns_kernel(self, kernel: str) -> bool:
        return bool(kernel) and any(fnmatch.fnmatchcase(kernel, pattern) for pattern in self.kernels)


@dataclass(frozen=True)
class PerfGoal:
    test: str  # a test name or glob
    task: str | None
    points: float = 0.0
    full_at: float = 0.9  # student/reference rate ratio that earns every point
    zero_at: float = 0.5  # ratio at or below which no point is earned
    # Other variants the test times whose kernels a profile shows beside the student's (grade --profile):
    # (variant, kernel globs), e.g. lab 05's unpadded tile beside the padded one.
    profile_variants: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def matches(self, test_name: str) -> bool:
        return fnmatch.fnmatchcase(test_name, self.test)


@dataclass(frozen=True)
class Technique:
    task: str
    kind: str  # "symbol" (a function the file calls) or "ptx" (text in a kernel's PTX)
    pattern: str  # a regular expression (for "symbol": matching the called function's whole name)
    message: str
    kernel: str | None = None  # for "ptx": the kernel whose PTX must match (substring of its mangled name)
    points: float | None = None  # default: the whole task's points are withheld when missing


@dataclass(frozen=True)
class Lab:
    number: int
    slug: str
    path: Path  # labs/NN-slug
    root: Path  # repository root
    title: str
    student_files: tuple[str, ...]
    timeout_s: float
    tasks: tuple[Task, ...]
    perf: tuple[PerfGoal, ...]
    techniques: tuple[Technique, ...] = ()
    forbidden_symbols: tuple[str, ...] = ()
    allowed_symbols: tuple[str, ...] = ()  # [allow] symbols: what this lab's file may use beyond grader/inspect/allowlist.toml
    sanitizer: dict = field(default_factory=dict, hash=False, compare=False)
    hidden_visibility: str = "hidden"  # [hidden] visibility: "hidden", "after_due_date" or "visible"
    host_memory_mib: float | None = None  # [lab] max_host_memory_mib: one run's processes together
    # [geometry]: the sizes the lab's kernels work in ("scan tile" = 4096, "warp" = 32), named as a
    # student reads them; wrong answers are described against them (grader/score/mismatch.py).
    geometry: dict = field(default_factory=dict, hash=False, compare=False)

    @property
    def name(self) -> str:
        return f"{self.number:02d}-{self.slug}"

    @property
    def target_prefix(self) -> str:
        return f"lab{self.number:02d}"

    @property
    def solution_dir(self) -> Path:
        return self.root / "solutions" / self.name

    @property
    def topic(self) -> str:
        return Path(self.student_files[0]).stem

    @property
    def total_points(self) -> float:
        return sum(t.points for t in self.tasks) + sum(p.points for p in self.perf)

    def task(self, task_id: str) -> Task | None:
        return next((t for t in self.tasks if t.id == task_id), None)

    def task_for_kernel(self, kernel: str) -> Task | None:
        """The task whose kernels globs match a kernel's name (as compute-sanitizer reports it)."""
        return next((t for t in self.tasks if t.owns_kernel(kernel)), None)

    def task_for_test(self, test_name: str, hidden: bool | None = None) -> Task | None:
        """The first task whose globs match; with hidden given, only among tasks of that kind (the
        hidden binary's tests score hidden tasks only, the public tests public ones)."""
        return next((t for t in self.tasks if t.matches(test_name) and hidden in (None, t.hidden)), None)

    def perf_goal(self, test_name: str) -> PerfGoal | None:
        return next((p for p in self.perf if p.matches(test_name)), None)


def _variants(table: object, where: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """[[perf]] profile_variants = { tiled = ["transpose_tiled_kernel*"] }: variant name -> kernel globs."""
    if not isinstance(table, dict) or not all(
            isinstance(k, str) and isinstance(v, list) and v and all(isinstance(g, str) and g for g in v)
            for k, v in table.items()):
        raise LabError(f"{where}: profile_variants must map each variant to a list of kernel globs")
    return tuple((k, tuple(v)) for k, v in table.items())


def _require(table: dict, key: str, where: str):
    if key not in table:
        raise LabError(f"{where}: missing key '{key}'")
    return table[key]


def load_lab(path: Path, root: Path) -> Lab:
    match = LAB_DIR.match(path.name)
    if not match:
        raise LabError(f"{path}: a lab directory is named NN-slug, like 03-vector-add")
    toml_path = path / "lab.toml"
    try:
        data = tomllib.loads(toml_path.read_text())
    except FileNotFoundError:
        raise LabError(f"{toml_path}: missing") from None
    except tomllib.TOMLDecodeError as err:
        raise LabError(f"{toml_path}: not valid TOML: {err}") from None
    where = str(toml_path)
    meta = _require(data, "lab", where)
    tasks = tuple(
        Task(
            id=_require(t, "id", where),
            title=t.get("title", t["id"]),
            points=float(t.get("points", 0)),
            tests=tuple(_require(t, "tests", where)),
            challenge=bool(t.get("challenge", False)),
            hidden=bool(t.get("hidden", False)),
            scoring=str(t.get("scoring", "proportional")),
            kernels=tuple(t.get("kernels", [])),
            checkpoints=tuple(Checkpoint(str(c.get("title", "")), tuple(c.get("tests", [])),
                                         int(c["max_n"]) if "max_n" in c else None)
                              for c in t.get("checkpoints", []) if isinstance(c, dict)),
        )
        for t in data.get("task", [])
    )
    for t in tasks:
        if t.scoring not in SCORINGS:
            raise LabError(f"{where}: task {t.id}: scoring must be one of {', '.join(SCORINGS)}, not '{t.scoring}'")
    hidden_table = data.get("hidden", {})
    hidden_visibility = hidden_table.get("visibility", "hidden")
    if hidden_visibility not in ("hidden", "after_due_date", "visible"):
        raise LabError(f"{where}: [hidden] visibility must be 'hidden', 'after_due_date' or 'visible', "
                       f"not '{hidden_visibility}'")
    task_ids = {t.id for t in tasks}
    perf = []
    for p in data.get("perf", []):
        goal = PerfGoal(
            test=_require(p, "test", where),
            task=p.get("task"),
            points=float(p.get("points", 0)),
            full_at=float(p.get("full_at", 0.9)),
            zero_at=float(p.get("zero_at", 0.5)),
            profile_variants=_variants(p.get("profile_variants", {}), where),
        )
        if goal.task is not None and goal.task not in task_ids:
            raise LabError(f"{where}: perf entry {goal.test} names unknown task '{goal.task}'")
        if goal.points > 0 and not goal.zero_at < goal.full_at:
            raise LabError(f"{where}: perf entry {goal.test}: zero_at must be below full_at")
        perf.append(goal)
    techniques = []
    for t in data.get("technique", []):
        tech = Technique(
            task=_require(t, "task", where),
            kind=_require(t, "kind", where),
            pattern=_require(t, "pattern", where),
            message=t.get("message", ""),
            kernel=t.get("kernel"),
            points=float(t["points"]) if "points" in t else None,
        )
        if tech.kind not in ("symbol", "ptx"):
            raise LabError(f"{where}: technique kind must be 'symbol' or 'ptx', not '{tech.kind}'")
        if tech.kind == "ptx" and not tech.kernel:
            raise LabError(f"{where}: a 'ptx' technique names the kernel whose PTX must match (kernel = \"...\")")
        if tech.task not in task_ids:
            raise LabError(f"{where}: technique names unknown task '{tech.task}'")
        techniques.append(tech)
    student_files = tuple(_require(meta, "student_files", where))
    if not student_files:
        raise LabError(f"{where}: student_files is empty")
    return Lab(
        number=int(match.group(1)),
        slug=match.group(2),
        path=path,
        root=root,
        title=_require(meta, "title", where),
        student_files=student_files,
        timeout_s=float(meta.get("timeout_s", 300)),
        tasks=tasks,
        perf=tuple(perf),
        techniques=tuple(techniques),
        forbidden_symbols=tuple(data.get("forbid", {}).get("symbols", [])),
        allowed_symbols=tuple(data.get("allow", {}).get("symbols", [])),
        sanitizer=dict(data.get("sanitizer", {})),
        hidden_visibility=hidden_visibility,
        host_memory_mib=float(meta["max_host_memory_mib"]) if "max_host_memory_mib" in meta else None,
        geometry={str(k): int(v) for k, v in data.get("geometry", {}).items()
                  if isinstance(v, int) and not isinstance(v, bool) and v > 1},
    )


def lab_directories(root: Path) -> list[Path]:
    """Every directory under root/labs that holds a lab.toml, by name (NN-slug sorts in syllabus order)."""
    return [p for p in sorted((root / "labs").iterdir()) if (p / "lab.toml").is_file()]


def discover(root: Path) -> list[Lab]:
    """Every lab under root/labs that has a lab.toml, in syllabus order."""
    found = [load_lab(p, root) for p in lab_directories(root)]
    return sorted(found, key=lambda lab: lab.number)


def is_lab_tree(path: Path) -> bool:
    """A directory whose labs/ holds at least one NN-slug/lab.toml: a checkout or a student release."""
    try:
        return any(LAB_DIR.match(p.name) and (p / "lab.toml").is_file() for p in (path / "labs").iterdir())
    except OSError:
        return False


def find_root(explicit: str | Path | None = None, environ: Mapping[str, str] | None = None,
              cwd: Path | None = None) -> Path:
    """The lab tree to work on: --root, else $CUDALAB_ROOT, else the nearest lab tree from the current
    directory upwards, else the checkout this grader runs from. An installed grader (pip install .)
    sits in no checkout: it finds the labs from where it is started, or is told where they are."""
    environ = os.environ if environ is None else environ
    given = explicit or environ.get(ROOT_ENV)
    if given:
        return Path(given).expanduser().resolve()
    here = (cwd or Path.cwd()).resolve()
    for candidate in (here, *here.parents):
        if is_lab_tree(candidate):
            return candidate
    if is_lab_tree(PACKAGE_CHECKOUT):
        return PACKAGE_CHECKOUT
    raise LabError(f"no lab tree in {here} or above it (a directory whose labs/ holds NN-slug/lab.toml): run "
                   f"the grader inside the workbook, or name it with --root DIR or {ROOT_ENV}=DIR")


class Selectable(Protocol):
    """What a selector is matched against: a Lab, or a lab directory that has not loaded."""

    @property
    def number(self) -> int: ...

    @property
    def slug(self) -> str: ...

    @property
    def name(self) -> str: ...


S = TypeVar("S", bound=Selectable)


def select(labs: Sequence[S], selectors: list[str]) -> list[S]:
    """Pick labs by '3', '03', 'vector-add' or '03-vector-add'. No selectors: all labs."""
    if not selectors:
        return list(labs)
    chosen: list[S] = []
    for raw in selectors:
        s = raw.strip().lower().rstrip("/")
        s = s.split("/")[-1]  # accept labs/03-vector-add
        hits = [
            lab
            for lab in labs
            if s in (lab.name, lab.slug) or (s.isdigit() and int(s) == lab.number)
        ]
        if not hits:
            known = ", ".join(lab.name for lab in labs)
            raise LabError(f"no lab matches '{raw}'. Known labs: {known}")
        for lab in hits:
            if lab not in chosen:
                chosen.append(lab)
    return chosen
