"""The hints of lab 05's transposes (the matmuls and the challenge: test_hints_lab05_matmul.py), each
fired on the failure its bug really produces (solutions/NN-slug/mutants/ describes the bugs), and kept
away from the failures of other tasks and other patterns.

A failure is built the way the lab's test binary reports it: the output a mutant's kernel leaves is
simulated here on the test's own layout (lab 04's pitched buffers with guard rows, lab 05's poisoned
matrices, lab 06's sums), compared as cudalab/compare.hpp does, and wrapped in the messages of the test's
EXPECT_* lines; then a GoogleTest JSON report of those failures goes through grader/execute/gtest.py
(which picks the category: a message naming a cudaError is a cuda_error) and the score stage
(scoring.score), which gives each test its task and its hint as in a real grade. compute-sanitizer
findings go through grader/execute/sanitizer.py's parser, missing techniques through the penalties."""


from __future__ import annotations

import random
from collections.abc import Callable

import pytest

from grader.model.results import Category, Status
from grader.model.results import TestResult as TResult
from grader.tests.gtest_failures import (
    POISON, SCRIBBLE, ceil_div, compare, f32, from_bits, grade, memcheck_log, race_log, sanitized, value_of)

MATMUL = "05-tiled-matmul"


# =====================================================================================================
# Lab 05: tiled matmul. The transposes and matmuls run on small shapes of the test's lists; outputs start as
# poison (NaN) between guard zones, inputs are surrounded by junk, shared memory holds the scribble.
# =====================================================================================================

M_SEED = 5005
MATMUL_AT = "/home/s/labs/05-tiled-matmul/test_matmul.cu"
GUARDED_AT = "/home/s/labs/05-tiled-matmul/../../common/include/cudalab/guarded_buffer.cuh:85"


def junk_values(seed: int) -> Callable[[], float]:
    """The guard zones' junk: random bytes (cudalab/guarded_buffer.cuh), read as floats."""
    rng = random.Random(seed)
    return lambda: from_bits(rng.getrandbits(32))


def guard_failure(what: str, count: int, before: int, after: int, first_after: int = 0) -> str:
    """GuardedBuffer::guards_intact's failure: bytes changed before and past the buffer."""
    msg = f"out-of-bounds write: a kernel changed memory outside {what} ({count} element(s) of 4 bytes):"
    if before:
        msg += f" {before} byte(s) before its start (the nearest 4 byte(s) before)"
    if before and after:
        msg += " and"
    if after:
        msg += f" {after} byte(s) past its end (the first at byte {first_after} past the end)"
    msg += ". Check the bounds guard of every thread that writes it."
    buffer, line = ("d_out", 140) if what == "the output" else ("d_c", 269)
    return value_of(f"{MATMUL_AT}:{line}", f'{buffer}.guards_intact("{what}")', msg)


class Output:
    """A poisoned output between guard zones: writes outside it are counted, not stored."""

    def __init__(self, count: int) -> None:
        self.values = [POISON] * count
        self.before: set[int] = set()
        self.after: set[int] = set()

    def store(self, i: int, v: float) -> None:
        if i < 0:
            self.before.add(i)
        elif i >= len(self.values):
            self.after.add(i - len(self.values))
        else:
            self.values[i] = v

    def guards(self, what: str) -> list[str]:
        if not self.before and not self.after:
            return []
        return [guard_failure(what, len(self.values), 4 * len(self.before), 4 * len(self.after),
                              4 * min(self.after) if self.after else 0)]


TRANSPOSE_SEED = {"Naive": 0, "Tiled": 1, "Padded": 2}
TRANSPOSE_ARGS = "(const float *, float *, int, int)"
MATMUL_ARGS = "(const float *, const float *, float *, int, int, int)"


