"""Lab 02's own hints (labs/02-indexing/hints.toml): each fires on the failure of the bug it was written for
(solutions/02-indexing/mutants/), and not outside its task or pattern. Where the message depends on what the
buggy code computes, a few lines of Python compute it on the test's own sizes."""

from __future__ import annotations

import math
from collections.abc import Callable
from itertools import product

import pytest

from grader.execute.gtest import clean_failure
from grader.tests.lab_hints_01_03 import (
    _annotate, _cuda_error, _exception, _expect_eq, NAN, _pending, POISON_INT, POISON_UINT, _report,
    _technique, _value_of)


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
