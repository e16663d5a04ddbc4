"""What the hint tests of labs 01-03 share (test_hints_lab01.py, _lab02.py, _lab03.py): the failures a lab's
test prints, made the way the grader meets them. The lab's test prints a GoogleTest failure (the
comparison of cudalab/compare.hpp, an EXPECT_EQ, an exception from CUDA_CHECK), the grader cleans it
(grader/execute/gtest.py), names its category and its task (lab.toml), and annotates the result with the
lab's hints and geometry."""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence
from pathlib import Path


from grader.execute.gtest import categorize_failure, clean_failure
from grader.model.labs import discover
from grader.model.results import Category, LabResult, Status
from grader.model.results import TestResult as TResult
from grader.score import hints

ROOT = Path(__file__).resolve().parents[2]
LABS = {lab.name: lab for lab in discover(ROOT)}
NAN = float("nan")
POISON_INT = -1515870811  # 0xA5A5A5A5 as an int (cudalab::poison)
POISON_UINT = 2779096485  # the same bytes as an unsigned int


# --- what the lab's tests print ------------------------------------------------------------------------


def _show(v: object, single: bool = True) -> str:
    """A value as compare.hpp prints it: floating point with 9 significant digits (of a float, unless
    `single` is False: a double), NaN with its sign (the poison is 0xFF bytes, a negative NaN)."""
    if isinstance(v, float):
        if math.isnan(v):
            return "-nan"
        return "%.9g" % (struct.unpack("f", struct.pack("f", v))[0] if single else v)
    return str(v)


def _report(expected: Sequence, actual: Sequence, seed: int, cols: int | None = None,
            rule: str = "exact", single: bool = True) -> str | None:
    """cudalab::AllEqual's failure (None when equal): the count, the span and the first 8 mismatches,
    as [i] or, for a row-major 2D output of `cols` columns, as [row r, col c]."""
    bad = [i for i, (e, a) in enumerate(zip(expected, actual)) if not e == a]  # NaN never matches
    if not bad:
        return None
    text = (f"{len(bad)} of {len(expected)} elements differ (seed {seed}, {rule}); mismatches span indices "
            f"{bad[0]}..{bad[-1]}\n")
    for i in bad[:8]:
        where = f"[{i}]" if cols is None else f"[row {i // cols}, col {i % cols}]"
        text += f"  {where} expected {_show(expected[i], single)}, actual {_show(actual[i], single)}\n"
    if len(bad) > 8:
        text += f"  ... and {len(bad) - 8} more"
    return text


def _value_of(expr: str, at: str, note: str = "", why: str | None = None, actual: str = "false") -> str:
    """EXPECT_TRUE(expr) << note, where expr is an AssertionResult with message `why` (or a bool)."""
    said = f"{actual} ({why})" if why is not None else actual
    expected = "false" if actual == "true" else "true"
    return f"{at}\nValue of: {expr}\n  Actual: {said}\nExpected: {expected}" + (f"\n{note}" if note else "")


def _expect_eq(a: str, a_is: object, b: str, b_is: object, at: str, note: str = "") -> str:
    """EXPECT_EQ(a, b) << note (GoogleTest leaves out 'Which is' where the value reads as the expression)."""
    def side(expr: str, value: object) -> str:
        return f"  {expr}" + ("" if str(value) == expr else f"\n    Which is: {value}")
    return f"{at}\nExpected equality of these values:\n{side(a, a_is)}\n{side(b, b_is)}" + (f"\n{note}" if note else "")


def _exception(what: str) -> str:
    """An exception that left the test body (a CUDA_CHECK that threw, in the student's code or the test's)."""
    return f'unknown file\nC++ exception with description "{what}" thrown in the test body.'


def _cuda_error(name: str, text: str, expr: str, where: str) -> str:
    """cudalab::CudaError's description (common/include/cudalab/check.cuh)."""
    return f"CUDA error {name} ({text}) from `{expr}` at {where}"


def _pending(what: str, thrown: bool, pending: str | None) -> str:
    """cudalab::launch_error_reported's failure message (common/include/cudalab/gtest_cuda.hpp)."""
    text = ""
    if not thrown:
        text += (f"{what} is a launch the runtime refuses, and it returned normally: check the launch with "
                 "CUDA_CHECK_LAST() so the error becomes an exception. ")
    if pending:
        text += f"{what} left {pending} pending: a launch error must be read with cudaGetLastError()"
    return text


def _annotate(lab_name: str, failures: dict[str, list[str]], passed: Sequence[str] = (),
              category: Category | None = None) -> dict[str, str]:
    """Grade these failures as the grader does: each test's failures cleaned and joined into its message,
    its category read from the message (or given), its task from lab.toml; then the lab's hints and
    geometry. The hint of each failed test, by name."""
    lab = LABS[lab_name]
    result = LabResult(number=lab.number, name=lab.name, title=lab.title, max_score=100)
    for name in passed:
        result.tests.append(TResult(name=name, status=Status.PASSED, task=lab.task_for_test(name).id))
    for name, raw in failures.items():
        message = "\n\n".join(clean_failure(f) for f in raw)
        task = lab.task_for_test(name)
        result.tests.append(TResult(name=name, status=Status.FAILED, task=task.id if task else None,
                                    category=category or categorize_failure(message), message=message))
    hints.annotate(result, hints.hints_for_lab(lab.path), geometry=lab.geometry)
    return {t.name: t.hint for t in result.tests if t.status is Status.FAILED}


def _technique(lab_name: str, task: str, message: str) -> str:
    """The hint of a missing technique (grader/score/penalties.py names its test Techniques.<task>)."""
    lab = LABS[lab_name]
    result = LabResult(number=lab.number, name=lab.name, title=lab.title, max_score=100)
    result.tests.append(TResult(name=f"Techniques.{task}", status=Status.FAILED, task=task,
                                category=Category.TECHNIQUE_MISSING, message=message))
    hints.annotate(result, hints.hints_for_lab(lab.path), geometry=lab.geometry)
    return result.tests[0].hint
