"""Labs 01-03's own hints (labs/NN-slug/hints.toml): each hint fires on the failure of the bug it was
written for, and not outside its task or pattern.

The failures are made the way the grader meets them: the lab's test prints a GoogleTest failure (the
comparison of cudalab/compare.hpp, an EXPECT_EQ, an exception from CUDA_CHECK), the grader cleans it
(grader/execute/gtest.py), names its category and its task (lab.toml), and annotates the result with the
lab's hints and geometry. Where the message depends on what the buggy code computes, a few lines of
Python compute it, for the bug of solutions/NN-slug/mutants/ the hint was written for, on the test's own
sizes."""

from __future__ import annotations

import math
import struct
from collections import Counter
from collections.abc import Callable, Sequence
from itertools import product
from pathlib import Path

import pytest

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


def test_every_hint_of_labs_01_to_03_is_keyed_on_a_public_task() -> None:
    for name in ("01-hello", "02-indexing", "03-vector-add"):
        lab = LABS[name]
        public = {t.id for t in lab.tasks if not t.hidden}
        own = hints.load_hints(lab.path / "hints.toml")
        assert len(own) >= 8, name
        assert all(h.task in public for h in own), name


# === Lab 01: hello ======================================================================================

HELLO = "labs/01-hello/test_hello.cu"


def _hello_lines(blocks: int, threads: int, printed: list[str]) -> list[str]:
    """HelloCorrectness.PrintsOneLinePerThread's failure, for the lines say_hello printed."""
    seen = Counter(line for line in printed if line.startswith("hello from"))
    total = sum(seen.values())
    wrong, problems = 0, ""
    for b, t in product(range(blocks), range(threads)):
        expected = f"hello from block {b}, thread {t}"
        if seen[expected] != 1:
            wrong += 1
            if wrong <= 4:
                problems += f'  "{expected}" printed {seen[expected]} times\n'
    assert wrong or total != blocks * threads, "the bug should fail this grid"
    note = (f'expected {blocks * threads} lines "hello from block B, thread T" (one per thread), captured {total}'
            + (" (none: does say_hello wait with cudaDeviceSynchronize before returning?)" if total == 0 else "")
            + "\n" + problems)
    return [_value_of("wrong == 0 && total == expected_total", f"{HELLO}:90", note)]


def test_lab_01_say_hello_that_syncs_before_the_launch() -> None:
    """Mutant hello-sync-before-launch: the lines are still on the device when say_hello returns."""
    found = _annotate("01-hello", {"HelloCorrectness.PrintsOneLinePerThread/grid2_block4": _hello_lines(2, 4, [])})
    hint = found["HelloCorrectness.PrintsOneLinePerThread/grid2_block4"]
    assert "device printf output reaches stdout at the next synchronization point" in hint
    assert "before the launch waits for nothing" in hint


@pytest.mark.parametrize("mutant", ["hello-prints-global-index", "hello-swapped-launch-config"])
def test_lab_01_hello_lines_that_name_the_wrong_thread(mutant: str) -> None:
    blocks, threads = 3, 33
    if mutant == "hello-prints-global-index":
        printed = [f"hello from block {b}, thread {b * threads + t}" for b in range(blocks) for t in range(threads)]
    else:  # <<<threads, blocks>>>
        printed = [f"hello from block {b}, thread {t}" for b in range(threads) for t in range(blocks)]
    found = _annotate("01-hello", {"HelloCorrectness.PrintsOneLinePerThread/grid3_block33": _hello_lines(blocks, threads, printed)})
    assert "Some lines name the wrong thread" in found["HelloCorrectness.PrintsOneLinePerThread/grid3_block33"]


def test_lab_01_say_hello_with_the_launch_arguments_swapped_runs_the_bad_launch() -> None:
    """Mutant hello-swapped-launch-config: say_hello(1, 2048) launches 2048 blocks of 1 thread, which runs."""
    failures = [
        _value_of("thrown.empty()", f"{HELLO}:125", "say_hello(1, 2048) is a launch the runtime refuses, and it "
                  "returned normally: check the launch with CUDA_CHECK_LAST()", actual="true"),
        _expect_eq('out.find("hello from")', 0, "std::string::npos", 18446744073709551615, f"{HELLO}:129",
                   "a launch that cannot run printed lines"),
    ]
    found = _annotate("01-hello", {"HelloCheckedCorrectness.SayHelloThrowsOnABadLaunch": failures})
    hint = found["HelloCheckedCorrectness.SayHelloThrowsOnABadLaunch"]
    assert "say_hello(1, 2048) ran and printed, so it did not launch the shape it was given" in hint


def test_lab_01_say_hello_that_does_not_check_its_launch() -> None:
    failures = [
        _value_of("thrown.empty()", f"{HELLO}:125", "say_hello(1, 2048) is a launch the runtime refuses, and it "
                  "returned normally: check the launch with CUDA_CHECK_LAST()", actual="true"),
        _expect_eq("pending", 1, "cudaSuccess", 0, f"{HELLO}:127",
                   "say_hello left cudaErrorInvalidValue pending: a launch error must be read with cudaGetLastError()"),
    ]
    found = _annotate("01-hello", {"HelloCheckedCorrectness.SayHelloThrowsOnABadLaunch": failures})
    hint = found["HelloCheckedCorrectness.SayHelloThrowsOnABadLaunch"]
    assert "Check the launch in say_hello with CUDA_CHECK_LAST() right after it" in hint
    assert "byte count" not in hint  # not the grader's cudaErrorInvalidValue hint for cudaMemcpy


def test_lab_01_tick_that_moves_its_pointer() -> None:
    """Mutant tick-increments-pointer: counter += 1 adds to the kernel's copy of the address."""
    failure = _expect_eq("d_counter.to_host()[0]", 1000, "1007u", 1007, f"{HELLO}:140",
                         "the counter started at 1000 and tick ran 7 times")
    found = _annotate("01-hello", {"HelloTickCorrectness.AddsOnePerCall": [failure]})
    assert "not to the pointer itself" in found["HelloTickCorrectness.AddsOnePerCall"]


