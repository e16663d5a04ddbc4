"""The hints of lab 05's matmul tasks and challenge (the transposes: test_hints_lab05.py), each fired on
the failure its bug really produces (solutions/05-tiled-matmul/mutants/), simulated on the test's own
poisoned matrices as test_hints_lab05.py describes; and the compute-sanitizer findings the H200 gate's
reports showed first."""

from __future__ import annotations

import random
import re
from collections.abc import Callable

import pytest

from grader.model.results import Category, Status
from grader.model.results import TestResult as TResult
from grader.tests.gtest_failures import (
    SCRIBBLE, ceil_div, compare, cuda_error, f32, grade, memcheck_log, one, race_log, sanitized, synccheck_log,
    value_of)
from grader.tests.test_hints_lab05 import (
    GUARDED_AT, M_SEED, MATMUL, MATMUL_AT, MATMUL_ARGS, TRANSPOSE_ARGS, Output, guard_failure, junk_values,
    transposes)


# --- matmul ---

def matmul_problem(m: int, n: int, k: int,
                   integers: bool = False) -> tuple[list[float], list[float], list[float], int]:
    """A, B and C = A * B in float64, as problem() makes them (values in [0.25, 1.25), or small integers)."""
    seed = M_SEED + 1000003 * m + 1009 * n + k + (17 if integers else 0)
    rng = random.Random(seed)
    if integers:
        def draw() -> float:
            return float(rng.choice([-4, -3, -2, -1, 1, 2, 3, 4]))
    else:
        def draw() -> float:
            return f32(rng.uniform(0.25, 1.25))
    a = [draw() for _ in range(m * k)]
    b = [draw() for _ in range(k * n)]
    c = [sum(a[r * k + i] * b[i * n + col] for i in range(k)) for r in range(m) for col in range(n)]
    return a, b, c, seed


Kernel = Callable[[list[float], list[float], Callable[[], float], Output], None]


def matmul_failures(test: str, m: int, n: int, k: int, run: Kernel) -> list[str]:
    """MatmulCorrectness.<test>/m_n_k: run(a, b, junk, c) fills C; then guards_intact and AllNear."""
    a, b, expected, seed = matmul_problem(m, n, k)
    c = Output(m * n)
    run(a, b, junk_values(seed), c)
    failures = c.guards("C")
    body = compare(expected, c.values, seed, "tolerance rel 3e-05 abs 0", cols=n)
    if body:
        expr = "AllNear(p.expected, run_matmul(matmul, p, d), kMatmulTol, p.seed, Shape2D{...})"
        failures.append(value_of(f"{MATMUL_AT}:279", expr, body,
                                 f"C is {m} x {n} with k = {k} (A is m x k, B is k x n, all row-major)"))
    return failures


def matmul_case(test: str, m: int, n: int, k: int, run: Kernel) -> tuple[str, list[str]]:
    return f"MatmulCorrectness.{test}/m{m}_n{n}_k{k}", matmul_failures(test, m, n, k, run)


def naive(m: int, n: int, k: int, grid_swapped: bool = False, a_stride: str = "k", b_stride: str = "n",
          k_loop_le: bool = False):
    def run(a: list[float], b: list[float], junk: Callable[[], float], c: Output) -> None:
        def at(v: list[float], i: int) -> float:
            return v[i] if i < len(v) else junk()
        gx, gy = (ceil_div(m, 32), ceil_div(n, 8)) if grid_swapped else (ceil_div(n, 32), ceil_div(m, 8))
        lda, ldb = (n if a_stride == "n" else k), (k if b_stride == "k" else n)
        for row in range(min(m, 8 * gy)):
            for col in range(min(n, 32 * gx)):
                c.store(row * n + col, f32(sum(at(a, row * lda + i) * at(b, i * ldb + col)
                                               for i in range(k + 1 if k_loop_le else k))))
    return run