def transpose(test: str, rows: int, cols: int, **bug) -> list[str]:
    """TransposeCorrectness.<test>/r<rows>_c<cols>: the naive kernel (32 x 4 blocks, one element a thread) or
    the tiled one (32 x 32 tiles, 32 x 4 threads, kTile / kRows elements each), with one of the bugs:
    naive: grid_swapped, guard_swapped, out_stride_cols; tiled: not_transposed, store_guard_input,
    race (a thread reads a slot another warp has not stored: the scribble), store_rows (the rows of a tile
    the store loop covers), out_col_block_x."""
    seed = M_SEED + rows * 7919 + cols + TRANSPOSE_SEED[test]
    rng = random.Random(seed)
    src = [f32(rng.uniform(1.0, 1000.0)) for _ in range(rows * cols)]
    junk = junk_values(seed)

    def load(r: int, c: int) -> float:
        return src[r * cols + c] if 0 <= r * cols + c < len(src) else junk()

    out = Output(rows * cols)
    if test == "Naive":
        gx, gy = (ceil_div(cols, 32), ceil_div(rows, 4))
        if bug.get("grid_swapped"):
            gx, gy = ceil_div(rows, 32), ceil_div(cols, 4)
        for r in range(4 * gy):
            for c in range(32 * gx):
                inside = r < cols and c < rows if bug.get("guard_swapped") else r < rows and c < cols
                if inside:
                    out.store(c * (cols if bug.get("out_stride_cols") else rows) + r, load(r, c))
    else:
        for by in range(ceil_div(rows, 32)):
            for bx in range(ceil_div(cols, 32)):
                tile = [[SCRIBBLE] * 32 for _ in range(32)]
                for j in range(32):
                    for tx in range(32):
                        r, c = by * 32 + j, bx * 32 + tx
                        if r < rows and c < cols:
                            tile[j][tx] = load(r, c)
                for j in range(bug.get("store_rows", 32)):
                    for tx in range(32):
                        orow = bx * 32 + j
                        ocol = (bx if bug.get("out_col_block_x") else by) * 32 + tx
                        inside = orow < cols and ocol < rows
                        if bug.get("store_guard_input"):
                            inside = orow < rows and ocol < cols
                        if not inside:
                            continue
                        v = tile[j][tx] if bug.get("not_transposed") else tile[tx][j]
                        if bug.get("race") and (bx + by) % 2 == 0 and j % 4 == 0 and tx % 4 == (j // 4) % 4:
                            v = SCRIBBLE  # warp j % 4 read slot (tx, j) before warp tx % 4 stored it
                        out.store(orow * rows + ocol, v)
    expected = [src[r * cols + c] for c in range(cols) for r in range(rows)]
    failures = out.guards("the output")
    body = compare(expected, out.values, seed, cols=rows)
    if body:
        expr = ("AllEqual(transpose_reference(in, s.rows, s.cols), after_offset(d_out.to_host(), off, "
                "\"the output\"), seed, Shape2D{...})")
        streamed = f"input {rows} x {cols}, output {cols} x {rows}"
        failures.append(value_of(f"{MATMUL_AT}:141", expr, body, streamed))
    return failures


def transposes(test: str, **bug) -> dict[str, TResult]:
    shapes = [(1, 1), (1, 100), (100, 1), (31, 33), (32, 32), (33, 65), (64, 64), (129, 2)]
    return grade(MATMUL, [(f"TransposeCorrectness.{test}/r{r}_c{c}", transpose(test, r, c, **bug))
                          for r, c in shapes])


def test_05_simulated_transposes_are_right_without_their_bugs() -> None:
    for test in ("Naive", "Tiled", "Padded"):
        assert all(t.status is Status.PASSED for t in transposes(test).values())


@pytest.mark.parametrize("bug, hints", [
    ("out_stride_cols", {"r31_c33": "A store landed outside the output, which is cols x rows",
                         "r33_c65": "A store landed outside the output, which is cols x rows",
                         "r129_c2": "Check each index against its own bound"}),
    ("guard_swapped", {"r31_c33": "Check each index against its own bound",
                       "r33_c65": "Check each index against its own bound",
                       "r100_c1": "only a thread whose (r, c) lies inside the input"}),
])
def test_05_naive_transpose_right_for_square_matrices_only(bug: str, hints: dict[str, str]) -> None:
    """tnaive-out-stride-cols (stores out of place, past the output's end for some shapes),
    tnaive-guard-swapped (junk read past the input stored, elements of the lost columns never written)."""
    graded = transposes("Naive", **{bug: True})
    for square in ("r1_c1", "r32_c32", "r64_c64"):
        assert graded[f"TransposeCorrectness.Naive/{square}"].status is Status.PASSED
    for shape, words in hints.items():
        t = graded[f"TransposeCorrectness.Naive/{shape}"]
        assert t.task == "transpose-naive" and words in t.hint, (shape, t.hint)
    if bug == "out_stride_cols":
        assert "out-of-bounds write" in graded["TransposeCorrectness.Naive/r33_c65"].message


def test_05_naive_transpose_grid_sized_the_other_way_round() -> None:
    """tnaive-grid-swapped: 1 x 100 gets one block of 32 columns."""
    graded = transposes("Naive", grid_swapped=True)
    for name in ("TransposeCorrectness.Naive/r1_c100", "TransposeCorrectness.Naive/r31_c33",
                 "TransposeCorrectness.Naive/r129_c2"):
        t = graded[name]
        assert "actual -nan" in t.message
        assert "the grid needs ceil_div(cols, kTile) blocks in x and ceil_div(rows, kRows) in y" in t.hint
        assert "Check each index" not in t.hint
    assert graded["TransposeCorrectness.Naive/r32_c32"].status is Status.PASSED


def test_05_naive_transpose_reads_past_the_input() -> None:
    log = memcheck_log("Invalid __global__ read of size 4 bytes", f"transpose_naive_kernel{TRANSPOSE_ARGS}",
                       "05-tiled-matmul/matmul.cu:31")
    t = sanitized(MATMUL, "memcheck", log)
    assert t.task == "transpose-naive"
    assert "memcheck sees such a read even when its value is never stored" in t.hint


@pytest.mark.parametrize("test", ["Tiled", "Padded"])
def test_05_tiled_transposes_read_the_tile_before_it_is_stored(test: str) -> None:
    """ttiled-no-syncthreads, tpadded-no-syncthreads: the scribble comes out as an element."""
    t = transposes(test, race=True)[f"TransposeCorrectness.{test}/r64_c64"]
    assert "actual 1.53652219e+16" in t.message
    assert "a tile slot nobody stored was written out" in t.hint
    assert ("read before the __syncthreads() that must separate filling the tile from reading it" in t.hint
            or "The padded kernel needs the same __syncthreads() as the tiled one" in t.hint)
    assert t.task == f"transpose-{test.lower()}"


def test_05_tiled_transpose_that_does_not_turn_the_tile() -> None:
    """ttiled-tile-not-transposed: every tile in place, its contents as they were."""
    graded = transposes("Tiled", not_transposed=True)
    assert graded["TransposeCorrectness.Tiled/r1_c1"].status is Status.PASSED
    for name in ("TransposeCorrectness.Tiled/r31_c33", "TransposeCorrectness.Tiled/r64_c64"):
        assert "the tiles reach their transposed places, but their contents are copied" in graded[name].hint


def test_05_tiled_transpose_stores_guarded_with_the_input_bounds() -> None:
    """ttiled-store-guard-input-bounds: tall, thin inputs store past the output; the others write out slots
    past the matrix that no load filled (the scribble)."""
    graded = transposes("Tiled", store_guard_input=True)
    assert graded["TransposeCorrectness.Tiled/r64_c64"].status is Status.PASSED
    tall = graded["TransposeCorrectness.Tiled/r129_c2"]
    assert "out-of-bounds write" in tall.message
    assert "Guard each store with the output's bounds (row < cols, column < rows)" in tall.hint
    assert "Check each index against its own bound" not in tall.hint  # the naive task's
    wide = graded["TransposeCorrectness.Tiled/r31_c33"]
    assert "actual 1.53652219e+16" in wide.message and "out-of-bounds" not in wide.message
    assert "it lies past the matrix and the store's guard let it through" in wide.hint


@pytest.mark.parametrize("test", ["Tiled", "Padded"])
def test_05_tiled_transposes_that_place_tiles_wrong(test: str) -> None:
    """tpadded-out-col-block-x: the output column from blockIdx.x too. Blocks run in order, so block (0, 1)
    overwrites tile (0, 0) after block (0, 0): the first wrong elements are values, not NaN."""
    graded = transposes(test, out_col_block_x=True)
    assert graded[f"TransposeCorrectness.{test}/r32_c32"].status is Status.PASSED
    t = graded[f"TransposeCorrectness.{test}/r64_c64"]
    assert "[row 0, col 0]" in t.message
    assert "stores it transposed at output row blockIdx.x * kTile, column blockIdx.y * kTile" in t.hint


@pytest.mark.parametrize("kernel, task", [("transpose_tiled_kernel", "transpose-tiled"),
                                          ("transpose_padded_kernel", "transpose-padded")])
def test_05_transpose_race(kernel: str, task: str) -> None:
    t = sanitized(MATMUL, "racecheck", race_log(f"{kernel}{TRANSPOSE_ARGS}", "05-tiled-matmul/matmul.cu:52",
                                                "05-tiled-matmul/matmul.cu:58"))
    assert t.task == task and "A warp read the tile while another warp was still storing it" in t.hint


def test_05_tiled_transpose_loads_past_the_input() -> None:
    """ttiled-load-no-row-guard: the output is right; only memcheck sees the read."""
    log = memcheck_log("Invalid __global__ read of size 4 bytes", f"transpose_tiled_kernel{TRANSPOSE_ARGS}",
                       "05-tiled-matmul/matmul.cu:49")
    t = sanitized(MATMUL, "memcheck", log)
    assert t.task == "transpose-tiled"
    assert "guard every load by its row (< rows) as well as its column" in t.hint


def test_05_tiled_transpose_without_shared_memory() -> None:
    graded = grade(MATMUL, [], missing=["transpose_tiled_kernel stages its tile",
                                        "transpose_tiled_kernel waits at"])
    for name in ("Techniques.transpose-tiled", "Techniques.transpose-tiled/2"):
        t = graded[name]
        assert t.category is Category.TECHNIQUE_MISSING
        assert "only a tile in shared memory lets both the global loads and the global stores" in t.hint


def test_05_padded_transpose_store_loop_that_stops_halfway() -> None:
    """tpadded-store-loop-short: half the rows of every output tile."""
    graded = transposes("Padded", store_rows=16)
    assert graded["TransposeCorrectness.Padded/r1_c1"].status is Status.PASSED
    t = graded["TransposeCorrectness.Padded/r33_c65"]
    assert "the store loop must cover every row of the tile that the load loop covered" in t.hint


def test_05_padded_transpose_without_a_shared_tile() -> None:
    """Padding only shows in the perf chart; the technique check is where a padded kernel without a shared
    tile meets the bank-conflict advice."""
    t = grade(MATMUL, [], missing=["transpose_padded_kernel reads its tile"])["Techniques.transpose-padded"]
    assert "the extra column spreads the 32 elements of a tile column over 32 banks" in t.hint
