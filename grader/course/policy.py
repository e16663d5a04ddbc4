"""A course file (`batch --course course.toml`): each lab's due date and the late policy.

    [policy]
    grace_minutes = 15            # a submission this close after the due date is on time
    penalty_per = "day"           # or "hour": each late day (hour) started costs penalty_percent
    penalty_percent = 10          # percent of the lab's raw score, per late day (hour)
    max_penalty_percent = 50      # the cap, percent of the raw score (default 100)
    late_days = 3                 # whole days a student may spend across the course (default 0)
    ledger = "late-days.json"     # optional: late days spent, kept across batches (grader/course/late_ledger.py)

    [due]                         # lab selector (3, 03, vector-add, 03-vector-add) = ISO 8601 with offset
    "03" = "2025-09-26T23:59:00-04:00"

    [[extension]]                 # per student; `lab` left out: every lab
    student = "ada"               # the roster id (or the submission's id without a roster)
    lab = "03"
    days = 2                      # or until = "2025-09-30T12:00:00-04:00"

How a lab's penalty is computed (assess()), in this order:
  1. the due date: the lab's, moved by the student's extension (a per-lab one wins over an all-labs one);
  2. late = submitted - due; on time when late <= 0 or late <= the grace period (lateness past the grace
     period still counts from the due date);
  3. late days: the whole days started (ceil(late / 24 h)) are paid from the student's course late days
     first, as many as are left; labs spend them in lab order, so the result is deterministic; with a
     ledger, what the student's other labs spent in earlier batches is taken off first;
  4. the rest of the lateness is charged per day or per hour started, penalty_percent each, capped at
     max_penalty_percent; penalty = raw score x percent / 100, and the lab's score is raw - penalty.
A lab without a due date, or a submission without a trustworthy time, gets no penalty (the record says so).
"""

from __future__ import annotations

import math
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

from grader.model.text import amount
from grader.model.errors import Exit, GraderError
from grader.model.labs import Lab, LabError, select
from grader.course.late_ledger import Ledger
from grader.model.results import LabResult, LateRecord, Results

try:
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

UNITS = {"day": 86400.0, "hour": 3600.0}
_POLICY_KEYS = {"grace_minutes", "penalty_per", "penalty_percent", "max_penalty_percent", "late_days",
                "ledger"}
_EXTENSION_KEYS = {"student", "lab", "days", "hours", "until"}


class CourseError(GraderError):
    """The course file is invalid: a usage error (exit 2) that names the file and the key."""

    def __init__(self, path: Path, key: str, message: str) -> None:
        super().__init__(f"{path}: {key}: {message}" if key else f"{path}: {message}", Exit.USAGE)


def parse_when(text: object, path: Path, key: str) -> datetime:
    """An ISO 8601 date and time with a timezone ('Z' or an offset)."""
    if isinstance(text, datetime):  # TOML's own offset date-time
        when = text
    elif isinstance(text, str):
        try:
            when = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
        except ValueError:
            raise CourseError(path, key, f"{text!r} is not an ISO 8601 date and time "
                                         "(e.g. 2025-09-26T23:59:00-04:00)") from None
    else:
        raise CourseError(path, key, f"expected an ISO 8601 date and time, got {type(text).__name__}")
    if when.utcoffset() is None:
        raise CourseError(path, key, f"{text!s} has no timezone: add an offset (-04:00) or Z")
    return when


@dataclass(frozen=True)
class Policy:
    grace_minutes: float = 0.0
    penalty_per: str = "day"
    penalty_percent: float = 0.0
    max_penalty_percent: float = 100.0
    late_days: int = 0


@dataclass(frozen=True)
class Extension:
    student: str  # casefolded id
    lab: str | None  # a lab's name (03-vector-add), or None: every lab
    delta: timedelta | None = None
    until: datetime | None = None

    def moves(self, due: datetime) -> datetime:
        return self.until if self.until is not None else due + (self.delta or timedelta())

    def describe(self) -> str:
        if self.until is not None:
            return f"extension until {self.until.isoformat()}"
        hours = (self.delta or timedelta()).total_seconds() / 3600
        return f"extension of {_amount(hours / 24, 'day')}" if hours % 24 == 0 else \
            f"extension of {_amount(hours, 'hour')}"


