"""Lab 06's reduction steps simulated for the hint tests (test_hints_lab06.py): each step's kernels block by
block on the test's inputs, and the messages the test's EXPECT_* lines wrap their sums in."""

from __future__ import annotations

import math
import random
from collections.abc import Callable

from grader.tests.gtest_failures import POISON, POISON_INT, SCRIBBLE, SCRIBBLE_INT, ceil_div, compare, f32, value_of

REDUCE = "06-reduce"


# =====================================================================================================
# Lab 06: reduce. Each step's kernels are simulated block by block (steps 1-4 through the given driver,
# reduce_in_passes), on the test's inputs, at the sizes a run without the two large ones reports.
# =====================================================================================================

R_SEED = 6006
REDUCE_AT = "/home/s/labs/06-reduce/test_reduce.cu"
SIZES = (1, 31, 32, 33, 255, 256, 257, 50001)
STEP_TASK = {"Interleaved": "interleaved", "Sequential": "sequential", "FirstAdd": "first-add",
             "Shuffle": "shuffle", "SinglePass": "single-pass"}
INT_ARGS = "(const int *, int *, unsigned long)"
FLOAT_ARGS = "(const float *, float *, unsigned long)"
Block = Callable[[list, int, int, bool], float | int]  # (values, block index, count, ints?) -> the partial


def wrap32(v: int) -> int:
    return (v + 2**31) % 2**32 - 2**31


def int_input(n: int) -> list[int]:
    rng = random.Random(R_SEED + 2 * n + 1)
    return [rng.randint(1, 100) for _ in range(n)]


def float_input(n: int) -> list[float]:
    """Values in [1, 2), the last three scaled up by 1 + n / 128 (test_reduce.cu's float_input)."""
    rng = random.Random(R_SEED + n)
    values = [f32(rng.uniform(1.0, 2.0)) for _ in range(n)]
    boost = f32(1.0 + n / 128.0)
    for i in range(max(0, n - 3), n):
        values[i] = f32(values[i] * boost)
    return values


def relative_tolerance(n: int) -> float:
    d = math.ceil(math.log2(n)) + 64.0
    u = 2.0**-24
    return d * u / (1.0 - d * u)


def sum_failure(n: int, values: list, actual: float | int) -> list[str]:
    """ReduceCorrectness's check_int (exact, "off by") or check_float (a tolerance) on one sum."""
    expected = sum(values)
    if isinstance(actual, int):
        body = compare([expected], [actual], R_SEED + 2 * n + 1)
        expr = "cudalab::AllEqual(std::vector<std::int64_t>{expected}, std::vector<int>{actual}, seed)"
        streamed = f"int sum of n = {n} values in [1, 100] must be exact; off by {actual - expected}"
        return [value_of(f"{REDUCE_AT}:115", expr, body, streamed)] if body else []
    body = compare([float(expected)], [actual], R_SEED + n, f"tolerance rel {relative_tolerance(n):g} abs 0")
    expr = "cudalab::Near(reference_sum(h_in), actual, {relative_tolerance(n), 0.0}, seed)"
    streamed = f"float sum of n = {n} values in [1, 2) (the last three scaled up)"
    return [value_of(f"{REDUCE_AT}:105", expr, body, streamed)] if body else []


def finish(total: float | int, is_int: bool) -> float | int:
    return wrap32(int(total)) if is_int else f32(total)


def in_passes(values: list, block: Block, per_block: int, is_int: bool) -> float | int:
    """reduce_in_passes: the kernel over the values, then over its partials, until one block is enough."""
    src, count = values, len(values)
    while True:
        blocks = ceil_div(count, per_block)
        dst = [finish(block(src, b, count, is_int), is_int) for b in range(blocks)]
        if blocks == 1:
            return dst[0]
        src, count = dst, blocks


def shared_junk(is_int: bool) -> float | int:
    return SCRIBBLE_INT if is_int else SCRIBBLE


