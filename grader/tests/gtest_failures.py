"""Failures as the labs' test binaries report them, for the hint tests (test_hints_labs_*.py): the texts
cudalab/compare.hpp and GoogleTest print, compute-sanitizer's logs, and a run of a lab's binary scored as a
real grade scores it (gtest.parse_report, then scoring.score, which gives each test its task and hint)."""

from __future__ import annotations

import io
import math
import struct

from grader.execute import gtest, sanitizer, sanitizer_log
from grader.inspect.techniques import TechniqueOutcome
from grader.model.labs import discover
from grader.model.progress import Progress
from grader.model.results import Category, LabResult, Status
from grader.model.results import TestResult as TResult
from grader.score import scoring
from grader.tests.test_hints import ROOT

LABS = {lab.name: lab for lab in discover(ROOT)}
POISON_INT = -1515870811  # an int32 of 0xA5 bytes (cudalab::poison)


def f32(x: float) -> float:
    """x rounded to float, as the GPU stores it (inf past the largest float)."""
    try:
        return struct.unpack("<f", struct.pack("<f", x))[0]
    except OverflowError:
        return math.copysign(math.inf, x)


def from_bits(bits: int) -> float:
    return struct.unpack("<f", struct.pack("<I", bits & 0xFFFFFFFF))[0]


POISON = from_bits(0xFFFFFFFF)  # cudalab::poison and lab 04's kPoison: 0xFF bytes, a negative NaN
SCRIBBLE = from_bits(0x5A5A5A5A)  # what the tests leave in shared memory before each call (scribble.cuh)
SCRIBBLE_INT = 0x5A5A5A5A


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


# --- values and messages ---------------------------------------------------------------------------------

def show(v: float | int) -> str:
    """A value as compare.hpp prints it: integers as they are, floats with 9 significant digits (glibc writes
    a NaN with its sign bit set as -nan)."""
    if isinstance(v, float):
        if math.isnan(v):
            return "-nan" if math.copysign(1.0, v) < 0 else "nan"
        if math.isinf(v):
            return "-inf" if v < 0 else "inf"
        return f"{v:.9g}"
    return str(v)


def compare(expected: list, actual: list, seed: int, rule: str = "exact",
            cols: int | None = None) -> str | None:
    """cudalab::AllEqual's (rule "exact") or AllNear's failure text, with [row r, col c] samples when the
    output is 2-D (cols per row); None when they agree."""
    if rule == "exact":
        def same(e, a) -> bool:
            return e == a
    else:  # "tolerance rel R abs A"
        words = rule.split()
        rel, tol_abs = float(words[2]), float(words[4])

        def same(e, a) -> bool:
            return abs(a - e) <= tol_abs + rel * abs(e)  # False for NaN
    bad = [i for i, (e, a) in enumerate(zip(expected, actual)) if not same(e, a)]
    if not bad:
        return None

    def where(i: int) -> str:
        return f"[{i}]" if cols is None else f"[row {i // cols}, col {i % cols}]"

    text = (f"{len(bad)} of {len(expected)} elements differ (seed {seed}, {rule}); mismatches span indices "
            f"{bad[0]}..{bad[-1]}\n")
    text += "".join(f"  {where(i)} expected {show(expected[i])}, actual {show(actual[i])}\n" for i in bad[:8])
    return text + (f"  ... and {len(bad) - 8} more" if len(bad) > 8 else "")


def value_of(where: str, expr: str, body: str, streamed: str = "") -> str:
    """EXPECT_TRUE(expr) << streamed, failed with an AssertionResult message, as GoogleTest reports it."""
    text = f"{where}\nValue of: {expr}\n  Actual: false ({body})\nExpected: true"
    return text + (f"\n{streamed}" if streamed else "")


def equal(where: str, a: str, a_is: str, b: str, b_is: str, streamed: str = "") -> str:
    """EXPECT_EQ(a, b) << streamed (GoogleTest leaves out "Which is" where an expression is its own value)."""
    def side(expr: str, value: str) -> str:
        return f"\n  {expr}" + (f"\n    Which is: {value}" if value != expr else "")
    text = f"{where}\nExpected equality of these values:{side(a, a_is)}{side(b, b_is)}"
    return text + (f"\n{streamed}" if streamed else "")


def exception(what: str) -> str:
    """An exception (a cudalab::CudaError, cudalab/check.cuh) escaping the test body."""
    return f'unknown file\nC++ exception with description "{what}" thrown in the test body.'


def cuda_error(name: str, text: str, call: str, where: str) -> str:
    """A cudalab::CudaError escaping the test body."""
    return exception(f"CUDA error {name} ({text}) from `{call}` at {where}")


# --- compute-sanitizer --------------------------------------------------------------------------------------