def tiled(m: int, n: int, k: int, zero_fill: bool = True, k_tail: bool = True, b_transposed: bool = False,
          early_return: bool = False, tile: float = SCRIBBLE):
    """matmul_tiled_kernel per block: 32 x 32 tiles of A and B in shared memory, phase by phase; a slot no
    thread stores in a phase keeps what it held (the scribble, or the previous phase's value)."""
    def run(a: list[float], b: list[float], junk: Callable[[], float], c: Output) -> None:
        phases = ceil_div(k, 32) if k_tail else k // 32
        for by in range(ceil_div(m, 32)):
            for bx in range(ceil_div(n, 32)):
                a_s = [[tile] * 32 for _ in range(32)]
                b_s = [[tile] * 32 for _ in range(32)]
                acc = [[0.0] * 32 for _ in range(32)]
                for p in range(phases):
                    k0 = 32 * p
                    for ty in range(32):
                        for tx in range(32):
                            row, col = by * 32 + ty, bx * 32 + tx
                            if early_return and (row >= m or col >= n):
                                continue
                            if row < m and k0 + tx < k:
                                a_s[ty][tx] = a[row * k + k0 + tx]
                            elif zero_fill:
                                a_s[ty][tx] = 0.0
                            if k0 + ty < k and col < n:
                                b_s[ty][tx] = b[(k0 + ty) * n + col]
                            elif zero_fill:
                                b_s[ty][tx] = 0.0
                    for ty in range(32):
                        for tx in range(32):
                            b_col = b_s[tx] if b_transposed else [b_s[i][tx] for i in range(32)]
                            acc[ty][tx] += sum(a_s[ty][i] * b_col[i] for i in range(32))
                for ty in range(32):
                    for tx in range(32):
                        if by * 32 + ty < m and bx * 32 + tx < n:
                            c.store((by * 32 + ty) * n + bx * 32 + tx, f32(acc[ty][tx]))
    return run


def test_05_simulated_matmuls_are_right_without_their_bugs() -> None:
    for m, n, k in ((17, 33, 65), (1, 1, 1), (33, 31, 32)):
        assert matmul_failures("Naive", m, n, k, naive(m, n, k)) == []
        assert matmul_failures("Tiled", m, n, k, tiled(m, n, k)) == []


def test_05_naive_matmul_grid_sized_the_other_way_round() -> None:
    """mnaive-grid-swapped: x from m, y from n."""
    graded = grade(MATMUL, [matmul_case("Naive", m, n, k, naive(m, n, k, grid_swapped=True))
                            for m, n, k in ((1, 1, 1), (17, 33, 65), (33, 31, 32))])
    assert graded["MatmulCorrectness.Naive/m1_n1_k1"].status is Status.PASSED
    for name in ("MatmulCorrectness.Naive/m17_n33_k65", "MatmulCorrectness.Naive/m33_n31_k32"):
        t = graded[name]
        assert "actual -nan" in t.message and t.task == "matmul-naive"
        assert "Sized from m in x and n in y, it covers C only when m == n" in t.hint


@pytest.mark.parametrize("m, n, k, bug", [(17, 33, 65, {"k_loop_le": True}), (33, 31, 32, {"b_stride": "k"})])
def test_05_naive_matmul_reads_past_a_or_b(m: int, n: int, k: int, bug: dict) -> None:
    """mnaive-k-loop-le, mnaive-b-stride-k: products with the guard zones' junk."""
    t = one(MATMUL, *matmul_case("Naive", m, n, k, naive(m, n, k, **bug)))
    assert "Elements of C of 1e10 and more are products with junk" in t.hint


def test_05_naive_matmul_every_element_off() -> None:
    """B stepped with rows of k floats where n = k + 1 stays inside B: every element wrong, no junk."""
    m, n, k = 40, 33, 32
    t = one(MATMUL, *matmul_case("Naive", m, n, k, naive(m, n, k, b_stride="k")))
    assert f"{m * n} of {m * n} elements differ" in t.message
    assert "Every element of C is wrong, so look at what they all share, the sum" in t.hint


def test_05_naive_matmul_rows_of_a_with_the_wrong_stride() -> None:
    """mnaive-a-stride-n: row 0 of A starts at 0 with any stride."""
    t = one(MATMUL, *matmul_case("Naive", 17, 33, 65, naive(17, 33, 65, a_stride="n")))
    assert "[row 1, col 0]" in t.message
    assert "Row 0 of C is right and the rows below it are not: a row stride is off" in t.hint