def tree(s: list, strides, pick: Callable[[int, int], bool]) -> float | int:
    """Steps of a shared-memory tree, a barrier after each. Within a step each warp reads, then writes, and
    the warps run from the last to the first: a slot another warp adds into in the same step is read with
    its new value, as a race lets happen (the right trees never read such a slot)."""
    for stride in strides:
        for w in reversed(range(len(s) // 32)):
            lanes = range(32 * w, 32 * w + 32)
            s[32 * w:32 * w + 32] = [s[t] + s[t + stride] if pick(t, stride) and t + stride < len(s) else s[t]
                                     for t in lanes]
    return s[0]


HALVING = (128, 64, 32, 16, 8, 4, 2, 1)


def interleaved(zero_tail: bool = True, pick: Callable[[int, int], bool] = lambda t, s: t % (2 * s) == 0,
                strides=(1, 2, 4, 8, 16, 32, 64, 128)) -> Block:
    def block(src: list, b: int, count: int, is_int: bool):
        tail = 0 if zero_tail else shared_junk(is_int)
        return tree([src[b * 256 + t] if b * 256 + t < count else tail for t in range(256)], strides, pick)
    return block


def sequential(strides=HALVING, zero_tail: bool = True) -> Block:
    def block(src: list, b: int, count: int, is_int: bool):
        tail = 0 if zero_tail else shared_junk(is_int)
        s = [src[b * 256 + t] if b * 256 + t < count else tail for t in range(256)]
        return tree(s, strides, lambda t, stride: t < stride)
    return block


def first_add(block_start: int = 512, second_guard: bool = True,
              junk: Callable[[], float | int] | None = None) -> Block:
    def block(src: list, b: int, count: int, is_int: bool):
        s = []
        for t in range(256):
            i = b * block_start + t
            v = src[i] if i < count else 0
            if i + 256 < count:
                v += src[i + 256]
            elif not second_guard and junk:
                v += junk()  # the input's guard zone
            s.append(v)
        return tree(s, HALVING, lambda t, stride: t < stride)
    return block


def warp_reduce(lanes: list, offsets=(16, 8, 4, 2, 1)):
    """__shfl_down_sync: lane l adds lane l + offset's value (its own when that lane does not exist)."""
    for off in offsets:
        lanes = [lanes[lane] + (lanes[lane + off] if lane + off < 32 else lanes[lane]) for lane in range(32)]
    return lanes[0]


def shuffle(offsets=(16, 8, 4, 2, 1), lane_guard: bool = True, every_lane0_writes: bool = False) -> Block:
    def block(src: list, b: int, count: int, is_int: bool):
        v = []
        for t in range(256):
            i = b * 512 + t
            v.append((src[i] if i < count else 0) + (src[i + 256] if i + 256 < count else 0))
        sums = [warp_reduce(v[32 * w:32 * w + 32], offsets) for w in range(8)]
        if every_lane0_writes:
            return sums[7]  # lane 0 of the last warp wrote out[blockIdx.x] last
        return warp_reduce(sums + [0 if lane_guard else shared_junk(is_int)] * 24, offsets)
    return block


def single_pass(values: list, is_int: bool, tail: str = "right", stride_one_block: bool = False,
                never_written: bool = False) -> float | int:
    """reduce_single_pass's sum: one grid of min(1056, the blocks the vectors need) blocks of 256 threads."""
    if never_written:
        return POISON_INT if is_int else POISON
    n = len(values)
    n4 = n // 4
    blocks = max(1, min(132 * 8, ceil_div(n4, 256)))
    vec = [sum(values[4 * i:4 * i + 4]) for i in range(n4)]
    total = sum(sum(vec[b * 256:]) for b in range(blocks)) if stride_one_block else sum(vec)
    if tail == "right":
        total += sum(values[4 * n4:])
    elif tail == "index":
        total += sum(values[n4 + t] for t in range(n % 4))
    return finish(total, is_int)


Run = Callable[[list, bool], float | int]


def reduce_tests(step: str, run: Run, sizes=SIZES, types=("", "Int")) -> list[tuple[str, list[str]]]:
    """ReduceCorrectness.<step>[Int]/<n> for each size: run(values, is_int) is the function's sum."""
    tests = []
    for kind in types:
        for n in sizes:
            values = int_input(n) if kind else float_input(n)
            failures = sum_failure(n, values, run(values, bool(kind)))
            tests.append((f"ReduceCorrectness.{step}{kind}/{n}", failures))
    return tests


def passes_of(block: Block, per_block: int = 256) -> Run:
    return lambda values, is_int: in_passes(values, block, per_block, is_int)


def single_pass_with(**bug) -> Run:
    return lambda values, is_int: single_pass(values, is_int, **bug)
