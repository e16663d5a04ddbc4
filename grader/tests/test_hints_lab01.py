"""Lab 01's own hints (labs/01-hello/hints.toml): each fires on the failure of the bug it was written for
(solutions/01-hello/mutants/), and not outside its task or pattern. Where the message depends on what the
buggy code computes, a few lines of Python compute it on the test's own sizes."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from itertools import product

import pytest

from grader.score import hints
from grader.tests.lab_hints_01_03 import (
    _annotate, _cuda_error, _exception, _expect_eq, LABS, _pending, POISON_INT, _report, _technique, _value_of)


def test_every_hint_of_labs_01_to_03_is_keyed_on_a_public_task() -> None:
    for name in ("01-hello", "02-indexing", "03-vector-add"):
        lab = LABS[name]
        public = {t.id for t in lab.tasks if not t.hidden}
        own = hints.load_hints(lab.path / "hints.toml")
        assert len(own) >= 8, name
        assert all(h.tasks and set(h.tasks) <= public for h in own), name


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


def _bad_launch_hint(then: str) -> str:
    """The hint of say_hello(1, 2048) returning normally, with what the test found next."""
    returned = _value_of("thrown.empty()", f"{HELLO}:125", "say_hello(1, 2048) is a launch the runtime refuses, and "
                         "it returned normally: check the launch with CUDA_CHECK_LAST()", actual="true")
    name = "HelloCheckedCorrectness.SayHelloThrowsOnABadLaunch"
    return _annotate("01-hello", {name: [returned, then]})[name]


def test_lab_01_say_hello_with_the_launch_arguments_swapped_runs_the_bad_launch() -> None:
    """Mutant hello-swapped-launch-config: say_hello(1, 2048) launches 2048 blocks of 1 thread, which runs."""
    hint = _bad_launch_hint(_expect_eq('out.find("hello from")', 0, "std::string::npos", 18446744073709551615,
                                       f"{HELLO}:129", "a launch that cannot run printed lines"))
    assert "say_hello(1, 2048) ran and printed, so it did not launch the shape it was given" in hint


def test_lab_01_say_hello_that_does_not_check_its_launch() -> None:
    hint = _bad_launch_hint(_expect_eq("pending", 1, "cudaSuccess", 0, f"{HELLO}:127",
                                       "say_hello left cudaErrorInvalidValue pending: a launch error must be read "
                                       "with cudaGetLastError()"))
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