def test_05_tiled_matmul_grid_that_misses_tiles() -> None:
    """A tiled grid sized like the naive one's swapped: tiles of C nobody computes."""
    def run(a, b, junk, c):
        full = Output(17 * 65)
        tiled(17, 65, 33)(a, b, junk, full)
        for i, v in enumerate(full.values):
            if i % 65 < 32:
                c.store(i, v)
    t = one(MATMUL, "MatmulCorrectness.Tiled/m17_n65_k33", matmul_failures("Tiled", 17, 65, 33, run))
    assert "one block per 32 x 32 tile of C, ceil_div(n, kMatTile) blocks in x" in t.hint


@pytest.mark.parametrize("bug", [{"zero_fill": False}, {"early_return": True}])
def test_05_tiled_matmul_multiplies_unstored_slots(bug: dict) -> None:
    """mtiled-no-zero-fill, mtiled-early-return: k = 7 is one partial phase, so the slots past k (or those of
    the threads that returned) still hold the scribble."""
    t = one(MATMUL, *matmul_case("Tiled", 40, 33, 7, tiled(40, 33, 7, **bug)))
    assert re.search(r"actual -?\d\.\d+e\+\d\d", t.message) and t.task == "matmul-tiled"
    assert "0.0f where its global index lies outside A or B, and no thread returns early" in t.hint


@pytest.mark.parametrize("bug", [{"k_tail": False}, {"b_transposed": True}, {"zero_fill": False}])
def test_05_tiled_matmul_phase_loop(bug: dict) -> None:
    """mtiled-drops-k-tail, mtiled-b-tile-transposed; and no zero-fill where the last phase multiplies the
    previous phase's stale tiles: every element off, none of them junk."""
    m, n, k = 17, 33, 65
    t = one(MATMUL, *matmul_case("Tiled", m, n, k, tiled(m, n, k, **bug)))
    assert f"{m * n} of {m * n} elements differ" in t.message and "e+1" not in t.message
    assert "look at what they all share, the phase loop: ceil_div(k, kMatTile) phases" in t.hint


def exact_race(m: int, n: int, k: int) -> list[str]:
    """MatmulExactCorrectness: integer inputs, and a race that moved a few products in scattered places."""
    seed = M_SEED + 1000003 * m + 1009 * n + k + 17
    rng = random.Random(seed)
    expected = [float(rng.randint(-60, 60)) for _ in range(m * n)]
    actual = list(expected)
    for i in sorted(rng.sample(range(m * n), 37)):
        actual[i] += rng.choice([-12.0, -6.0, -3.0, 2.0, 4.0, 8.0])
    expr = "AllEqual(p.expected, run_matmul(matmul, p, d), p.seed, Shape2D{...})"
    streamed = ("integer inputs, so the result must be exact; a few scattered wrong elements that change "
                "from run to run point to a race: is the tile overwritten while other warps still read it?")
    return [value_of(f"{MATMUL_AT}:286", expr, compare(expected, actual, seed, cols=n), streamed)]


def test_05_tiled_matmul_race_in_the_exact_tests() -> None:
    """mtiled-no-second-sync: the float tests pass within their tolerance, the exact ones do not."""
    graded = grade(MATMUL, [("MatmulExactCorrectness.Tiled/m640_n512_k4096", exact_race(640, 512, 4096)),
                            ("MatmulCorrectness.Tiled/m1000_n1000_k1000", [])])
    t = graded["MatmulExactCorrectness.Tiled/m640_n512_k4096"]
    assert "Every phase needs two barriers" in t.hint and "racecheck" in t.hint


def exact_systematic(m: int, n: int, k: int) -> list[str]:
    """MatmulExactCorrectness with the B tile transposed: nearly every element wrong, on every run."""
    seed = M_SEED + 1000003 * m + 1009 * n + k + 17
    rng = random.Random(seed)
    expected = [float(rng.randint(-60, 60)) for _ in range(m * n)]
    actual = [e + (7.0 if i % 77 else 0.0) for i, e in enumerate(expected)]
    expr = "AllEqual(p.expected, run_matmul(matmul, p, d), p.seed, Shape2D{...})"
    return [value_of(f"{MATMUL_AT}:286", expr, compare(expected, actual, seed, cols=n))]