def _records(blocks: int, threads: int, kernel: Callable[[int, int, int, int], tuple[int, int, int] | None],
             swapped: bool = False) -> str | None:
    """HelloRecordCorrectness' comparison, for a record_kernel(b, t, blockDim, gridDim) -> (index, block,
    thread) (or None: writes nothing) launched on blocks x threads (swapped: on threads x blocks)."""
    n = blocks * threads
    grid, block = (threads, blocks) if swapped else (blocks, threads)
    records = [(POISON_INT,) * 3] * n
    for b, t in product(range(grid), range(block)):  # the last writer wins
        out = kernel(b, t, block, grid)
        if out is not None:
            records[out[0]] = (out[1], out[2], out[0])
    expected = [v for i in range(n) for v in (i // threads, i % threads, i)]
    actual = [v for r in records for v in r]
    report = _report(expected, actual, 1001, cols=3)
    if report is None:
        return None
    return _value_of("AllEqual(expected, actual, kSeed, cudalab::Shape2D{n, 3})", f"{HELLO}:166",
                     f"(row = record index, columns = block, thread, global) for {blocks} blocks x {threads} threads",
                     why=report)


def _right(b: int, t: int, bdim: int, gdim: int) -> tuple[int, int, int]:
    return b * bdim + t, b, t


@pytest.mark.parametrize("mutant, kernel, swapped", [
    ("record-fields-swapped", lambda b, t, bdim, gdim: (b * bdim + t, t, b), False),
    ("record-global-uses-griddim", lambda b, t, bdim, gdim: (b * gdim + t, b, t), False),
    ("record-swapped-launch-config", _right, True),
])
def test_lab_01_records_that_name_the_wrong_thread(mutant: str, kernel: Callable, swapped: bool) -> None:
    failure = _records(4, 33, kernel, swapped)
    found = _annotate("01-hello", {"HelloRecordCorrectness.EveryThreadWritesItsRecord/grid4_block33": [failure]})
    hint = found["HelloRecordCorrectness.EveryThreadWritesItsRecord/grid4_block33"]
    assert "Some records name the wrong thread" in hint
    assert "blockDim.x per block rather than gridDim.x" in hint


def test_lab_01_record_kernel_that_writes_nothing() -> None:
    failure = _records(7, 255, lambda b, t, bdim, gdim: None)
    found = _annotate("01-hello", {"HelloRecordCorrectness.EveryThreadWritesItsRecord/grid7_block255": [failure]})
    hint = found["HelloRecordCorrectness.EveryThreadWritesItsRecord/grid7_block255"]
    assert hint.startswith("Every one of the 5,355 elements is wrong")
    assert "Check that record_threads launches record_kernel on the grid it was given" in hint


def test_lab_01_record_index_that_grows_with_the_grid_faults_on_the_large_grid() -> None:
    """Mutant record-global-uses-griddim on 4096 x 256: indices up to 4095 * 4096 + 255, far past the records."""
    failure = _exception(_cuda_error("cudaErrorIllegalAddress", "an illegal memory access was encountered",
                                     "cudaDeviceSynchronize()", f"{HELLO}:143"))
    found = _annotate("01-hello", {"HelloRecordCorrectness.EveryThreadWritesItsRecord/grid4096_block256": [failure]})
    assert "record_kernel wrote outside the records" in found["HelloRecordCorrectness.EveryThreadWritesItsRecord/grid4096_block256"]


def test_lab_01_record_threads_with_the_launch_arguments_swapped() -> None:
    """Mutant record-swapped-launch-config: 4096 x 256 becomes 256 blocks of 4096 threads, which the runtime
    refuses; and record_threads(d, 1, 2048) becomes 2048 blocks of 1 thread, which runs and writes."""
    refused = _exception(_cuda_error("cudaErrorInvalidValue", "invalid argument", "kernel launch",
                                     "labs/01-hello/hello.cu:75"))
    wrote = [
        _value_of('cudalab::launch_error_reported([&] { record_threads(d_records.data(), 1, kTooManyThreads); }, '
                  '"record_threads(d, 1, " + std::to_string(kTooManyThreads) + ")")', f"{HELLO}:176",
                  why=_pending("record_threads(d, 1, 2048)", thrown=False, pending=None)),
        _expect_eq("written", 2048, "0", 0, f"{HELLO}:186", "records were written by a launch that should never have run"),
    ]
    found = _annotate("01-hello", {"HelloRecordCorrectness.EveryThreadWritesItsRecord/grid4096_block256": [refused],
                                   "HelloRecordCheckedCorrectness.ThrowsOnABadLaunch": wrote})
    assert "check the order in <<<...>>>" in found["HelloRecordCorrectness.EveryThreadWritesItsRecord/grid4096_block256"]
    assert ("record_threads(d, 1, 2048) wrote records, so it did not launch the shape it was given"
            in found["HelloRecordCheckedCorrectness.ThrowsOnABadLaunch"])


def test_lab_01_record_threads_that_does_not_check_its_launch() -> None:
    failure = _value_of('cudalab::launch_error_reported([&] { record_threads(d_records.data(), 1, kTooManyThreads); }, '
                        '"record_threads(d, 1, " + std::to_string(kTooManyThreads) + ")")', f"{HELLO}:176",
                        why=_pending("record_threads(d, 1, 2048)", thrown=False, pending="cudaErrorInvalidValue"))
    found = _annotate("01-hello", {"HelloRecordCheckedCorrectness.ThrowsOnABadLaunch": [failure]})
    assert "record_threads must check its launch" in found["HelloRecordCheckedCorrectness.ThrowsOnABadLaunch"]


def _fact(field: str, got: int, expr: str, want: int, note: str, line: int) -> str:
    return _expect_eq(f"f.{field}", got, expr, want, f"{HELLO}:{line}", note) + f"\nGoogle Test trace:\n{HELLO}:205: device 0"


def test_lab_01_query_device_with_the_clocks_swapped() -> None:
    """Mutant facts-clocks-swapped, on an H200 (SM clock 1980 MHz, memory clock 3201 MHz)."""
    failures = [
        _fact("sm_clock_khz", 3201000, "attribute(cudaDevAttrClockRate, device)", 1980000,
              "sm_clock_khz: cudaDeviceGetAttribute(&v, cudaDevAttrClockRate, device), in kHz", 214),
        _fact("memory_clock_khz", 1980000, "attribute(cudaDevAttrMemoryClockRate, device)", 3201000,
              "memory_clock_khz: cudaDevAttrMemoryClockRate, in kHz", 216),
    ]
    found = _annotate("01-hello", {"HelloDeviceCorrectness.FactsMatchTheDevice": failures})
    assert "cudaDevAttrClockRate is the SM clock" in found["HelloDeviceCorrectness.FactsMatchTheDevice"]


def test_lab_01_query_device_with_the_default_shared_memory() -> None:
    """Mutant facts-shared-not-optin: sharedMemPerBlock (48 KiB) where the opt-in maximum (227 KiB) belongs."""
    failure = _fact("shared_memory_per_block_optin", 49152,
                    "static_cast<std::size_t>(attribute(cudaDevAttrMaxSharedMemoryPerBlockOptin, device))", 232448,
                    "shared_memory_per_block_optin: sharedMemPerBlockOptin, not sharedMemPerBlock", 228)
    found = _annotate("01-hello", {"HelloDeviceCorrectness.FactsMatchTheDevice": [failure]})
    assert "the most a kernel may opt in to with cudaFuncSetAttribute" in found["HelloDeviceCorrectness.FactsMatchTheDevice"]


def test_lab_01_query_device_with_unchecked_calls() -> None:
    """Mutant facts-calls-unchecked: a device that does not exist gives zeros instead of an exception."""
    failures = [f"{HELLO}:239\nExpected: query_device(device) throws an exception of type cudalab::CudaError.\n"
                f"  Actual: it throws nothing.\nquery_device({d}) should throw: the devices are numbered 0 to 0"
                for d in (1, -1)]
    found = _annotate("01-hello", {"HelloDeviceCorrectness.NonexistentDeviceThrows": failures})
    assert "wrap every call in query_device in CUDA_CHECK" in found["HelloDeviceCorrectness.NonexistentDeviceThrows"]


def _bandwidth(h100: float, h200: float, a100: float) -> list[str]:
    """HelloBandwidthCorrectness.PeakFromClockAndBus' failures, for what peak_dram_bandwidth_gbps returned."""
    out = []
    for name, want, got, line, how in (("h100", 3352.32, h100, 246, "2619 MHz x 2 transfers x 5120 bits"),
                                       ("h200", 4814.304, h200, 248, "3201 MHz x 2 transfers x 6016 bits"),
                                       ("a100", 1555.2, a100, 253, "1215 MHz x 2 transfers x 5120 bits")):
        report = _report([want], [got], 0, rule="tolerance rel 1e-09 abs 1e-09", single=False)
        out.append(_value_of(f"cudalab::Near({want}, peak_dram_bandwidth_gbps({name}), {{1e-9, 1e-9}}, 0)",
                             f"{HELLO}:{line}", f"{how} / 8 = {want} GB/s", why=report))
    return out


def test_lab_01_bandwidth_hints_by_the_factor_they_are_off() -> None:
    """Mutants bandwidth-int-overflow (int arithmetic wraps: the values a run printed) and
    bandwidth-no-double-data-rate; and a bandwidth eight times too large (bits taken for bytes)."""
    test = "HelloBandwidthCorrectness.PeakFromClockAndBus"
    overflow = _annotate("01-hello", {test: _bandwidth(-2.04945818, -0.354338816, 0.421838848)})[test]
    half = _annotate("01-hello", {test: _bandwidth(1676.16, 2407.152, 777.6)})[test]
    bits = _annotate("01-hello", {test: _bandwidth(26818.56, 38514.432, 12441.6)})[test]
    assert "[0] expected 3352.32, actual -2.04945818\n" in _bandwidth(-2.04945818, 0, 0)[0]  # as a run printed
    assert "A negative bandwidth is an integer overflow" in overflow
    assert "both edges of its clock (double data rate)" in half and "integer overflow" not in half
    assert "8 is bits against bytes" in bits and "double data rate)" not in bits


def test_lab_01_fill_checked_that_throws() -> None:
    """Mutant bad-launch-throws: CUDA_CHECK_LAST() in fill_checked turns the expected error into an exception."""
    failure = _exception(_cuda_error("cudaErrorInvalidValue", "invalid argument", "kernel launch",
                                     "labs/01-hello/hello.cu:141"))
    found = _annotate("01-hello", {"HelloLaunchCorrectness.TooManyThreadsIsReported": [failure]})
    hint = found["HelloLaunchCorrectness.TooManyThreadsIsReported"]
    assert hint.startswith("fill_checked must never throw")
    assert "The launch configuration is invalid" not in hint  # the grader's hint would call the launch the bug


def test_lab_01_fill_checked_that_only_waits() -> None:
    """Mutant bad-launch-sync-only: cudaDeviceSynchronize reports cudaSuccess for a launch that never ran."""
    failures = [
        _expect_eq("err", 0, "expected", 1, f"{HELLO}:283", "a grid needs at least one block: the runtime reports "
                   "cudaErrorInvalidValue for 0 x 256, and fill_checked returned cudaSuccess"),
        _expect_eq("pending", 1, "cudaSuccess", 0, f"{HELLO}:285", "fill_checked left cudaErrorInvalidValue pending: "
                   "read it with cudaGetLastError(), which also clears it"),
    ]
    found = _annotate("01-hello", {"HelloLaunchCorrectness.ZeroBlocksIsReported": failures})
    assert "waiting for it reports cudaSuccess" in found["HelloLaunchCorrectness.ZeroBlocksIsReported"]


def test_lab_01_fill_checked_that_peeks() -> None:
    """Mutant bad-launch-peek-leaves-error: the right code is returned, and the error stays recorded; the
    inspect stage also finds no cudaGetLastError."""
    failure = _expect_eq("pending", 1, "cudaSuccess", 0, f"{HELLO}:285", "fill_checked left cudaErrorInvalidValue "
                         "pending: read it with cudaGetLastError(), which also clears it")
    found = _annotate("01-hello", {"HelloLaunchCorrectness.TooManyThreadsIsReported": [failure]})
    assert "cudaPeekAtLastError() returns the error but leaves it recorded" in found["HelloLaunchCorrectness.TooManyThreadsIsReported"]
    missing = _technique("01-hello", "bad-launch", "a launch error is read (and cleared) with cudaGetLastError. "
                         "Expected /cudaGetLastError/ in the functions your code calls (the task's points withheld)")
    assert missing.startswith("Only cudaGetLastError() both returns a launch error and clears it")


def test_lab_01_fill_checked_that_does_not_wait() -> None:
    """Mutant bad-launch-no-wait: the mapped output is read while the kernel still waits behind the busy one."""
    report = _report([1000 + i for i in range(1024)], [POISON_INT] * 1024, 1001)
    failure = _value_of("AllEqual(expected, seen, kSeed)", f"{HELLO}:352", "the output as the host saw it the "
                        "moment fill_checked returned, while the GPU was busy with an earlier kernel: fill_checked must "
                        "wait for its kernel (cudaDeviceSynchronize) before it returns", why=report)
    found = _annotate("01-hello", {"HelloLaunchCorrectness.GoodLaunchHasFinishedWhenItReturns": [failure]})
    hint = found["HelloLaunchCorrectness.GoodLaunchHasFinishedWhenItReturns"]
    assert hint.startswith("Every one of the 1,024 elements is wrong")
    assert "still queued behind the busy one" in hint


def _collatz(n: int, bits: int = 64, do_while: bool = False) -> int:
    """collatz_steps, with the running value in `bits` bits, or taking its first step before the test."""
    v, steps, mask = n, 0, (1 << bits) - 1
    while True:
        if v == 1 and not (do_while and steps == 0):
            return steps
        v = (v // 2 if v % 2 == 0 else 3 * v + 1) & mask
        steps += 1


KNOWN = [1, 2, 3, 6, 7, 27, 97, 871, 837799, 8400511, 4294967295]


def test_lab_01_collatz_with_a_32_bit_value() -> None:
    """Mutant collatz-32bit-value, on the host's known values and on the device (31 inputs, the last 11 the
    known ones)."""
    host = _value_of("AllEqual(kKnownSteps, actual, 0)", f"{HELLO}:398",
                     "inputs 1, 2, 3, 6, 7, 27, 97, 871, 837799, 8400511, 4294967295",
                     why=_report([_collatz(n) for n in KNOWN], [_collatz(n, 32) for n in KNOWN], 0))
    inputs = [9 + 7 * i for i in range(20)] + KNOWN
    device = _value_of("AllEqual(expected, d_steps.to_host(), seed)", f"{HELLO}:418", "for 31 inputs",
                       why=_report([_collatz(n) for n in inputs], [_collatz(n, 32) for n in inputs], 1032))
    found = _annotate("01-hello", {"HelloCollatzHostCorrectness.OnHost": [host],
                                   "HelloCollatzSizeCorrectness.OnDevice/31": [device]})
    assert "[9] expected 685, actual 312" in host  # what a run of the mutant printed
    assert all("keep it in std::uint64_t" in h for h in found.values())


def test_lab_01_collatz_that_steps_before_it_tests() -> None:
    """Mutant collatz-do-while: collatz_steps(1) == 3."""
    failure = _value_of("AllEqual(kKnownSteps, actual, 0)", f"{HELLO}:398",
                        "inputs 1, 2, 3, 6, 7, 27, 97, 871, 837799, 8400511, 4294967295",
                        why=_report([_collatz(n) for n in KNOWN], [_collatz(n, do_while=True) for n in KNOWN], 0))
    found = _annotate("01-hello", {"HelloCollatzHostCorrectness.OnHost": [failure]})
    assert "collatz_steps(1) is 0" in found["HelloCollatzHostCorrectness.OnHost"]


def test_lab_01_collatz_grid_that_rounds_down() -> None:
    """Mutant collatz-grid-rounds-down: count / kBlock blocks, 0 below 256 inputs; the partial last block
    is never computed."""
    refused = _exception(_cuda_error("cudaErrorInvalidValue", "invalid argument", "kernel launch",
                                     "labs/01-hello/hello.cu:185"))
    inputs = [9 + 7 * i for i in range(989)] + KNOWN
    want = [_collatz(n) for n in inputs]
    got = want[:768] + [POISON_INT] * (1000 - 768)  # 3 blocks of 256
    tail = _value_of("AllEqual(expected, d_steps.to_host(), seed)", f"{HELLO}:418", "for 1000 inputs",
                     why=_report(want, got, 2001))
    found = _annotate("01-hello", {"HelloCollatzSizeCorrectness.OnDevice/31": [refused],
                                   "HelloCollatzSizeCorrectness.OnDevice/1000": [tail]},
                      passed=["HelloCollatzSizeCorrectness.OnDevice/0", "HelloCollatzSizeCorrectness.OnDevice/256"])
    assert "a block count that rounds down is 0" in found["HelloCollatzSizeCorrectness.OnDevice/31"]
    last = found["HelloCollatzSizeCorrectness.OnDevice/1000"]
    assert last.startswith("Everything from index 768 to the end is wrong")
    assert "must launch enough blocks of kBlock threads to cover count" in last


def test_lab_01_hints_stay_in_their_task() -> None:
    """A guard one past the end in collatz_kernel gets the grader's guard hint, not one of the launch's; an
    exception from a launch in task 5 is not fill_checked's; the records' hint is not the step counts'."""
    guard = _value_of('d_steps.guards_intact("the step counts")', f"{HELLO}:419", why=(
        "out-of-bounds write: a kernel changed memory outside the step counts (257 element(s) of 4 bytes): 4 byte(s) "
        "past its end (the first at byte 0 past the end). Check the bounds guard of every thread that writes it."))
    inputs = [9 + 7 * i for i in range(10007)] + KNOWN  # OnDevice: the 32-bit bug, among random inputs first
    climbers = (5055967, 5768559, 2866687, 7566495, 2916331, 9428551, 9435727, 8490623, 9105407)  # past 2^32
    for k, n in enumerate(climbers):
        inputs[1108 + 1000 * k] = n
    random_first = _value_of("AllEqual(expected, d_steps.to_host(), seed)", f"{HELLO}:418", "for 10018 inputs",
                             why=_report([_collatz(n) for n in inputs], [_collatz(n, 32) for n in inputs], 1001))
    refused = _exception(_cuda_error("cudaErrorInvalidValue", "invalid argument", "kernel launch",
                                     "labs/01-hello/hello.cu:185"))
    found = _annotate("01-hello", {"HelloCollatzSizeCorrectness.OnDevice/257": [guard],
                                   "HelloCollatzSizeCorrectness.OnDevice/1": [refused],
                                   "HelloCollatzCorrectness.OnDevice": [random_first]})
    assert "the guard must be i < n, not i <= n" in found["HelloCollatzSizeCorrectness.OnDevice/257"]
    assert "fill_checked" not in found["HelloCollatzSizeCorrectness.OnDevice/1"]
    on_device = found["HelloCollatzCorrectness.OnDevice"]
    assert "685" not in random_first  # the known inputs are not among the first mismatches shown
    assert "Some step counts are wrong" in on_device and "record" not in on_device.lower()


# === Lab 02: indexing =====================================================================================

INDEXING = "labs/02-indexing/test_indexing.cu"
Dim = tuple[int, int, int]


def _global_ids(grid: Dim, block: Dim, block_number: Callable[[Dim, Dim], int],
                thread_number: Callable[[Dim, Dim], int], per_block: Callable[[Dim], int],
                n_kernel: int | None = None) -> list[str]:
    """IndexingGlobalIdCorrectness' failures for a global_id_kernel that numbers blocks and threads so
    (block_number(blockIdx, gridDim), thread_number(threadIdx, blockDim), per_block(blockDim)), told
    n_kernel threads (write_global_ids' n). record_thread is the given one."""
    n = math.prod(grid) * math.prod(block)
    nk = n if n_kernel is None else n_kernel
    writes, coords = [0] * (n + 1), [(POISON_UINT,) * 6] * n
    for bz, by, bx, tz, ty, tx in product(*(range(d) for d in (grid[2], grid[1], grid[0], block[2], block[1], block[0]))):
        gid = block_number((bx, by, bz), grid) * per_block(block) + thread_number((tx, ty, tz), block)
        if gid >= nk:
            writes[nk] += 1
            continue
        coords[gid] = (bx, by, bz, tx, ty, tz)
        writes[gid] += 1
    expected = [()] * n
    for bz, by, bx, tz, ty, tx in product(*(range(d) for d in (grid[2], grid[1], grid[0], block[2], block[1], block[0]))):
        b = bx + grid[0] * (by + grid[1] * bz)
        expected[b * math.prod(block) + tx + block[0] * (ty + block[1] * tz)] = (bx, by, bz, tx, ty, tz)
    shape = f"grid {'x'.join(map(str, grid))}, block {'x'.join(map(str, block))}"
    out = []
    report = _report([1] * n, writes[:n], 2002)
    if report:
        out.append(_value_of("AllEqual(std::vector<unsigned int>(n, 1u), writes_in, kSeed)", f"{INDEXING}:88",
                             f"how many times each id was written (must be exactly 1); {shape}", why=report))
    if writes[n]:
        out.append(_expect_eq("writes[n]", writes[n], "0u", 0, f"{INDEXING}:90",
                              f"{writes[n]} threads computed an id >= n = {n} (outside the output)"))
    report = _report([v for c in expected for v in c], [v for c in coords for v in c], 2002, cols=6)
    if report:
        out.append(_value_of("AllEqual(expected, actual, kSeed, Shape2D{n, 6})", f"{INDEXING}:91",
                             "row = id; columns = blockIdx.x, .y, .z, threadIdx.x, .y, .z of the thread that should own it",
                             why=report))
    assert out, "the bug should fail this launch"
    return out


def _block_number(b: Dim, g: Dim) -> int:
    return b[0] + g[0] * (b[1] + g[1] * b[2])


def _thread_number(t: Dim, d: Dim) -> int:
    return t[0] + d[0] * (t[1] + d[1] * t[2])


def _gid_test(grid: Dim, block: Dim) -> str:
    return (f"IndexingGlobalIdCorrectness.EveryIdWrittenOnceWithItsThread/grid{'x'.join(map(str, grid))}"
            f"_block{'x'.join(map(str, block))}")


def test_lab_02_ids_counted_in_32_bits() -> None:
    """Mutant gid-total-32bit: n = grid.x * ... * block.z in unsigned int wraps to 6,293,504."""
    failure = (f"{INDEXING}:298\nFailed\ngrid 2049x1025x2 of blocks 16x8x8 has n = 4301260800 threads, more than 2^32. "
               "The write counts are kept 67067904 ids to a counter (id i counts at counter i % 67067904); 67067904 of "
               "the 67067904 counters are wrong, the first: counter 0 was written 0 times, expected 64. Compute n (all "
               "the threads of the grid) and each id in unsigned long long: in 32 bits they wrap at 2^32.")
    found = _annotate("02-indexing", {"IndexingGlobalIdLargeCorrectness.MoreThan2To32Threads": [failure]})
    assert "make its first factor unsigned long long" in found["IndexingGlobalIdLargeCorrectness.MoreThan2To32Threads"]


def test_lab_02_block_number_scaled_by_the_block_sizes() -> None:
    """Mutant gid-block-number-uses-blockdim: blockIdx.y is scaled by blockDim.x, pushing ids past n."""
    grid, block = (3, 4, 1), (16, 8, 1)
    failures = _global_ids(grid, block, lambda b, g: b[0] + 16 * (b[1] + 8 * b[2]), _thread_number, math.prod)
    found = _annotate("02-indexing", {_gid_test(grid, block): failures})
    assert "Some threads computed an id past the last thread's" in found[_gid_test(grid, block)]


def test_lab_02_n_that_leaves_out_the_block_z() -> None:
    """Mutant gid-total-ignores-block-z: n without block.z, so on a 1D grid of 4 x 3 x 5 blocks the ids from
    84 on are counted at writes[84] (record_thread's counter of ids past the end) and never written."""
    grid, block = (7, 1, 1), (4, 3, 5)
    failures = _global_ids(grid, block, _block_number, _thread_number, math.prod, n_kernel=7 * 4 * 3)
    hint = _annotate("02-indexing", {_gid_test(grid, block): failures})[_gid_test(grid, block)]
    assert hint.startswith("Everything from index 84 to the end is wrong")
    assert "count the threads of all three dimensions, z included" in hint


@pytest.mark.parametrize("mutant, grid, block, block_number, thread_number", [
    ("gid-block-number-ignores-z", (2, 2, 2), (32, 1, 1), lambda b, g: b[0] + g[0] * b[1], _thread_number),
    ("gid-thread-row-times-blockdim-y", (3, 4, 1), (16, 8, 1), _block_number,
     lambda t, d: t[0] + t[1] * d[1] + t[2] * d[0] * d[1]),
    ("gid-block-size-ignores-z", (7, 1, 1), (4, 3, 5), _block_number, _thread_number),
])
def test_lab_02_ids_written_twice(mutant: str, grid: Dim, block: Dim, block_number: Callable,
                                  thread_number: Callable) -> None:
    per_block = (lambda d: d[0] * d[1]) if mutant == "gid-block-size-ignores-z" else math.prod
    failures = _global_ids(grid, block, block_number, thread_number, per_block)
    hint = _annotate("02-indexing", {_gid_test(grid, block): failures})[_gid_test(grid, block)]
    assert "Some ids were computed by two or more threads" in hint


def test_lab_02_ids_with_x_and_y_swapped() -> None:
    """x and y swapped in the thread number: every id written once, each by the wrong thread."""
    grid, block = (3, 4, 1), (16, 8, 1)
    failures = _global_ids(grid, block, _block_number, lambda t, d: t[1] + d[1] * t[0], math.prod)
    assert len(failures) == 1  # the write counts are right
    hint = _annotate("02-indexing", {_gid_test(grid, block): failures})[_gid_test(grid, block)]
    assert "The ids land at the wrong threads" in hint


def _unchecked(lab_name: str, test: str, what: str) -> str:
    failure = _value_of("cudalab::launch_error_reported(...)", f"{INDEXING}:120",
                        why=_pending(what, thrown=False, pending="cudaErrorInvalidValue"))
    return _annotate(lab_name, {test: [failure]})[test]


def test_lab_02_launchers_that_do_not_check_their_launch() -> None:
    ids = _unchecked("02-indexing", "IndexingGlobalIdLaunchCorrectness.ThrowsOnABadLaunch",
                     "write_global_ids(d_coords, d_writes, grid 3x1x1, block 64x32x1)")
    warps = _unchecked("02-indexing", "IndexingWarpLaunchCorrectness.ThrowsOnABadLaunch", "warp_lane_2d(d_out, 64x32x1)")
    stride = _unchecked("02-indexing", "IndexingGridStrideLaunchCorrectness.ThrowsOnABadLaunch",
                        "add_mirrored_grid_stride(d_in, d_out, 100, 40, grid 2x2x1, block 64x32x1)")
    assert ids.startswith("write_global_ids must check its launch")
    assert warps.startswith("warp_lane_2d must check its launch")
    assert stride.startswith("add_mirrored_grid_stride must check its launch")
    assert not any("byte count" in h for h in (ids, warps, stride))


def _warp_lane(bx: int, by: int, warp: Callable[[int, int], int], lane: Callable[[int, int], int]) -> list[str]:
    """IndexingWarpCorrectness' failures for a warp_lane_kernel that stores (warp(x, y), lane(x, y))."""
    out = []
    for what, fn, mod in (("warp", warp, lambda t: t // 32), ("lane", lane, lambda t: t % 32)):
        expected = [mod(y * bx + x) for y in range(by) for x in range(bx)]
        actual = [fn(x, y) for y in range(by) for x in range(bx)]
        report = _report(expected, actual, 2002, cols=bx)
        if report:
            out.append(_value_of(f"AllEqual(expected_{what}, {what}, kSeed, Shape2D{{b.y, b.x}})", f"{INDEXING}:330",
                                 f"{what} of each thread of a {bx} x {by} block, shown as [row threadIdx.y, col threadIdx.x]",
                                 why=report))
    return out


@pytest.mark.parametrize("mutant, warp, lane", [
    ("warp-is-row", lambda x, y: y, lambda x, y: x),
    ("warp-number-column-major", lambda x, y: (x * 5 + y) // 32, lambda x, y: (x * 5 + y) % 32),
])
def test_lab_02_warps_that_are_not_cut_from_the_thread_number(mutant: str, warp: Callable, lane: Callable) -> None:
    found = _annotate("02-indexing", {"IndexingWarpCorrectness.WarpAndLaneOfEveryThread/block24x5": _warp_lane(24, 5, warp, lane)})
    assert "Warps are cut from a thread's number within its block" in found["IndexingWarpCorrectness.WarpAndLaneOfEveryThread/block24x5"]


def test_lab_02_warp_lane_kernel_that_writes_nothing() -> None:
    failures = _warp_lane(7, 9, lambda x, y: POISON_INT, lambda x, y: POISON_INT)
    found = _annotate("02-indexing", {"IndexingWarpCorrectness.WarpAndLaneOfEveryThread/block7x9": failures})
    assert "Check that warp_lane_2d launches warp_lane_kernel as one block" in found["IndexingWarpCorrectness.WarpAndLaneOfEveryThread/block7x9"]


BLOCKS = [(1, 1, 1), (32, 1, 1), (33, 1, 1), (7, 9, 1), (24, 5, 1), (32, 32, 1), (8, 4, 2), (10, 10, 10), (3, 5, 7)]


def _warps_per_block(fn: Callable[[Dim], int]) -> list[str]:
    report = _report([-(-math.prod(b) // 32) for b in BLOCKS], [fn(b) for b in BLOCKS], 0)
    return [_value_of("AllEqual(expected, actual, 0)", f"{INDEXING}:380",
                      "blocks 1, 32, 33, 7x9, 24x5, 32x32, 8x4x2, 10x10x10, 3x5x7 threads", why=report)]


def test_lab_02_warps_per_block() -> None:
    """Mutants warps-per-block-rounds-down and warps-per-block-ignores-z (the messages their runs printed)."""
    test = "IndexingWarpCountCorrectness.WarpsPerBlock"
    down = _warps_per_block(lambda b: math.prod(b) // 32)
    no_z = _warps_per_block(lambda b: -(-(b[0] * b[1]) // 32))
    assert "  [6] expected 2, actual 1\n  [7] expected 32, actual 4\n  [8] expected 4, actual 1\n" in no_z[0]
    assert "round the division by 32 up" in _annotate("02-indexing", {test: down})[test]
    assert "Only the 3D blocks" in _annotate("02-indexing", {test: no_z})[test]


class _Thread:
    """One thread of a 2D launch: blockIdx, threadIdx, gridDim and blockDim along x and y."""

    def __init__(self, bx: int, by: int, tx: int, ty: int, grid: tuple[int, int], block: tuple[int, int]):
        self.bx, self.by, self.tx, self.ty = bx, by, tx, ty
        self.gx, self.gy = grid
        self.dx, self.dy = block

    @property
    def x(self) -> int:
        return self.bx * self.dx + self.tx

    @property
    def y(self) -> int:
        return self.by * self.dy + self.ty


def _add_mirrored(w: int, h: int, grid: tuple[int, int], block: tuple[int, int], kernel: Callable,
                  what: str = "add_mirrored") -> list[str]:
    """check_add_mirrored's failures for kernel(thread, w, h, load, add) run by every thread of grid x block:
    the image sits 3 elements into buffers of NaN (lead and tail), the input integers in [1, 1000], the
    output's old values in [10000, 20000]."""
    lead, n = 3, w * h
    src = [NAN] * lead + [float(1 + (i * 7919) % 1000) for i in range(n)] + [NAN] * (n + 4096)
    dst = [NAN] * lead + [float(10000 + (i * 104729) % 10000) for i in range(n)] + [NAN] * (n + 4096)
    base = dst[lead:lead + n]
    outside: set[int] = set()

    def load(i: int) -> float:
        return src[lead + i] if 0 <= lead + i < len(src) else 1e-30  # the guard zone: junk

    def add(i: int, v: float) -> None:
        if not 0 <= i < n:
            outside.add(i)
        if 0 <= lead + i < len(dst):
            dst[lead + i] += v

    for by, bx, ty, tx in product(range(grid[1]), range(grid[0]), range(block[1]), range(block[0])):
        kernel(_Thread(bx, by, tx, ty, grid, block), w, h, load, add)
    expected = [base[y * w + x] + src[lead + y * w + (w - 1 - x)] for y in range(h) for x in range(w)]
    out = []
    report = _report(expected, dst[lead:lead + n], 2002 + 7919 * w + h, cols=w)
    if report:
        out.append(_value_of("AllEqual(expected, image, seed, Shape2D{...})", f"{INDEXING}:439",
                             f"{what} on a {w} x {h} image (shown as [row y, col x]); an element still equal to its old "
                             "value was never written, one with twice the input added was written twice", why=report))
    after = sorted(i for i in outside if i >= n)
    if after:
        out.append(_expect_eq("after", len(after), "0u", 0, f"{INDEXING}:459",
                              f"{what} wrote {len(after)} elements past the end of the {w} x {h} image (the first at image "
                              f"end + {after[0] - n}): check the guard (x < width, y < height) and that x is the column"))
    assert out, "the bug should fail this image"
    return out


def _one_per_pixel(w: int, h: int) -> tuple[int, int]:
    return -(-w // 32), -(-h // 8)


def _mirror(guard: Callable[[int, int, int, int], bool], stride: Callable[[int, int], int] = lambda w, h: w,
            reach: int = 1) -> Callable:
    """add_mirrored_kernel: x and y from the grid, return when guard(x, y, w, h), then
    out[y * stride + x] += in[y * stride + (w - reach - x)]."""
    def kernel(t: _Thread, w: int, h: int, load: Callable, add: Callable) -> None:
        x, y = t.x, t.y
        if guard(x, y, w, h):
            return
        row = y * stride(w, h)
        add(row + x, load(row + (w - reach - x)))
    return kernel


def _guard(x: int, y: int, w: int, h: int) -> bool:
    return x >= w or y >= h


def _image_test(w: int, h: int) -> str:
    return f"IndexingImageCorrectness.AddMirrored/w{w}_h{h}"


def test_lab_02_image_grid_that_rounds_down() -> None:
    """Mutant image-grid-rounds-down: width / 32 x height / 8 blocks; 0 blocks for a 31 x 7 image."""
    refused = _exception(_cuda_error("cudaErrorInvalidValue", "invalid argument", "kernel launch",
                                     "labs/02-indexing/indexing.cu:101"))
    short = _add_mirrored(65, 9, (65 // 32, 9 // 8), (32, 8), _mirror(_guard))
    found = _annotate("02-indexing", {_image_test(31, 7): [refused], _image_test(65, 9): short})
    assert "add_mirrored launched a grid with 0 blocks along x or y" in found[_image_test(31, 7)]
    assert "Row 0 is right only up to a column: the grid stops short of the right edge" in found[_image_test(65, 9)]


def test_lab_02_image_grid_made_with_the_comma_operator() -> None:
    """Mutant image-grid-comma-operator: dim3 grid = (3, 8) is a 1D grid of 8 blocks."""
    failures = _add_mirrored(76, 62, (_one_per_pixel(76, 62)[1], 1), (32, 8), _mirror(_guard))
    hint = _annotate("02-indexing", {_image_test(76, 62): failures})[_image_test(76, 62)]
    assert hint.startswith("Everything from index 608 to the end is wrong")
    assert "dim3 grid = (a, b) is the comma operator" in hint


def test_lab_02_image_rows_found_with_the_height() -> None:
    """Mutant image-row-stride-height: row y starts at y * height, so on a wide image row 0 overlaps row 1
    from column height on; on a tall one row 1 starts late."""
    wide = _add_mirrored(76, 62, _one_per_pixel(76, 62), (32, 8), _mirror(_guard, stride=lambda w, h: h))
    tall = _add_mirrored(17, 33, _one_per_pixel(17, 33), (32, 8), _mirror(_guard, stride=lambda w, h: h))
    found = _annotate("02-indexing", {_image_test(76, 62): wide, _image_test(17, 33): tall})
    assert "Row 0 is right up to column height and wrong from there" in found[_image_test(76, 62)]
    assert "check that row y starts at y * width" in found[_image_test(17, 33)]


@pytest.mark.parametrize("mutant, guard", [
    ("image-guard-off-by-one", lambda x, y, w, h: x > w or y > h),
    ("image-guard-and", lambda x, y, w, h: x >= w and y >= h),
])
def test_lab_02_image_guard_that_lets_a_thread_through(mutant: str, guard: Callable) -> None:
    failures = _add_mirrored(76, 62, _one_per_pixel(76, 62), (32, 8), _mirror(guard))
    hint = _annotate("02-indexing", {_image_test(76, 62): failures})[_image_test(76, 62)]
    assert "Row 1 goes wrong at column 0, the element right after row 0" in hint


def test_lab_02_image_guard_that_lets_the_rows_below_through() -> None:
    """Mutant image-guard-and on a 500 x 1 image: every pixel right, the rows below the image written."""
    failures = _add_mirrored(500, 1, _one_per_pixel(500, 1), (32, 8), _mirror(lambda x, y, w, h: x >= w and y >= h))
    assert len(failures) == 1
    hint = _annotate("02-indexing", {_image_test(500, 1): failures})[_image_test(500, 1)]
    assert "Threads below the last row wrote past the image" in hint


def test_lab_02_image_mirror_one_column_off() -> None:
    """Mutant image-mirror-off-by-one: in(width - x, y) is read for out(x, y)."""
    failures = _add_mirrored(76, 62, _one_per_pixel(76, 62), (32, 8), _mirror(_guard, reach=0))
    hint = _annotate("02-indexing", {_image_test(76, 62): failures})[_image_test(76, 62)]
    assert hint.startswith("Every one of the 4,712 elements is wrong")
    assert "If they changed, check the mirrored read" in hint


def test_lab_02_image_kernel_on_a_1d_grid() -> None:
    hint = _technique("02-indexing", "image", "add_mirrored_kernel takes its row from a 2D grid (blockIdx.y), one thread "
                      "per pixel. Expected /%ctaid\\.y/ in the PTX of add_mirrored_kernel (the task's points withheld)")
    assert hint.startswith("The task asks for a 2D launch")


def _stride_kernel(start_x: Callable[[_Thread], int], step_x: Callable[[_Thread], int],
                   step_y: Callable[[_Thread], int], loop_y: bool = True) -> Callable:
    """add_mirrored_grid_stride_kernel: y outside from t.y by step_y (or one row), x inside from start_x by step_x."""
    def kernel(t: _Thread, w: int, h: int, load: Callable, add: Callable) -> None:
        for y in range(t.y, h, step_y(t)) if loop_y else ([t.y] if t.y < h else []):
            for x in range(start_x(t), w, step_x(t)):
                add(y * w + x, load(y * w + (w - 1 - x)))
    return kernel


def _across(t: _Thread) -> int:
    return t.gx * t.dx


def _down(t: _Thread) -> int:
    return t.gy * t.dy


def _stride_test(w: int, h: int, grid: tuple[int, int], block: tuple[int, int]) -> str:
    return (f"IndexingGridStrideCorrectness.AddMirroredOnASmallGrid/w{w}_h{h}_grid{grid[0]}x{grid[1]}"
            f"_block{block[0]}x{block[1]}")


def test_lab_02_grid_stride_without_a_loop_in_y() -> None:
    """Mutant gs-no-loop-in-y: one row per thread, on one 8 x 8 block for a 33 x 17 image."""
    failures = _add_mirrored(33, 17, (1, 1), (8, 8), _stride_kernel(lambda t: t.x, _across, _down, loop_y=False),
                             "add_mirrored_grid_stride")
    test = _stride_test(33, 17, (1, 1), (8, 8))
    hint = _annotate("02-indexing", {test: failures})[test]
    assert hint.startswith("Everything from index 264 to the end is wrong")
    assert "the y loop must keep stepping" in hint and "comma operator" not in hint


@pytest.mark.parametrize("mutant, kernel", [
    ("gs-stride-blockdim-only", _stride_kernel(lambda t: t.x, lambda t: t.dx, lambda t: t.dy)),
    ("gs-stride-y-uses-x", _stride_kernel(lambda t: t.x, _across, lambda t: t.gy * t.dx)),
    ("gs-x-starts-at-threadidx", _stride_kernel(lambda t: t.tx, _across, _down)),
])
def test_lab_02_grid_stride_that_visits_pixels_twice_or_never(mutant: str, kernel: Callable) -> None:
    failures = _add_mirrored(76, 62, (2, 3), (16, 8), kernel, "add_mirrored_grid_stride")
    test = _stride_test(76, 62, (2, 3), (16, 8))
    hint = _annotate("02-indexing", {test: failures})[test]
    assert "Some pixels were visited twice or never" in hint
    assert "guard" not in hint


def test_lab_02_image_hints_stay_in_their_task() -> None:
    """The grid-stride task's failure with the pattern of an image hint gets its own task's hint, and the
    write-count hints of task 1 do not fire on the warp counts of task 2."""
    off_by_one = _add_mirrored(76, 62, (3, 8), (32, 8), _mirror(lambda x, y, w, h: x > w or y > h),
                               "add_mirrored_grid_stride")
    test = _stride_test(76, 62, (3, 8), (32, 8))
    found = _annotate("02-indexing", {test: off_by_one,
                                      "IndexingWarpCountCorrectness.WarpsPerBlock": _warps_per_block(lambda b: 2)})
    assert "Row 1 goes wrong" not in found[test] and "Some pixels were visited twice or never" in found[test]
    assert "Some ids were computed" not in found["IndexingWarpCountCorrectness.WarpsPerBlock"]


# === Lab 03: vector-add ======================================================================================

VADD = "labs/03-vector-add/test_vector_add.cu"


def _inputs(n: int) -> tuple[list[float], list[float]]:
    """Inputs like make_inputs': a in [1, 2), b in [10, 20), sums exact in float."""
    return [1 + (i % 8) / 8 for i in range(n)], [10 + (i * 7 % 40) / 4 for i in range(n)]


def _c(n: int, written: Callable[[int], bool] | None = None, value: Callable[[int], float] | None = None,
       expr: str = "AllEqual(in.expected, out, kSeed + 2 * n)", line: int = 126, seed: int = 3003, note: str = "",
       fill: float = NAN) -> str:
    """A comparison of c = a + b, for an output whose element i was written (written(i)) with value(i), and
    otherwise holds `fill` (NaN: the poison of a device output; 0: a host vector)."""
    a, b = _inputs(n)
    want = [a[i] + b[i] for i in range(n)]
    got = [(value(i) if value else want[i]) if (written is None or written(i)) else fill for i in range(n)]
    report = _report(want, got, seed)
    assert report, "the bug should fail this size"
    return _value_of(expr, f"{VADD}:{line}", note, why=report)


def test_lab_03_host_flow_that_frees_before_copying_back() -> None:
    """Mutant host-free-before-copy-back."""
    failure = _exception(_cuda_error("cudaErrorInvalidValue", "invalid argument",
                                     "cudaMemcpy(c.data(), d_c, bytes, cudaMemcpyDeviceToHost)",
                                     "labs/03-vector-add/vector_add.cu:58"))
    found = _annotate("03-vector-add", {"VectorAddCorrectness.HostFlow/1000": [failure]})
    assert "free nothing before the result is back in c" in found["VectorAddCorrectness.HostFlow/1000"]


def test_lab_03_host_flow_that_counts_elements_as_bytes() -> None:
    """Mutant host-bytes-missing-sizeof: a quarter of each array travels; c keeps its zeros from there on
    (1025: the last float copied is cut after one byte); three elements are one incomplete float; the
    largest size faults."""
    host = "AllEqual(in.expected, vector_add_host(in.a, in.b), kSeed + n)"
    a, b = _inputs(1025)
    quarter = _c(1025, lambda i: i <= 256, lambda i: a[i] + b[i] if i < 256 else 1.79366203e-43, expr=host,
                 line=110, seed=3003 + 1025, fill=0.0)
    three = _c(3, lambda i: i == 0, lambda i: 5.9e-39, expr=host, line=110, seed=3006, fill=0.0)
    fault = _exception(_cuda_error("cudaErrorIllegalAddress", "an illegal memory access was encountered",
                                   "cudaMemcpy(c.data(), d_c, bytes, cudaMemcpyDeviceToHost)",
                                   "labs/03-vector-add/vector_add.cu:57"))
    found = _annotate("03-vector-add", {"VectorAddCorrectness.HostFlow/1025": [quarter],
                                        "VectorAddCorrectness.HostFlow/3": [three],
                                        "VectorAddCorrectness.HostFlow/16777217": [fault]})
    assert "1.79366203e-43" in quarter
    first = found["VectorAddCorrectness.HostFlow/1025"]
    assert first.startswith("Everything from index 256 on is wrong")
    assert "Part of the data never made the trip" in first and "carries from one tile" not in first
    assert "Follow the data" in found["VectorAddCorrectness.HostFlow/3"]
    assert "an allocation of n bytes holds only a quarter" in found["VectorAddCorrectness.HostFlow/16777217"]


def test_lab_03_host_flow_that_copies_a_twice() -> None:
    """Mutant host-copies-a-twice: c = a + a."""
    a, _ = _inputs(1000)
    failure = _c(1000, value=lambda i: a[i] + a[i], expr="AllEqual(in.expected, vector_add_host(in.a, in.b), kSeed + n)",
                 line=110, seed=4003)
    hint = _annotate("03-vector-add", {"VectorAddCorrectness.HostFlow/1000": [failure]})["VectorAddCorrectness.HostFlow/1000"]
    assert "a and b are each copied host to device from their own array" in hint


def test_lab_03_host_flow_that_leaks_its_output() -> None:
    """Mutant host-leaks-output-buffer: 24 calls of 2^22 floats keep 24 x 16 MiB."""
    failure = _value_of("kept.empty()", f"{VADD}:124", "24 more calls of vector_add_host kept 393216 KiB of device "
                        "memory in 24 allocation(s) (cudaFree for every cudaMalloc)")
    found = _annotate("03-vector-add", {"VectorAddMemoryCorrectness.HostFlowFreesEverything": [failure]})
    assert "the output d_c included" in found["VectorAddMemoryCorrectness.HostFlowFreesEverything"]


def test_lab_03_vector_add_grid_that_rounds_down() -> None:
    """Mutant vadd-grid-rounds-down: n / kBlock blocks, 0 below 256."""
    refused = _exception(_cuda_error("cudaErrorInvalidValue", "invalid argument", "kernel launch",
                                     "labs/03-vector-add/vector_add.cu:34"))
    short = _c(1000, lambda i: i < 768, seed=5003)
    found = _annotate("03-vector-add", {"VectorAddCorrectness.OneThreadPerElement/255": [refused],
                                        "VectorAddCorrectness.OneThreadPerElement/1000": [short]})
    assert "n / kBlock rounds down to 0 blocks" in found["VectorAddCorrectness.OneThreadPerElement/255"]
    last = found["VectorAddCorrectness.OneThreadPerElement/1000"]
    assert last.startswith("Only the last 232 elements are wrong: the partial block past the last full block of 256")
    assert "The elements of the last, partly filled block were never written" in last


def test_lab_03_vector_add_index_that_grows_with_the_grid() -> None:
    """Mutant vadd-index-uses-griddim: i = blockIdx.x * gridDim.x + threadIdx.x."""
    def by_grid(n: int) -> Callable[[int], bool]:
        blocks = -(-n // 256)
        reached = {b * blocks + t for b in range(blocks) for t in range(256)}
        return lambda i: i in reached
    found = _annotate("03-vector-add", {"VectorAddCorrectness.OneThreadPerElement/1000": [_c(1000, by_grid(1000), seed=5003)],
                                        "VectorAddCorrectness.OneThreadPerElement/100003": [_c(100003, by_grid(100003), seed=203009)]})
    overlap = found["VectorAddCorrectness.OneThreadPerElement/1000"]
    gaps = found["VectorAddCorrectness.OneThreadPerElement/100003"]
    assert overlap.startswith("Everything from index 268 to the end is wrong") and "The blocks cover overlapping ranges and stop short of n" in overlap
    assert gaps.startswith("The first wrong element starts a tile: index 256 is the first element of block 1")
    assert "The blocks leave gaps between them" in gaps


def _all_scaled(bad: int, seed: int, first: int, expr: str, line: int, note: str = "") -> str:
    """all_scaled's failure on 2^31 + 4003 elements."""
    why = (f"{bad} of 2147487651 elements are wrong (seed {seed}), the first at index {first}"
           + (" (past 2^31: an int index?)" if first >= 2**31 else ""))
    return _value_of(expr, f"{VADD}:{line}", note, why=why)


def test_lab_03_int_indices_past_2_to_31() -> None:
    """Mutants gs-int-index and soa-int-index, and the challenge with an int index: nothing past 2^31 is written."""
    found = _annotate("03-vector-add", {
        "VectorAddHugeCorrectness.GridStrideBeyond2To31":
            [_all_scaled(4003, 3034, 2**31, "all_scaled(d_c.data(), kHugeN, kSeed + 31, 1.0f, 2.0f, 2.0f)", 210,
                         "a grid of 1056 x 256 threads")],
        "VectorAddHugeCorrectness.SoaBeyond2To31":
            [_all_scaled(4003, 3044, 2**31, "all_scaled(d_x.data(), kHugeN, kSeed + 41, 1.0f, 100.0f, 2.5f)", 282)],
        "VectorAddHugeCorrectness.FastBeyond2To31":
            [_all_scaled(4003, 3040, 2**31, "all_scaled(d_c.data(), kHugeN, kSeed + 37, 1.0f, 2.0f, 2.0f)", 225)],
    })
    assert "hold the index and the stride in std::size_t" in found["VectorAddHugeCorrectness.GridStrideBeyond2To31"]
    assert "compute scale_x_soa_kernel's index in std::size_t" in found["VectorAddHugeCorrectness.SoaBeyond2To31"]
    assert "keep every count and index in std::size_t" in found["VectorAddHugeCorrectness.FastBeyond2To31"]


def test_lab_03_grid_stride_that_does_not_check_its_launch() -> None:
    failure = _value_of("cudalab::launch_error_reported(...)", f"{VADD}:193", why=_pending(
        "vector_add_grid_stride(..., 4 blocks, 2048 threads per block)", thrown=False, pending="cudaErrorInvalidValue"))
    found = _annotate("03-vector-add", {"VectorAddGridStrideLaunchCorrectness.ReportsBadLaunch": [failure]})
    assert found["VectorAddGridStrideLaunchCorrectness.ReportsBadLaunch"].startswith("vector_add_grid_stride must check its launch")


@pytest.mark.parametrize("mutant", ["gs-no-loop", "gs-start-at-threadidx"])
def test_lab_03_grid_stride_that_leaves_elements_unwritten(mutant: str) -> None:
    """On 2 blocks of 64 threads for 1000 elements: one element per thread (no loop), or every block starting
    where block 0 does."""
    if mutant == "gs-no-loop":
        written = lambda i: i < 128  # noqa: E731
    else:
        written = lambda i: i % 128 < 64  # noqa: E731
    failure = _c(1000, written, expr="AllEqual(in.expected, out, kSeed + c.n + c.blocks)", line=160, seed=4005,
                 note="grid of 2 blocks x 64 threads, n = 1000")
    test = "VectorAddGridStrideCorrectness.CoversEveryElement/n1000_grid2_block64"
    hint = _annotate("03-vector-add", {test: [failure]})[test]
    assert "Each thread must loop: start at its own global index" in hint
    assert "carries from one tile" not in hint and "__syncthreads" not in hint


def test_lab_03_aos_kernel_that_scales_floats() -> None:
    """Mutant aos-indexes-floats: the i-th float of the array is scaled instead of particle i's x."""
    n = 31
    fields = [float(1 + (i * 37) % 99) for i in range(8 * n)]
    want = [v * 2.5 if i % 8 == 0 else v for i, v in enumerate(fields)]
    got = [v * 2.5 if i < n else v for i, v in enumerate(fields)]
    failure = _value_of("AllEqual(fields, actual, kSeed + 4 * n)", f"{VADD}:251",
                        "(8 floats per particle: x, y, z, vx, vy, vz, mass, charge)", why=_report(want, got, 3127))
    hint = _annotate("03-vector-add", {"VectorAddAosCorrectness.ScalesOnlyX/31": [failure]})["VectorAddAosCorrectness.ScalesOnlyX/31"]
    assert "Fields other than x changed" in hint


def test_lab_03_pinned_memory() -> None:
    """Mutants pinned-bytes-not-floats and pinned-free-with-cudafree (checked, it throws; unchecked, the
    memory stays pinned and the error pending)."""
    bytes_ = _expect_eq("memory_type(h + n / 4)", 0, "cudaMemoryTypeHost", 1, f"{VADD}:310", "float 262144 of 1048576 "
                        "is not in the pinned allocation: allocate n * sizeof(float) bytes")
    thrown = _exception(_cuda_error("cudaErrorInvalidValue", "invalid argument", "cudaFree(h_pinned)",
                                    "labs/03-vector-add/vector_add.cu:143"))
    kept = [f"{VADD}:326\nExpected: (memory_type(h)) != (cudaMemoryTypeHost), actual: 1 vs 1\n"
            "the memory is still pinned after free_pinned: release it with cudaFreeHost",
            _expect_eq("cudaGetLastError()", 1, "cudaSuccess", 0, f"{VADD}:328")]
    found = _annotate("03-vector-add", {"VectorAddPinnedCorrectness.AllocationIsPageLocked": [bytes_],
                                        "VectorAddPinnedCorrectness.FreeReleasesTheAllocation": [thrown]})
    assert "cudaMallocHost counts bytes, like malloc" in found["VectorAddPinnedCorrectness.AllocationIsPageLocked"]
    assert "cudaFree releases device memory only" in found["VectorAddPinnedCorrectness.FreeReleasesTheAllocation"]
    unchecked = _annotate("03-vector-add", {"VectorAddPinnedCorrectness.FreeReleasesTheAllocation": kept})
    assert "free_pinned must give the pages back" in unchecked["VectorAddPinnedCorrectness.FreeReleasesTheAllocation"]


def test_lab_03_fast_tail() -> None:
    """Mutants fast-drops-tail (nothing for n < 4, the last n % 4 never) and fast-tail-offset-in-float4s
    (the tail written at n / 4, where the float4s already wrote the same sums)."""
    tiny = _c(3, lambda i: False, expr="AllEqual(in.expected, out, kSeed + 6 * n)", line=352, seed=3021)
    dropped = _c(5003, lambda i: i < 5000, expr="AllEqual(in.expected, out, kSeed + 6 * n)", line=352, seed=33021)
    found = _annotate("03-vector-add", {"VectorAddCorrectness.Fast/3": [tiny], "VectorAddCorrectness.Fast/5003": [dropped]})
    assert "With n < 4 there is no whole float4" in found["VectorAddCorrectness.Fast/3"]
    tail = found["VectorAddCorrectness.Fast/5003"]
    assert tail.startswith("Only the last 3 elements are wrong")
    assert "an offset counted in floats, not float4s" in tail and "kBlock" not in tail


def test_lab_03_fast_grid_that_rounds_down() -> None:
    """Mutant fast-grid-rounds-down: 1250 float4s on one block that covers 1024 of them, the tail right."""
    failure = _c(5003, lambda i: i < 4096 or i >= 5000, expr="AllEqual(in.expected, out, kSeed + 6 * n)", line=352,
                 seed=33021)
    hint = _annotate("03-vector-add", {"VectorAddCorrectness.Fast/5003": [failure]})["VectorAddCorrectness.Fast/5003"]
    assert hint.startswith("The first wrong element starts a tile: index 4,096 is the first element of block 16")
    assert "round the number of blocks up" in hint


def test_lab_03_hints_stay_in_their_task() -> None:
    """A partial last block left unwritten is the launch's fault in task 2, and neither task 2's nor the
    float4 tail's in the challenge (only the last n % 4 are); a guard one past the end keeps the grader's
    hint; the host flow's hint is not the kernel's."""
    block = _c(1000, lambda i: i < 768, seed=5003)
    guard = _value_of("d_c.guards_intact(what)", f"{VADD}:61", why=(
        "out-of-bounds write: a kernel changed memory outside c (vector_add) (1000 element(s) of 4 bytes): 4 byte(s) "
        "past its end (the first at byte 0 past the end). Check the bounds guard of every thread that writes it."))
    found = _annotate("03-vector-add", {"VectorAddCorrectness.OneThreadPerElement/1000": [block, guard],
                                        "VectorAddCorrectness.Fast/1000": [block],
                                        "VectorAddCorrectness.SoaScales/1000": [guard],
                                        "VectorAddCorrectness.OneThreadPerElement/257": [_c(257, lambda i: i < 128, seed=3517)]})
    assert "float4" not in found["VectorAddCorrectness.OneThreadPerElement/1000"]
    fast = found["VectorAddCorrectness.Fast/1000"]
    assert "The last n % 4 elements were never added" not in fast and "kBlock" not in fast
    assert "Check that the grid covers every float4" in fast
    assert "the guard must be i < n, not i <= n" in found["VectorAddCorrectness.SoaScales/1000"]
    short = found["VectorAddCorrectness.OneThreadPerElement/257"]
    assert "never made the trip" not in short and "The grid needs a thread for every element" in short


def test_lab_02_grid_stride_on_a_grid_of_its_own() -> None:
    """Mutant gs-launches-own-grid: right pixels, but on a rounded-up grid instead of the one given; the
    contract test (CUPTI's kernel records) fails and the hint names the broken contract, not the loop."""
    failure = ("labs/02-indexing/test_indexing.cu:553\nValue of: same_grid && same_block\n"
               "  Actual: false\nExpected: true\na kernel ran on grid 32x125x1 (block 32x8x1), not on the given "
               "grid 1x1x1 (block 32x8x1): add_mirrored_grid_stride launched add_mirrored_grid_stride_kernel for a "
               "1000 x 999 image; launch on exactly the grid and block you are given, and let the loop cover the rest")
    test = "IndexingGridContractCorrectness.LaunchesOnTheGivenGrid/w1000_h999_grid1x1"
    hint = _annotate("02-indexing", {test: [failure]},
                     passed=[_stride_test(1000, 999, (1, 1), (32, 8))])[test]
    assert hint.startswith("add_mirrored_grid_stride chose its own grid")
    assert "visited twice" not in hint
    # The report's one-line summary of the failure (its first 100 characters) shows both shapes.
    from grader.report._format import clean_text, first_line
    from grader.report.failures import said_by_the_test

    summary = first_line(said_by_the_test(clean_text(clean_failure(failure))), 100)
    assert "ran on grid 32x125x1 (block 32x8x1)" in summary and "the given grid 1x1x1 (block 32x8x1)" in summary
