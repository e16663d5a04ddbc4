"""Lab 03's own hints (labs/03-vector-add/hints.toml): each fires on the failure of the bug it was written for
(solutions/03-vector-add/mutants/), and not outside its task or pattern. Where the message depends on what the
buggy code computes, a few lines of Python compute it on the test's own sizes."""

from __future__ import annotations

from collections.abc import Callable

import pytest


from grader.tests.lab_hints_01_03 import (
    _annotate, _cuda_error, _exception, _expect_eq, NAN, _pending, _report, _technique, _value_of)


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
    assert "Exactly the first quarter of c is right" in first and "carries from one tile" not in first
    assert "Follow the data" in found["VectorAddCorrectness.HostFlow/3"]
    assert "an allocation of n bytes holds only a quarter" in found["VectorAddCorrectness.HostFlow/16777217"]


def test_lab_03_grid_bugs_seen_through_the_host_flow() -> None:
    """The H200 gate: the host flow's test runs first and calls vector_add, so a grid bug of task 2 shows
    there first, with c read back from the student's own (unpoisoned) allocation: 0 where nothing wrote.
    vadd-grid-rounds-down loses the last partial block; vadd-index-uses-griddim (block b at b * gridDim.x)
    leaves zeros from 268 on at n = 1000 (not 250, a quarter: not a byte count)."""
    host = "AllEqual(in.expected, vector_add_host(in.a, in.b), kSeed + n)"
    rounds = _c(257, lambda i: i < 256, expr=host, line=110, seed=3260, fill=0.0)
    covered = {b * 4 + t for b in range(4) for t in range(256) if b * 4 + t < 1000}
    griddim = _c(1000, lambda i: i in covered, expr=host, line=110, seed=4003, fill=0.0)
    found = _annotate("03-vector-add", {"VectorAddCorrectness.HostFlow/257": [rounds],
                                        "VectorAddCorrectness.HostFlow/1000": [griddim]})
    assert "vector_add's grid stops at the last full block" in found["VectorAddCorrectness.HostFlow/257"]
    g = found["VectorAddCorrectness.HostFlow/1000"]
    assert "blockIdx.x * blockDim.x + threadIdx.x (blockDim, not gridDim)" in g and "n * sizeof(float) bytes" not in g


def test_lab_03_pinned_memory_freed_with_cudafree() -> None:
    """pinned-free-with-cudafree: the technique check finds no cudaFreeHost (no test fails before it)."""
    hint = _technique("03-vector-add", "pinned", "pinned memory is released with cudaFreeHost (or cudaHostUnregister, "
                      "then free). Expected /cudaFreeHost|cudaHostUnregister/ in the functions your code calls")
    assert "cudaFree is for device memory" in hint


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


def test_lab_03_float4_loads_past_the_end_under_memcheck() -> None:
    """fast-loads-unguarded on the H200: memcheck's first finding is a 16-byte read past the arrays (its log
    names no allocation for it); a 4-byte access keeps the general advice."""
    from grader.tests.gtest_failures import memcheck_log, sanitized

    kernel = "vector_add_fast_kernel(const float4 *, const float4 *, float4 *, unsigned long)"
    detail = ("by thread (64,0,0) in block (0,0,0)", "Address 0x7f2440808000 is out of bounds")
    log = memcheck_log("Invalid __global__ read of size 16 bytes", kernel, "03-vector-add/vector_add.cu:166",
                       detail=detail)
    t = sanitized("03-vector-add", "memcheck", log)
    assert t.task == "fast" and "only n / 4 whole float4s fit in n floats" in t.hint
    scalar = sanitized("03-vector-add", "memcheck", log.replace("size 16 bytes", "size 4 bytes"))
    assert "only n / 4 whole float4s" not in scalar.hint