def test_05_tiled_matmul_systematic_error_in_the_exact_tests_is_no_race() -> None:
    """mtiled-b-tile-transposed on an H200: 76,980 of 78,000 exact elements wrong got the barrier advice."""
    graded = grade(MATMUL, [("MatmulExactCorrectness.Tiled/m300_n260_k12", exact_systematic(300, 260, 12))])
    t = graded["MatmulExactCorrectness.Tiled/m300_n260_k12"]
    assert "systematic, not a race" in t.hint and "Every phase needs two barriers" not in t.hint


def test_05_tiled_matmul_race_in_the_float_tests() -> None:
    """mtiled-no-second-sync on an H200: 32 of 16,383 elements a little off in a float test."""
    seen = ("Value of: AllNear(p.expected, run_matmul(matmul, p, d), kMatmulTol, p.seed, Shape2D{...})\n  Actual: "
            "false (32 of 16383 elements differ (seed 129133792, tolerance rel 3e-05 abs 0); mismatches span indices "
            "16288..16319\n  [row 128, col 32] expected 143.158884, actual 142.322479\n  [row 128, col 33] expected "
            "139.845934, actual 139.591751\n)\nExpected: true")
    t = one(MATMUL, "MatmulCorrectness.Tiled/m129_n127_k257", [seen])
    assert "Every phase needs two barriers" in t.hint, t.hint


def test_05_tiled_matmul_race_under_racecheck() -> None:
    log = race_log(f"matmul_tiled_kernel{MATMUL_ARGS}", "05-tiled-matmul/matmul.cu:101",
                   "05-tiled-matmul/matmul.cu:106")
    t = sanitized(MATMUL, "racecheck", log)
    assert t.task == "matmul-tiled" and "a phase needs a __syncthreads() after storing the tiles" in t.hint


def test_05_tiled_matmul_barrier_not_reached() -> None:
    """mtiled-early-return under synccheck."""
    t = sanitized(MATMUL, "synccheck", synccheck_log(f"matmul_tiled_kernel{MATMUL_ARGS}",
                                                     "05-tiled-matmul/matmul.cu:103"))
    assert t.task == "matmul-tiled" and "threads whose element lies outside C must not return early" in t.hint
    assert "__syncthreads() must not sit inside a branch" not in t.hint


def test_05_tiled_matmul_load_faults_past_b() -> None:
    """mtiled-guard-tile-index at m = 1, n = 300, k = 70: rows 70..95 of B lie past its guard zone."""
    t = one(MATMUL, "MatmulCorrectness.Tiled/m1_n300_k70", [cuda_error(
        "cudaErrorIllegalAddress", "an illegal memory access was encountered", "cudaDeviceSynchronize()",
        GUARDED_AT)])
    assert t.category is Category.CUDA_ERROR and t.task == "matmul-tiled"
    assert "guard the k index of each load with its global value" in t.hint


def test_05_tiled_matmul_without_shared_tiles() -> None:
    graded = grade(MATMUL, [], missing=["ld.shared in its PTX", "st.shared in its PTX",
                                        "matmul_tiled_kernel waits at"])
    for name in ("Techniques.matmul-tiled", "Techniques.matmul-tiled/2", "Techniques.matmul-tiled/3"):
        assert "the reuse of each loaded element kMatTile times is the point of the task" in graded[name].hint


# --- challenge ---

def test_05_fast_vector_path_on_misaligned_rows() -> None:
    """fast-vec-ignores-n-mod-4: float4 on rows of 33 floats."""
    t = one(MATMUL, "MatmulCorrectness.Fast/m17_n33_k65", [cuda_error(
        "cudaErrorMisalignedAddress", "misaligned address", "cudaDeviceSynchronize()", GUARDED_AT)])
    assert t.task == "fast" and "rows of B and C start that aligned only when n is a multiple of 4" in t.hint


