"""One student's outcome in a batch, and the labs and tasks a batch graded: what the class summary
(grader/report/batch.py) and the class gradebook (grader/report/class_gradebook.py) read.

An outcome's status says what its row holds (grader/report/standing.py):

  graded                a score
  not graded (no GPU)   no score: the tests that make a grade could not run
  compiled, not compiled   a compile check (batch --compile-only): what built, what was refused
  broken                no results: the submission could not be graded (an unreadable archive, ...)
"""

from __future__ import annotations

from dataclasses import dataclass, field

from grader.report._format import clean_text
from grader.report.standing import BROKEN, COMPILED, GRADED, NOT_COMPILED, NOT_GRADED_NO_GPU, compiled, standing
from grader.results import LabResult, Results


@dataclass
class StudentOutcome:
    """One student's submission in a batch: their results, or why there are none."""

    student: str
    results: Results | None
    error: str = ""  # why the submission could not be graded (or a note about one that was)
    report_dir: str = ""  # the student's report folder, relative to the class summary (for links)
    seconds: float = 0.0  # how long grading it took
    compile_only: bool = False  # a compile check: built and checked, no test run

    @property
    def broken(self) -> bool:
        return self.results is None

    @property
    def status(self) -> str:
        if self.results is None:
            return BROKEN
        if self.compile_only:
            return COMPILED if compiled(self.results) else NOT_COMPILED
        return GRADED if standing(self.results).graded else NOT_GRADED_NO_GPU

    @property
    def graded(self) -> bool:
        """Whether the row holds a score."""
        return self.status == GRADED


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


__all__ = ["LabColumn", "StudentOutcome", "batch_labs", "build_failed", "by_name", "graded_only", "roster_order"]
