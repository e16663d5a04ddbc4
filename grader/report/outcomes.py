"""One student's outcome in a batch, and the labs and tasks a batch graded: what the class summary
(grader/report/batch.py) and the class gradebook (grader/report/class_gradebook.py) read.

An outcome's status says what its row holds (grader/report/standing.py):

  graded                a score
  not graded (no GPU)   no score: the tests that make a grade could not run
  compiled, not compiled   a compile check (batch --compile-only): what built, what was refused
  broken                no results: the submission could not be graded (an unreadable archive, ...)
  missing               a roster student with no submission (grader/course/roster.py): score 0
"""

from __future__ import annotations

from dataclasses import dataclass, field

from grader.report._format import clean_text
from grader.report.standing import (
    BROKEN,
    COMPILED,
    GRADED,
    MISSING,
    NOT_COMPILED,
    NOT_GRADED_NO_GPU,
    compiled,
    standing,
)
from grader.model.results import LabResult, Results


@dataclass
class StudentOutcome:
    """One student's submission in a batch: their results, or why there are none."""

    student: str
    results: Results | None
    error: str = ""  # why the submission could not be graded (or a note about one that was)
    report_dir: str = ""  # the student's report folder, relative to the class summary (for links)
    seconds: float = 0.0  # how long grading it took
    compile_only: bool = False  # a compile check: built and checked, no test run
    name: str = ""  # from the roster (grader/course/roster.py)
    email: str = ""
    missing: bool = False  # a roster student with no submission

    @property
    def broken(self) -> bool:
        return self.results is None and not self.missing

    @property
    def status(self) -> str:
        if self.missing:
            return MISSING
        if self.results is None:
            return BROKEN
        if self.compile_only:
            return COMPILED if compiled(self.results) else NOT_COMPILED
        return GRADED if standing(self.results).graded else NOT_GRADED_NO_GPU

    @property
    def graded(self) -> bool:
        """Whether the row holds a score."""
        return self.status == GRADED

    @property
    def final_scores(self) -> dict[str, float]:
        """lab name -> the score that counts (a course file's late penalty already taken off: the lab's
        score is the final one, its late record keeps the raw score; grader/course/policy.py)."""
        return {lab.name: lab.score for lab in self.results.labs} if self.results is not None else {}


def late_labs(outcomes: list[StudentOutcome]) -> bool:
    """Whether a course file's late policy was applied (some lab carries a late record)."""
    return any(lab.late is not None for o in outcomes if o.results is not None for lab in o.results.labs)


def with_roster(outcomes: list[StudentOutcome]) -> bool:
    """Whether the batch had a roster (grader/course/roster.py): the gradebook then has name and email columns."""
    return any(o.name or o.email or o.missing for o in outcomes)


def graded_only(outcomes: list[StudentOutcome]) -> list[StudentOutcome]:
    """The outcomes whose results are a grade: the only ones statistics, pass rates and leaderboards
    count (a run without a GPU would add zeros that are no scores)."""
    return [o for o in outcomes if o.graded]


@dataclass
class LabColumn:
    number: int
    name: str  # "03-vector-add"
    title: str
    max_score: float
    tasks: list[tuple[str, str]] = field(default_factory=list)  # (task id, title), first-seen order


def batch_labs(outcomes: list[StudentOutcome]) -> list[LabColumn]:
    """Every lab any submission with results has, in lab order, with the union of their tasks."""
    labs: dict[str, LabColumn] = {}
    for o in outcomes:
        if o.results is None:
            continue
        for lab in o.results.labs:
            col = labs.setdefault(lab.name, LabColumn(lab.number, lab.name, lab.title, lab.max_score))
            col.max_score = max(col.max_score, lab.max_score)
            known = {tid for tid, _ in col.tasks}
            col.tasks += [(t.id, t.title) for t in lab.tasks if t.id not in known]
    return sorted(labs.values(), key=lambda c: (c.number, c.name))


def by_name(results: Results | None) -> dict[str, LabResult]:
    return {lab.name: lab for lab in results.labs} if results is not None else {}


def roster_order(outcomes: list[StudentOutcome]) -> list[StudentOutcome]:
    """Roster order: by name, case-insensitively (stable, so equal names keep their input order)."""
    return sorted(outcomes, key=lambda o: (clean_text(o.student).casefold(), clean_text(o.student)))


def build_failed(lab: LabResult) -> bool:
    return any(not b.ok for b in lab.builds)


__all__ = [
    "LabColumn",
    "StudentOutcome",
    "batch_labs",
    "build_failed",
    "by_name",
    "graded_only",
    "late_labs",
    "roster_order",
    "with_roster",
]