def test_05_fast_reads_a_slice_before_its_copies_land() -> None:
    """fast-prologue-skips-empty-commits: for k <= 16 the first wait does not wait for slice 0, which still
    holds the scribble."""
    t = one(MATMUL, *matmul_case("Fast", 40, 33, 7, tiled(40, 33, 7, zero_fill=False)))
    assert t.task == "fast" and "commit a group at every step even when it copies nothing" in t.hint


def test_05_fast_single_slice_read_before_it_landed() -> None:
    """fast-prologue-skips-empty-commits on an H200: with k = 12 the wrong values were plausible (what the
    buffers held before), not junk, and the generic advice named no cause."""
    seen = ("Value of: AllEqual(p.expected, run_matmul(matmul, p, d), p.seed, Shape2D{...})\n  Actual: false "
            "(24272 of 78000 elements differ (seed 300268274, exact); mismatches span indices 0..66559\n"
            "  [row 0, col 0] expected -47, actual -51\n  [row 0, col 1] expected 22, actual 19\n"
            "  [row 0, col 2] expected -31, actual -33\n)\nExpected: true")
    t = one(MATMUL, "MatmulExactCorrectness.Fast/m300_n260_k12", [seen])
    assert t.task == "fast" and "commit an empty group when there is no slice to copy" in t.hint, t.hint


def test_05_fast_slices_counted_down() -> None:
    """fast-tiles-floor: C = 0 for k < 16, the last products lost above."""
    def zeros(a: list[float], b: list[float], junk: Callable[[], float], c: Output) -> None:
        for i in range(40 * 33):
            c.store(i, 0.0)
    graded = grade(MATMUL, [matmul_case("Fast", 40, 33, 7, zeros),
                            matmul_case("Fast", 17, 33, 65, tiled(17, 33, 65, k_tail=False))])
    for t in graded.values():
        assert "count the k-slices with a division rounded up" in t.hint


def test_05_fast_store_of_a_quad_past_the_row() -> None:
    """fast-scalar-store-guard-quad: values right, three floats past the end of C's last row."""
    t = one(MATMUL, "MatmulCorrectness.Fast/m17_n33_k65", [guard_failure("C", 561, 0, 12)])
    assert "guard each of the four columns on its own" in t.hint
    assert "i < n, not i <= n" not in t.hint
    # fast-vec-ignores-n-mod-4 on an H200: the first failure is the same overrun, at m1_n1_k1.
    t = one(MATMUL, "MatmulCorrectness.Fast/m1_n1_k1", [guard_failure("C", 1, 0, 9)])
    assert "only when n is a multiple of 4" in t.hint


def test_05_fast_pipeline_race() -> None:
    t = sanitized(MATMUL, "racecheck", race_log(
        "void fast::matmul_fast_kernel<true>(const float *, const float *, float *, int, int, int)",
        "05-tiled-matmul/matmul.cu:236", "05-tiled-matmul/matmul.cu:251"))
    assert t.task == "fast"
    assert "then __syncthreads(), before any warp reads the slice" in t.hint


# --- lab 05: memcheck and racecheck findings, as the H200 gate saw them first ---

def _memcheck(what: str, kernel: str, line: int) -> TResult:
    return sanitized(MATMUL, "memcheck", memcheck_log(what, kernel, f"05-tiled-matmul/matmul.cu:{line}"))


def test_05_naive_transpose_writes_past_the_output() -> None:
    """tnaive-out-stride-cols: the output's rows stepped by cols."""
    t = _memcheck("Invalid __global__ write of size 4 bytes", f"transpose_naive_kernel{TRANSPOSE_ARGS}", 34)
    assert t.task == "transpose-naive" and "element (r, c) of the input goes to out[c * rows + r]" in t.hint


def test_05_tiled_transpose_store_past_the_output_under_memcheck() -> None:
    """ttiled-store-guard-input-bounds, where memcheck reports first: the store judged by the input's bounds."""
    t = _memcheck("Invalid __global__ write of size 4 bytes", f"transpose_tiled_kernel{TRANSPOSE_ARGS}", 80)
    assert t.task == "transpose-tiled" and "Guard the store with the output's bounds, not the load's" in t.hint
    load = _memcheck("Invalid __global__ read of size 4 bytes", f"transpose_tiled_kernel{TRANSPOSE_ARGS}", 66)
    assert "guard every load by its row" in load.hint  # a load past the input keeps its own hint


