"""A class roster (`batch --roster roster.csv`, `batch merge --roster roster.csv`): who is in the course,
and which submission is whose.

The CSV (read with Python's csv module, UTF-8, a BOM allowed) has a header row; column names are
matched case-insensitively, with spaces and hyphens read as underscores:

  id (or student_id)   required, unique: the student's id; their reports go to OUT/<id>/
  name, email          required columns (a cell may be empty)
  aliases              optional: other names a submission may carry (a GitHub login, an archive name),
                       several in one cell separated by ';'; the column may also be repeated, or
                       named alias
  submitted_at         optional: when the student handed in (ISO 8601 with a timezone), from the LMS;
                       it wins over the submission's own time (grader/course/policy.py). submitted_at:<lab>
                       (submitted_at:03) gives one lab its own time
  any other column     ignored

A submission (a folder or archive of the batch, its name without the archive suffix) matches a
student when its name equals their id or one of their aliases, case-insensitively (an alias's own
archive suffix is stripped too). A submission that matches nobody is listed as unmatched and is not
graded; one that matches two students is ambiguous, listed the same way and not graded either; a
student no submission matches is missing (a `missing` row, score 0).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from grader.model.errors import Exit, GraderError
from grader.model.labs import Lab, LabError, select
from grader.intake.submission import submission_name

ID_COLUMNS = ("id", "student_id")
REQUIRED = ("name", "email")
ALIAS_COLUMNS = ("aliases", "alias")
SUBMITTED = "submitted_at"


class RosterError(GraderError):
    def __init__(self, message: str) -> None:
        super().__init__(message, Exit.USAGE)


@dataclass(frozen=True)
class RosterStudent:
    id: str
    name: str = ""
    email: str = ""
    aliases: tuple[str, ...] = ()
    submitted_at: tuple[tuple[str, datetime], ...] = ()  # (lab selector or "" for every lab, when)
    line: int = 0

    def keys(self) -> set[str]:
        return {key(self.id), *(key(a) for a in self.aliases)}


@dataclass
class Roster:
    path: Path
    students: list[RosterStudent] = field(default_factory=list)

    def by_id(self, sid: str) -> RosterStudent | None:
        return next((s for s in self.students if s.id == sid), None)


def key(name: str) -> str:
    """How ids, aliases and submission names compare: the archive suffix stripped, case-folded."""
    return submission_name(name.strip()).strip().casefold()


def _column(name: str) -> str:
    return "_".join(name.strip().lstrip("\ufeff").casefold().replace("-", " ").split())


def _when(text: str, path: Path, line: int, column: str) -> datetime:
    try:
        when = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise RosterError(f"{path}:{line}: {column}: {text!r} is not an ISO 8601 date and time "
                          "(e.g. 2025-09-26T23:59:00-04:00)") from None
    if when.utcoffset() is None:
        raise RosterError(f"{path}:{line}: {column}: {text!r} has no timezone: add an offset (-04:00) or Z")
    return when


def read_roster_csv(path: Path) -> Roster:
    """Read and validate a roster CSV (see the module docstring). Raises RosterError (exit 2) naming the
    file, the line and the column."""
    path = Path(path)
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            rows = list(csv.reader(f))
    except OSError as err:
        raise RosterError(f"--roster {path}: {err.strerror or err}") from None
    except (UnicodeDecodeError, csv.Error) as err:
        raise RosterError(f"{path}: not a readable UTF-8 CSV file ({err})") from None
    if not rows or not any(c.strip() for c in rows[0]):
        raise RosterError(f"{path}: empty: the first row must name the columns (id, name, email[, aliases])")
    header = [_column(c) for c in rows[0]]
    ids = [i for i, c in enumerate(header) if c in ID_COLUMNS]
    if len(ids) != 1:
        raise RosterError(f"{path}: header: {'no' if not ids else 'more than one'} student id column "
                          f"(one of {', '.join(ID_COLUMNS)}); the header is {', '.join(rows[0])}")
    for need in REQUIRED:
        if header.count(need) != 1:
            raise RosterError(f"{path}: header: {'no' if need not in header else 'more than one'} {need!r} "
                              f"column; the header is {', '.join(rows[0])}")
    alias_cols = [i for i, c in enumerate(header) if c in ALIAS_COLUMNS]
    submitted_cols = [(i, c.partition(":")[2]) for i, c in enumerate(header)
                      if c == SUBMITTED or c.startswith(SUBMITTED + ":")]
    if len({lab for _, lab in submitted_cols}) != len(submitted_cols):
        raise RosterError(f"{path}: header: a submitted_at column is repeated")
    students: list[RosterStudent] = []
    seen: dict[str, int] = {}
    for n, row in enumerate(rows[1:], start=2):
        if not any(c.strip() for c in row):
            continue
        if len(row) > len(header) and any(c.strip() for c in row[len(header):]):
            raise RosterError(f"{path}:{n}: {len(row)} cells, the header has {len(header)}")
        cell = [(row[i].strip() if i < len(row) else "") for i in range(len(header))]
        sid = cell[ids[0]]
        if not sid:
            raise RosterError(f"{path}:{n}: {rows[0][ids[0]].strip()}: empty: every student needs an id")
        if sid.startswith(".") or "/" in sid or "\\" in sid or sid in (".", ".."):
            raise RosterError(f"{path}:{n}: id {sid!r} cannot name a report folder (no '/', no leading '.')")
        if key(sid) in seen:
            raise RosterError(f"{path}:{n}: id {sid!r} is already the id of line {seen[key(sid)]}")
        seen[key(sid)] = n
        aliases = tuple(dict.fromkeys(a.strip() for i in alias_cols for a in cell[i].split(";") if a.strip()))
        times = tuple((lab, _when(cell[i], path, n, rows[0][i].strip())) for i, lab in submitted_cols if cell[i])
        students.append(RosterStudent(sid, cell[header.index("name")], cell[header.index("email")], aliases,
                                      times, n))
    if not students:
        raise RosterError(f"{path}: no students (only a header)")
    return Roster(path, students)


@dataclass
class Matching:
    """Which submission is whose."""

    matched: dict[str, str] = field(default_factory=dict)  # submission name -> roster id
    missing: list[RosterStudent] = field(default_factory=list)  # no submission matched them
    unmatched: list[str] = field(default_factory=list)  # submission names that match no student
    ambiguous: dict[str, list[str]] = field(default_factory=dict)  # submission name -> the students it matches

    def shared(self) -> dict[str, list[str]]:
        """Roster ids that more than one submission name matched (a batch refuses that, as it refuses
        ada/ beside ada.zip; a merge takes them for the same student's folders)."""
        names: dict[str, list[str]] = {}
        for name, sid in self.matched.items():
            names.setdefault(sid, []).append(name)
        return {sid: n for sid, n in names.items() if len(n) > 1}

    def problems(self) -> list[tuple[str, str]]:
        """(submission name, why it is not graded), unmatched first, for the class summary and stdout."""
        return [(n, "matches no student of the roster (by id or alias): not graded") for n in self.unmatched] + [
            (n, f"matches more than one student ({', '.join(ids)}): not graded; make the roster's aliases unique")
            for n, ids in self.ambiguous.items()
        ]


def match(roster: Roster, names: list[str]) -> Matching:
    """Match submission names (a batch's entries, a merge's student folders) to roster students."""
    index: dict[str, list[str]] = {}
    for s in roster.students:
        for k in s.keys():
            index.setdefault(k, [])
            if s.id not in index[k]:
                index[k].append(s.id)
    out = Matching()
    for name in names:
        hits = index.get(key(name), [])
        if not hits:
            out.unmatched.append(name)
        elif len(hits) > 1:
            out.ambiguous[name] = hits
        else:
            out.matched[name] = hits[0]
    found = set(out.matched.values())
    out.missing = [s for s in roster.students if s.id not in found]
    return out


def submitted_times(student: RosterStudent, labs: list[Lab]) -> dict[str, datetime]:
    """The student's submitted_at cells: lab name (or "" for every lab) -> when. Raises RosterError
    for a submitted_at:<lab> column that names no lab."""
    out: dict[str, datetime] = {}
    for selector, when in student.submitted_at:
        if not selector:
            out[""] = when
            continue
        try:
            found = select(labs, [selector])
        except LabError as err:
            raise RosterError(f"roster: submitted_at:{selector}: {err}") from None
        for lab in found:
            out[lab.name] = when
    return out


def is_csv(path: Path) -> bool:
    return Path(path).is_file() and Path(path).suffix.lower() == ".csv"


__all__ = ["Matching", "Roster", "RosterError", "RosterStudent", "is_csv", "key", "match", "read_roster_csv", "submitted_times"]
