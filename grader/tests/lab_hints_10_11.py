"""What the hint tests of labs 10 and 11 share: a lab's own hints applied to failures built the way its
test binary reports them (test_hints_lab10.py, test_hints_lab11.py)."""

from __future__ import annotations

from functools import lru_cache

from grader.model.labs import Lab, discover
from grader.model.results import LabResult, Status
from grader.model.results import TestResult as TResult
from grader.score import hints
from grader.tests.test_hints import ROOT

COOP = "10-cooperative-groups"
QSORT = "11-quicksort"
POISON_INT = "-1515870811"  # cudalab::poison of an int: 0xA5 bytes
POISON_UNSIGNED = "2779096485"  # ... of an unsigned


@lru_cache(maxsize=None)
def lab_of(name: str) -> Lab:
    return {lab.name: lab for lab in discover(ROOT)}[name]


def own_hints(lab_name: str, tests: list[tuple]) -> list[str]:
    """Annotate (name, task, category, message[, status]) tests with the lab's own hints and geometry; the
    hints of those that did not pass, in order. category None: a passed test."""
    lab = lab_of(lab_name)
    result = LabResult(number=lab.number, name=lab.name, title=lab.title, max_score=100)
    for name, task, category, message, *status in tests:
        state = status[0] if status else (Status.FAILED if category else Status.PASSED)
        result.tests.append(TResult(name=name, task=task, status=state, category=category, message=message))
    hints.annotate(result, hints.hints_for_lab(lab.path), geometry=lab.geometry)
    return [t.hint for t in result.tests if t.status is not Status.PASSED]


def own_texts(lab_name: str) -> list[str]:
    return [h.text for h in hints.load_hints(lab_of(lab_name).path / hints.LAB_HINTS)]


def differ(n: int, bad: int, first: int, last: int, samples: list[tuple[int, str, str]], seed: int,
            rule: str = "exact") -> str:
    """cudalab::AllEqual / AllNear's message (common/include/cudalab/compare.hpp)."""
    lines = "".join(f"  [{i}] expected {e}, actual {a}\n" for i, e, a in samples)
    more = f"  ... and {bad - len(samples)} more" if bad > len(samples) else ""
    return (f"{bad} of {n} elements differ (seed {seed}, {rule}); mismatches span indices {first}..{last}\n"
            + lines + more)


def value_of(expression: str, why: str, note: str, at: str) -> str:
    """EXPECT_TRUE(assertion) << note, as the grader keeps it (the location moved to the end)."""
    return f"Value of: {expression}\n  Actual: false ({why})\nExpected: true\n{note}\n(at {at})"


def exception(error: str, description: str, expression: str, where: str) -> str:
    """A cudalab::CudaError (check.cuh) that escaped the test body."""
    return (f'C++ exception with description "CUDA error {error} ({description}) from `{expression}` at '
            f'{where}" thrown in the test body.')


def racecheck(kernel: str, write: str, read: str) -> str:
    return (f"compute-sanitizer racecheck reported 24 error(s):\n  Shared-memory race (error) between a write at "
            f"{write} and a read at {read} in {kernel}; 8 hazards")