@pytest.mark.parametrize("what", ["Invalid __global__ read of size 4 bytes", "Invalid __global__ write of size 4 bytes"])
def test_05_naive_matmul_past_a_matrix_under_memcheck(what: str) -> None:
    """mnaive-a-stride-n, mnaive-b-stride-k: A or B stepped by another matrix's width."""
    t = _memcheck(what, f"matmul_naive_kernel{MATMUL_ARGS}", 153)
    assert t.task == "matmul-naive" and "Each matrix steps its rows by its own width" in t.hint


def test_05_tiled_matmul_loads_past_a_or_b_under_memcheck() -> None:
    """mtiled-guard-tile-index: loads judged by the tile's index, not the matrix's."""
    t = _memcheck("Invalid __global__ read of size 4 bytes", f"matmul_tiled_kernel{MATMUL_ARGS}", 190)
    assert t.task == "matmul-tiled" and "Judge each tile load by the global row and column it reads" in t.hint


def test_05_fast_vector_access_past_a_row_under_memcheck() -> None:
    """fast-vec-ignores-n-mod-4 where memcheck reports first: a 16-byte read at the end of a row; a 4-byte
    one gets the general advice."""
    kernel = "void fast::matmul_fast_kernel<true>" + MATMUL_ARGS
    t = _memcheck("Invalid __global__ read of size 16 bytes", kernel, 240)
    assert t.task == "fast" and "Take the vector path only when the row length is a multiple of 4" in t.hint
    scalar = _memcheck("Invalid __global__ read of size 4 bytes", kernel, 240)
    assert "Take the vector path only" not in scalar.hint


def test_05_fast_race_names_the_wait_for_the_copies() -> None:
    """fast-prologue-skips-empty-commits, fast-wait-too-few-groups: racecheck sees the slice read before its
    cp.async copies landed."""
    t = sanitized(MATMUL, "racecheck", race_log(
        "void fast::matmul_fast_kernel<true>(const float *, const float *, float *, int, int, int)",
        "05-tiled-matmul/matmul.cu:236", "05-tiled-matmul/matmul.cu:251"))
    assert "cp.async.wait_group" in t.hint and "empty ones too" in t.hint


# --- lab 05: hints that must stay away ---

def test_05_hints_stay_in_their_task_and_pattern() -> None:
    # The same lost tiles in the naive transpose get the naive grid hint, not the tiled kernel's placement.
    naive_t = transposes("Naive", grid_swapped=True)["TransposeCorrectness.Naive/r31_c33"]
    assert "blockIdx.x * kTile" not in naive_t.hint
    # A naive matmul's junk hint is not the tiled kernel's zero-fill advice.
    junk = one(MATMUL, *matmul_case("Naive", 17, 33, 65, naive(17, 33, 65, k_loop_le=True)))
    assert "0.0f where its global index" not in junk.hint
    # The exact tests' race hint needs scattered errors: a tiled matmul off everywhere gets the phase loop.
    everywhere = one(MATMUL, *matmul_case("Tiled", 17, 33, 65, tiled(17, 33, 65, k_tail=False)))
    assert "two barriers" not in everywhere.hint
    # A race in the naive transpose kernel is not possible; a race elsewhere names its own kernel's task.
    race = sanitized(MATMUL, "racecheck", race_log(f"matmul_tiled_kernel{MATMUL_ARGS}",
                                                   "05-tiled-matmul/matmul.cu:101",
                                                   "05-tiled-matmul/matmul.cu:106"))
    assert "A warp read the tile while another warp" not in race.hint
    # The tile-contents hint wants element (0, 0) right: the naive transpose's stride bug does not get it.
    stride = transposes("Naive", out_stride_cols=True)["TransposeCorrectness.Naive/r31_c33"]
    assert "contents are copied as they are" not in stride.hint
