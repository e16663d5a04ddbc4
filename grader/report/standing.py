"""Whether a run's score is a grade, and what a compile check found.

A test that needs a GPU and could not run (category no_gpu) leaves its task without a verdict: the
points it would have earned are neither earned nor lost. A lab with such a test is therefore not
graded, and neither is a run with such a lab: every renderer says "not graded: no GPU" where it would
show a score, so that a machine without a GPU never produces a zero that looks real. A lab whose build
failed, or whose file the static checks refused, is graded (it earns 0 on any machine).

compile_state() is what a compile-only batch reports per lab: compiled, compile error, link error or
refused (the static checks, grader/inspect/static_checks.py, turned the file away before it was built).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from grader.model.hidden import counts, is_summary
from grader.model.results import Category, LabResult, Results, Status, TestResult

NO_GPU = "no GPU"
NOT_GRADED = "not graded"

# A class gradebook row's status (grader/report/batch.py).
GRADED = "graded"
NOT_GRADED_NO_GPU = "not graded (no GPU)"
COMPILED = "compiled"
NOT_COMPILED = "not compiled"
BROKEN = "broken"
MISSING = "missing"  # a roster student with no submission (grader/course/roster.py): score 0
ROW_STATUSES = (GRADED, NOT_GRADED_NO_GPU, COMPILED, NOT_COMPILED, BROKEN, MISSING)

# compile_state() values
STATE_COMPILED = "compiled"
STATE_COMPILE_ERROR = "compile error"
STATE_LINK_ERROR = "link error"
STATE_REFUSED = "refused"
COMPILE_STATES = (STATE_COMPILED, STATE_COMPILE_ERROR, STATE_LINK_ERROR, STATE_REFUSED)


def needs_gpu(test: TestResult) -> bool:
    """The test could not give a verdict because there was no GPU."""
    return test.category is Category.NO_GPU and test.status is not Status.PASSED


@dataclass(frozen=True)
class Standing:
    """Whether a score is a grade: graded, or why not (reason) and how many tests waited for a GPU."""

    graded: bool
    reason: str = ""  # "no GPU" when not graded
    waiting: int = 0  # tests that needed a GPU and could not run
    labs: tuple[str, ...] = ()  # the labs not graded

    @property
    def headline(self) -> str:
        """'not graded: no GPU' (or '' when graded)."""
        return "" if self.graded else f"{NOT_GRADED}: {self.reason}"


def _waiting(test: TestResult) -> int:
    """How many tests this row stands for that needed a GPU (a hidden summary row: those it counts)."""
    if not needs_gpu(test):
        return 0
    if is_summary(test):
        c = counts([test])
        return c[Status.SKIPPED] + c[Status.NOT_RUN]
    return 1


def lab_standing(lab: LabResult) -> Standing:
    waiting = sum(_waiting(t) for t in lab.tests)
    if not waiting:
        return Standing(True)
    return Standing(False, NO_GPU, waiting, (lab.name,))


def standing(results: Results) -> Standing:
    """The run's standing: not graded when any of its labs is not."""
    labs = [lab_standing(lab) for lab in results.labs]
    missing = [s for s in labs if not s.graded]
    if not missing:
        return Standing(True)
    return Standing(False, NO_GPU, sum(s.waiting for s in missing), tuple(n for s in missing for n in s.labs))


def grade_record(results: Results) -> dict[str, Any]:
    """The "grade" object results.json carries beside the run: {"status": "graded"} or, without a GPU,
    {"status": "not_graded", "reason": "no GPU", "labs": [...], "tests_not_run": N}."""
    s = standing(results)
    if s.graded:
        return {"status": "graded"}
    return {"status": "not_graded", "reason": s.reason, "labs": list(s.labs), "tests_not_run": s.waiting}


def score_text(score: str, max_score: str, s: Standing) -> str:
    """'85 / 100', or 'not graded' for a score that is not a grade."""
    return f"{score} / {max_score}" if s.graded else NOT_GRADED


# --- a compile check ----------------------------------------------------------------------------------


def compile_state(lab: LabResult) -> tuple[str, str]:
    """(state, why): whether the lab's code compiled and linked, or was refused before it was built."""
    for b in lab.builds:
        if not b.ok and b.category in (Category.COMPILE_ERROR, Category.LINK_ERROR, Category.FORBIDDEN_CALL):
            state = {Category.LINK_ERROR: STATE_LINK_ERROR, Category.FORBIDDEN_CALL: STATE_REFUSED}.get(
                b.category, STATE_COMPILE_ERROR)
            return state, b.message or f"{b.target} did not build"
    for b in lab.builds:
        if not b.ok:
            return STATE_COMPILE_ERROR, b.message or f"{b.target} did not build"
    refused = next((t for t in lab.tests if t.status is Status.NOT_RUN
                    and t.category in (Category.FORBIDDEN_CALL, Category.COMPILE_ERROR)), None)
    if refused is not None:
        return STATE_REFUSED, refused.message
    return STATE_COMPILED, ""


def build_label(lab: LabResult) -> str:
    """What a report's build column says of a lab: "built", "build failed" or "refused"."""
    state = compile_state(lab)[0]
    return {STATE_COMPILED: "built", STATE_REFUSED: "refused"}.get(state, "build failed")


def compiled(results: Results) -> bool:
    return all(compile_state(lab)[0] == STATE_COMPILED for lab in results.labs)


__all__ = [
    "BROKEN",
    "COMPILED",
    "COMPILE_STATES",
    "GRADED",
    "MISSING",
    "NOT_COMPILED",
    "NOT_GRADED",
    "NOT_GRADED_NO_GPU",
    "NO_GPU",
    "ROW_STATUSES",
    "Standing",
    "build_label",
    "compile_state",
    "compiled",
    "grade_record",
    "lab_standing",
    "needs_gpu",
    "score_text",
    "standing",
]
