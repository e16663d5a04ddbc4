"""`grader slurm submit --roster roster.csv --course course.toml`: a Slurm class as a course
(grader/course/slurm/jobs.py; the batch's own roster and course: grader/course/batch/course.py).

At submit time the submissions are matched to the roster as `grader batch --roster` matches them (by id
and alias, grader/course/roster.py): a matched submission is sharded under its student's roster id (roster
order), one that matches nobody or two students is listed and not graded, two of one student are a
usage error, and a roster student no submission matches is graded by no task: the merge gives them a
`missing` row. Both files are read and checked before anything is written or submitted, and copied
into OUT/slurm/, so an edit of the originals changes no job (a resubmit's too):

  OUT/slurm/roster.csv, course.toml   the copies every array task (`slurm task --roster --course`: the
                                      late policy, the roster's submitted_at) and the merge read
  OUT/slurm/roster.txt                the students sharded: roster ids with a submission (the merge's
                                      --expect: one without a finished grade is broken, not missing)
  OUT/slurm/unmatched.tsv             `<submission> TAB <why>`: not graded (the merge's --unmatched)

A course file's relative `ledger` (grader/course/late_ledger.py) is pinned in the copy to the absolute path it
names beside the original, so the tasks spend and record late days in the course's one ledger.

The merge needs nothing of the course file: each task applies the late policy to its students'
results.json (a student's labs are all graded in one task, so their late days add up as in one batch).
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from grader.course.batch.course import ClassSetup
from grader.course.batch.merge import read_roster, read_unmatched
from grader.course.batch.students import find_students
from grader.model.errors import Exit, GraderError
from grader.course.roster import read_roster_csv

ROSTER_COPY = "roster.csv"
COURSE_COPY = "course.toml"
IDS = "roster.txt"
UNMATCHED = "unmatched.tsv"


@dataclass
class SlurmClass:
    """Who a submit grades, and the class files its jobs read."""

    ids: list[str]  # the students to shard: roster ids in roster order (the submissions' ids without a roster)
    roster: Path | None = None  # the roster CSV given to submit
    course: Path | None = None  # the course file given to submit
    missing: list[str] = field(default_factory=list)  # roster ids no submission matched: a `missing` row
    problems: list[tuple[str, str]] = field(default_factory=list)  # (submission, why it is not graded)
    roster_size: int = 0

    @classmethod
    def match(cls, root: Path, submissions: Path, out: Path, roster: Path | None = None, course: Path | None = None,
              compile_only: bool = False) -> SlurmClass:
        """Read and check both files (a usage error, exit 2, otherwise), then match the submissions."""
        setup = ClassSetup.load(root, roster, course, compile_only)
        students, _ = find_students(submissions, exclude=out)
        if not students:
            raise GraderError(f"{submissions}: no submissions (one folder or archive per student)", Exit.USAGE)
        matched = setup.match(students, submissions)
        if setup.roster is None or roster is None:
            return cls([s.id for s in students], course=course)
        order = {s.id: i for i, s in enumerate(setup.roster.students)}
        ids = sorted((s.id for s in matched), key=order.__getitem__)
        klass = cls(ids, roster, course, [s.id for s in setup.missing], setup.problems, len(setup.roster.students))
        if not ids:
            raise GraderError(f"{roster}: no submission in {submissions} matches a student of the roster (by id "
                              f"or alias):\n" + klass.lines().rstrip(), Exit.USAGE)
        return klass

    @staticmethod
    def copies(slurm_dir: Path, roster: Path | None, course: Path | None) -> tuple[Path | None, Path | None]:
        """Where the jobs read the roster and the course file (None: not given)."""
        return (slurm_dir / ROSTER_COPY if roster is not None else None,
                slurm_dir / COURSE_COPY if course is not None else None)

    def write(self, slurm_dir: Path) -> None:
        """roster.txt, and with a roster or course file their copies and unmatched.tsv."""
        slurm_dir.mkdir(parents=True, exist_ok=True)
        (slurm_dir / IDS).write_text("".join(f"{s}\n" for s in self.ids), encoding="utf-8")
        roster_copy, course_copy = self.copies(slurm_dir, self.roster, self.course)
        if self.roster is not None and roster_copy is not None:
            shutil.copyfile(self.roster, roster_copy)
        if self.course is not None and course_copy is not None:
            course_copy.write_text(_pinned_ledger(self.course), encoding="utf-8")
        if self.roster is not None:
            (slurm_dir / UNMATCHED).write_text(
                "# submission\twhy it is not graded  (written by grader slurm submit)\n"
                + "".join(f"{name}\t{why}\n" for name, why in self.problems), encoding="utf-8")

    def lines(self) -> str:
        """What submit says of the roster on stdout ('' without one)."""
        if self.roster is None:
            return ""
        return roster_lines(self.roster_size, len(self.ids), self.missing, self.problems)


def _pinned_ledger(course: Path) -> str:
    """The course file's text, its relative `ledger = "..."` line made absolute (the copy lives elsewhere)."""
    from grader.course.policy import _ledger, tomllib

    text = course.read_text(encoding="utf-8")
    ledger = _ledger(tomllib.loads(text).get("policy"), course)
    if ledger is None:
        return text
    line = r"(?m)^(\s*ledger\s*=\s*)(\"[^\"\n]*\"|'[^'\n]*')"
    pinned = re.sub(line, lambda m: m.group(1) + json.dumps(str(ledger)), text, count=1)
    if _ledger(tomllib.loads(pinned).get("policy"), course) != ledger:
        raise GraderError(f"{course}: policy.ledger: write it as ledger = \"<file>\" on a line of its own "
                          "under [policy] (the Slurm jobs read a copy of the course file)", Exit.USAGE)
    return pinned


def roster_lines(size: int, graded: int, missing: list[str], problems: list[tuple[str, str]]) -> str:
    out = [f"roster: {size} student(s): {graded} with a submission, {len(missing)} missing (no submission: a "
           f"`missing` row), {len(problems)} submission(s) not graded (unmatched or ambiguous)\n"]
    if missing:
        out.append(f"  missing: {' '.join(missing)}\n")
    out += [f"  not graded: {name}: {why}\n" for name, why in problems]
    return "".join(out)


def status_lines(slurm_dir: Path, roster_copy: str) -> str:
    """`slurm status`'s word on the roster, from OUT/slurm/'s copies ('' without a roster)."""
    if not roster_copy:
        return ""
    roster = read_roster_csv(Path(roster_copy))
    graded = set(read_roster(slurm_dir / IDS))
    missing = [s.id for s in roster.students if s.id not in graded]
    unmatched = slurm_dir / UNMATCHED
    problems = read_unmatched(unmatched) if unmatched.is_file() else []
    return roster_lines(len(roster.students), len(graded), missing, problems)


__all__ = ["SlurmClass", "roster_lines", "status_lines"]