def sanitizer_result(tool: str, log: str, own_files: tuple[str, ...] = ()) -> TResult:
    """A compute-sanitizer result as grader/execute/sanitizer.run_tool makes it from the tool's log."""
    findings, total = sanitizer_log.parse_log(log, tool, own_files)
    assert findings, "the log must hold a finding"
    result = TResult(name=f"sanitizer.{tool}", status=Status.PASSED, kind="correctness",
                     properties={"sanitizer_tool": tool})
    sanitizer.report_findings(result, tool, findings, total)
    return result


def graded_race(lab_name: str, kernel: str, write_at: str, read_at: str) -> TResult:
    """The racecheck result of a lab's grade whose only finding is this race (race_log's)."""
    return grade(lab_name, [], extra=[sanitizer_result("racecheck", race_log(kernel, write_at, read_at))])[
        "sanitizer.racecheck"]


def race_log(kernel: str, write_at: str, read_at: str, hazards: int = 2048) -> str:
    return ("========= COMPUTE-SANITIZER\n"
            "========= Error: Race reported between "
            f"Write access at {kernel}+0x3f0 in /home/s/labs/{write_at}\n"
            f"=========     and Read access at {kernel}+0x410 in /home/s/labs/{read_at} [{hazards} hazards]\n"
            "=========\n"
            "========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)\n")


MEMCHECK_DETAIL = ("by thread (5,3,0) in block (0,1,0)", "Access to 0x7f2440808000 is out of bounds",
                   "and is 1 bytes after the nearest allocation at 0x7f2440804000 of size 16,384 bytes")


def memcheck_log(what: str, kernel: str, at: str, errors: int = 64, detail: tuple[str, ...] = MEMCHECK_DETAIL) -> str:
    return ("========= COMPUTE-SANITIZER\n"
            f"========= {what}\n"
            f"=========     at {kernel}+0x2c0 in /home/s/labs/{at}\n"
            + "".join(f"=========     {line}\n" for line in detail)
            + "=========\n"
            f"========= ERROR SUMMARY: {errors} errors\n")


def synccheck_log(kernel: str, at: str) -> str:
    return ("========= COMPUTE-SANITIZER\n"
            "========= Barrier error detected. Divergent thread(s) in block\n"
            f"=========     at {kernel}+0x270 in /home/s/labs/{at}\n"
            "=========     by thread (64,0,0) in block (0,0,0)\n"
            "=========\n"
            "========= ERROR SUMMARY: 96 errors\n")


# --- grading a run of the lab's binary ----------------------------------------------------------------------

def grade(lab_name: str, tests: list[tuple[str, list[str]]], extra: list[TResult] | None = None,
          missing: list[str] | None = None) -> dict[str, TResult]:
    """Score a run that reported these tests (name, its failures as GoogleTest writes them; none: passed),
    plus extra results (sanitizer) and the lab's techniques whose message contains one of missing: every
    test by name, with its task and hint."""
    lab = LABS[lab_name]
    suites: dict[str, list[dict]] = {}
    for name, failures in tests:
        suite, _, test = name.partition(".")
        suites.setdefault(suite, []).append({"name": test, "status": "RUN", "result": "COMPLETED",
                                             "failures": [{"failure": f} for f in failures]})
    run = gtest.parse_report({"testsuites": [{"name": s, "testsuite": t} for s, t in suites.items()]})
    result = LabResult(number=lab.number, name=lab.name, title=lab.title, max_score=100)
    result.tests = run.tests + list(extra or [])
    outcomes = [TechniqueOutcome(t, False, f"the PTX of {t.kernel}" if t.kind == "ptx"
                                 else "the functions your code calls")
                for t in lab.techniques if any(m in t.message for m in missing or [])]
    assert len(outcomes) == len(missing or []), "each missing technique names one of the lab's"
    scoring.score(lab, result, techniques=(outcomes, []) if missing else None, gpu={}, label="student",
                  progress=Progress(stream=io.StringIO()))
    return {t.name: t for t in result.tests}


def one(lab_name: str, name: str, failures: list[str], **kwargs) -> TResult:
    """One test of a run, graded (kwargs: grade's extra, missing)."""
    return grade(lab_name, [(name, failures)], **kwargs)[name]


def stopped(name: str, category: Category, message: str) -> TResult:
    """A test whose process was stopped (grader/execute/runs.py)."""
    return TResult(name=name, status=Status.FAILED, kind="correctness", category=category, message=message)


def memcheck_log_short(what: str, kernel: str, at: str, errors: int = 64) -> str:
    """memcheck's report of an access out of bounds of any allocation (a small address, no nearest one)."""
    return memcheck_log(what, kernel, at, errors, detail=("by thread (37,0,0) in block (0,0,0)",
                                                          "Address 0x3c is out of bounds"))


def sanitized(lab_name: str, tool: str, log: str) -> TResult:
    """compute-sanitizer <tool> over the lab's binary, graded (its task comes from the finding's kernel)."""
    result = sanitizer_result(tool, log)
    return grade(lab_name, [], extra=[result])[result.name]