def _amount(n: float, unit: str) -> str:
    return amount(n, unit)


@dataclass
class Course:
    path: Path
    policy: Policy
    due: dict[str, datetime] = field(default_factory=dict)  # lab name -> due date
    extensions: list[Extension] = field(default_factory=list)
    ledger: Path | None = None  # [policy] ledger, resolved against the course file's folder

    def extension(self, student: str, lab: str) -> Extension | None:
        mine = [e for e in self.extensions if e.student == student.casefold()]
        return next((e for e in mine if e.lab == lab), None) or next((e for e in mine if e.lab is None), None)

    def due_for(self, student: str, lab: str) -> tuple[datetime | None, Extension | None]:
        due = self.due.get(lab)
        ext = self.extension(student, lab) if due is not None else None
        return (ext.moves(due) if ext is not None and due is not None else due), ext

    def reveal_after(self, lab: str) -> datetime | None:
        """When hidden tests of visibility after_due_date may show: the lab's due date, or the latest
        extension of it, whichever is later (no student still working on the lab may see them)."""
        due = self.due.get(lab)
        if due is None:
            return None
        moved = [e.moves(due) for e in self.extensions if e.lab in (lab, None)]
        return max([due, *moved])


def _number(value: object, path: Path, key: str, *, integer: bool = False, minimum: float = 0.0,
            maximum: float | None = None) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (integer and not isinstance(value, int)):
        raise CourseError(path, key, f"expected {'a whole number' if integer else 'a number'}, got {value!r}")
    if not math.isfinite(value) or value < minimum or (maximum is not None and value > maximum):
        bound = f"between {minimum:g} and {maximum:g}" if maximum is not None else f"at least {minimum:g}"
        raise CourseError(path, key, f"{value!r} must be {bound}")
    return float(value)


def _lab_name(selector: object, labs: list[Lab], path: Path, key: str) -> str:
    if not isinstance(selector, (str, int)) or isinstance(selector, bool):
        raise CourseError(path, key, f"expected a lab (03, vector-add, 03-vector-add), got {selector!r}")
    try:
        found = select(labs, [str(selector)])
    except LabError as err:
        raise CourseError(path, key, str(err)) from None
    if len(found) != 1:
        raise CourseError(path, key, f"{selector!r} names {len(found)} labs; name one")
    return found[0].name


def _policy(data: object, path: Path) -> Policy:
    if data is None:
        return Policy()
    if not isinstance(data, dict):
        raise CourseError(path, "policy", "expected a table ([policy])")
    unknown = sorted(set(data) - _POLICY_KEYS)
    if unknown:
        raise CourseError(path, f"policy.{unknown[0]}", f"unknown key (known: {', '.join(sorted(_POLICY_KEYS))})")
    per = data.get("penalty_per", "day")
    if per not in UNITS:
        raise CourseError(path, "policy.penalty_per", f"{per!r} must be \"day\" or \"hour\"")
    return Policy(
        grace_minutes=_number(data.get("grace_minutes", 0), path, "policy.grace_minutes"),
        penalty_per=per,
        penalty_percent=_number(data.get("penalty_percent", 0), path, "policy.penalty_percent", maximum=100),
        max_penalty_percent=_number(data.get("max_penalty_percent", 100), path, "policy.max_penalty_percent",
                                    maximum=100),
        late_days=int(_number(data.get("late_days", 0), path, "policy.late_days", integer=True)),
    )


def _ledger(data: object, path: Path) -> Path | None:
    name = data.get("ledger") if isinstance(data, dict) else None
    if name is None:
        return None
    if not isinstance(name, str) or not name.strip() or name.strip().endswith(("/", os.sep)):
        raise CourseError(path, "policy.ledger", f"expected a file name (\"late-days.json\"), got {name!r}")
    return (path.resolve().parent / name.strip()).resolve()


def _extension(i: int, data: object, labs: list[Lab], path: Path) -> Extension:
    key = f"extension[{i}]"
    if not isinstance(data, dict):
        raise CourseError(path, key, "expected a table ([[extension]] with student and days, hours or until)")
    unknown = sorted(set(data) - _EXTENSION_KEYS)
    if unknown:
        raise CourseError(path, f"{key}.{unknown[0]}", f"unknown key (known: {', '.join(sorted(_EXTENSION_KEYS))})")
    student = data.get("student")
    if not isinstance(student, str) or not student.strip():
        raise CourseError(path, f"{key}.student", "expected the student's id")
    lab = _lab_name(data["lab"], labs, path, f"{key}.lab") if "lab" in data else None
    given = [k for k in ("days", "hours", "until") if k in data]
    if len(given) != 1:
        raise CourseError(path, key, "give exactly one of days, hours or until")
    if given[0] == "until":
        return Extension(student.strip().casefold(), lab, until=parse_when(data["until"], path, f"{key}.until"))
    amount = _number(data[given[0]], path, f"{key}.{given[0]}")
    return Extension(student.strip().casefold(), lab, delta=timedelta(**{given[0]: amount}))


def load_course(path: Path, labs: list[Lab]) -> Course:
    """Read and validate a course file against the labs of the tree. Raises CourseError (exit 2)."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise CourseError(path, "", err.strerror or str(err)) from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
        raise CourseError(path, "", f"not valid TOML ({err})") from None
    unknown = sorted(set(data) - {"policy", "due", "extension", "course"})
    if unknown:
        raise CourseError(path, unknown[0], "unknown table (known: course, policy, due, extension)")
    due_table = data.get("due", {})
    if not isinstance(due_table, dict):
        raise CourseError(path, "due", "expected a table ([due] with \"03\" = \"2025-09-26T23:59:00-04:00\")")
    due: dict[str, datetime] = {}
    for selector, when in due_table.items():
        name = _lab_name(selector, labs, path, f"due.{selector}")
        if name in due:
            raise CourseError(path, f"due.{selector}", f"{name} has a due date already")
        due[name] = parse_when(when, path, f"due.{selector}")
    ext = data.get("extension", [])
    if not isinstance(ext, list):
        raise CourseError(path, "extension", "expected [[extension]] tables")
    extensions = [_extension(i, e, labs, path) for i, e in enumerate(ext)]
    return Course(path, _policy(data.get("policy"), path), due, extensions, _ledger(data.get("policy"), path))


# --- the penalty ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SubmittedAt:
    """When a submission was handed in, and the source the time comes from."""

    when: datetime | None
    source: str  # "git commit", "archive mtime", "submitted_at column"; "" when unknown


def _iso(when: datetime | None) -> str:
    return when.isoformat() if when is not None else ""


def assess_lab(course: Course, student: str, lab: LabResult, submitted: SubmittedAt, days_left: int) -> LateRecord:
    """The late record of one lab (see the module docstring); raw score = the lab's score before any
    earlier late record (so assessing again is idempotent)."""
    p = course.policy
    raw = lab.late.raw_score if lab.late is not None else lab.score
    due, ext = course.due_for(student, lab.name)
    reveal = course.reveal_after(lab.name)
    record = LateRecord(
        due=_iso(due), submitted=_iso(submitted.when), source=submitted.source, raw_score=raw,
        late_days_left=days_left, unit=p.penalty_per, rate_percent=p.penalty_percent,
        cap_percent=p.max_penalty_percent, grace_minutes=p.grace_minutes,
        extension=ext.describe() if ext is not None else "", reveal_hidden_after=_iso(reveal),
    )
    if due is None or submitted.when is None:
        return record
    late = (submitted.when - due).total_seconds()
    if late <= 0 or late <= p.grace_minutes * 60:
        return record
    days = math.ceil(late / UNITS["day"])
    used = min(days, days_left)
    rest = max(0.0, late - used * UNITS["day"])
    charged = math.ceil(rest / UNITS[p.penalty_per] - 1e-9) if rest > 0 else 0
    pct = min(p.max_penalty_percent, charged * p.penalty_percent)
    penalty = round(raw * pct / 100, 4)
    record.late_seconds = late
    record.late_days_used = used
    record.late_days_left = days_left - used
    record.charged = charged
    record.penalty_percent = pct
    record.penalty = penalty
    return record


def apply_course(course: Course, student: str, results: Results, times: dict[str, SubmittedAt],
                 ledger: Ledger | None = None) -> bool:
    """Give every lab of results its late record and its final score (raw - penalty), spending the
    student's late days in lab order. times: lab name -> when it was submitted ("" key: every lab).
    ledger: the course's late-day ledger (grader/course/late_ledger.py): the late days the student's other labs
    spent in earlier batches are not there to spend, and what these labs spend is recorded.
    Returns whether anything changed (a kept grade whose record changed has its reports written again)."""
    if ledger is None:
        return _apply(course, student, results, times, course.policy.late_days)
    names = {lab.name for lab in results.labs}
    with ledger.spending(student) as spent:
        others = sum(days for lab, days in spent.items() if lab not in names)
        changed = _apply(course, student, results, times, max(0, course.policy.late_days - others))
        spent.update({lab.name: lab.late.late_days_used for lab in results.labs if lab.late is not None})
    return changed


def _apply(course: Course, student: str, results: Results, times: dict[str, SubmittedAt], left: int) -> bool:
    before = [lab.late for lab in results.labs], [lab.score for lab in results.labs]
    for lab in sorted(results.labs, key=lambda lab: (lab.number, lab.name)):
        when = times.get(lab.name) or times.get("") or SubmittedAt(None, "")
        record = assess_lab(course, student, lab, when, left)
        left = record.late_days_left
        lab.late = record
        lab.score = round(record.raw_score - record.penalty, 4)
    return before != ([lab.late for lab in results.labs], [lab.score for lab in results.labs])






def now_utc() -> datetime:
    return datetime.now(timezone.utc)


# --- when a submission was handed in --------------------------------------------------------------------

GIT_TIMEOUT_S = 20.0


def _git_env() -> dict[str, str]:
    """No system or user configuration, no prompts, no locks; only PATH survives."""
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": "/nonexistent",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_OPTIONAL_LOCKS": "0",
        "GIT_ATTR_NOSYSTEM": "1",
        "LC_ALL": "C",
    }


def git_commit_time(checkout: Path) -> datetime | None:
    """The committer date of the last commit of a git checkout (git log -1 --format=%cI), or None.
    Run so that nothing of the submission runs: hooks off, the pager, signatures, fsmonitor and
    external diff off on the command line (which wins over the repository's own config), no system or
    user config; .git must be a real folder (a gitfile or link could point anywhere)."""
    git_dir = checkout / ".git"
    if git_dir.is_symlink() or not git_dir.is_dir() or shutil.which("git") is None:
        return None
    cmd = ["git", "--no-pager", "-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false",
           "-c", "log.showSignature=false", "-c", "gpg.program=false", "-c", "core.pager=cat",
           "-c", "diff.external=", "-c", f"safe.directory={git_dir.resolve().parent}",
           "--git-dir", str(git_dir), "log", "-1", "--no-show-signature", "--format=%cI"]
    try:
        done = subprocess.run(cmd, env=_git_env(), stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=GIT_TIMEOUT_S, check=False, cwd=checkout)
    except (OSError, subprocess.SubprocessError):
        return None
    text = done.stdout.strip().splitlines()[0] if done.returncode == 0 and done.stdout.strip() else ""
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00")) if text else None
    except ValueError:
        return None
    return when if when is not None and when.utcoffset() is not None else None


def submission_times(path: Path, given: dict[str, datetime] | None = None) -> dict[str, SubmittedAt]:
    """lab name ("" for every lab) -> when: the roster's submitted_at cells (given) win; the
    submission's own trustworthy time stands for the labs they leave out."""
    given = given or {}
    times = {lab: SubmittedAt(when, "submitted_at column") for lab, when in given.items()}
    if "" not in times:
        times[""] = submission_time(path)
    return times


def submission_time(path: Path) -> SubmittedAt:
    """The trustworthy time of a submission as received: the last commit's committer date of a git
    checkout, an archive's mtime; never a file inside the submission. Unknown for a plain folder."""
    from grader.intake.submission import archive_suffix

    if path.is_dir():
        when = git_commit_time(path)
        return SubmittedAt(when, "git commit" if when is not None else "")
    if path.is_file() and archive_suffix(path.name):
        return SubmittedAt(datetime.fromtimestamp(path.stat().st_mtime, timezone.utc).replace(microsecond=0),
                           "archive mtime")
    return SubmittedAt(None, "")


__all__ = [
    "Course", "CourseError", "Extension", "Policy", "SubmittedAt", "UNITS", "apply_course", "assess_lab",
    "git_commit_time", "load_course", "now_utc", "parse_when", "submission_time",
    "submission_times",
]
