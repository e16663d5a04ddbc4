"""The hints of lab 06 (reduce), each fired on the failure its bug really produces
(solutions/NN-slug/mutants/ describes the bugs), and kept away from the failures of other tasks and other
patterns.

A failure is built the way the lab's test binary reports it: the sum a mutant's kernels leave is simulated
block by block on the test's inputs (grader/tests/lab06_sim.py), compared as cudalab/compare.hpp does, and
wrapped in the messages of the test's EXPECT_* lines; then a GoogleTest JSON report of those failures goes
through grader/execute/gtest.py (which picks the category: a message naming a cudaError is a cuda_error)
and the score stage (scoring.score), which gives each test its task and its hint as in a real grade.
compute-sanitizer findings go through grader/execute/sanitizer.py's parser, missing techniques through
the penalties."""

from __future__ import annotations

import random
import re

import pytest

from grader.model.results import Category, Status
from grader.tests.gtest_failures import (
    POISON_INT, ceil_div, compare, equal, from_bits, grade, memcheck_log, one, race_log, sanitized, synccheck_log,
    value_of)
from grader.tests.lab06_sim import (
    FLOAT_ARGS, HALVING, INT_ARGS, R_SEED, REDUCE, REDUCE_AT, STEP_TASK, first_add, int_input, interleaved,
    passes_of, reduce_tests, sequential, shuffle, single_pass, single_pass_with, sum_failure, wrap32)


def test_06_simulated_steps_are_right_without_their_bugs() -> None:
    for step, run in (("Interleaved", passes_of(interleaved())), ("Sequential", passes_of(sequential())),
                      ("FirstAdd", passes_of(first_add(), 512)), ("Shuffle", passes_of(shuffle(), 512)),
                      ("SinglePass", single_pass)):
        assert all(not failures for _, failures in reduce_tests(step, run)), step


# --- step 1: interleaved ---

def test_06_interleaved_race() -> None:
    """interleaved-no-sync-after-load."""
    t = sanitized(REDUCE, "racecheck", race_log(f"void reduce_interleaved_kernel<int>{INT_ARGS}",
                                                "06-reduce/reduce.cu:67", "06-reduce/reduce.cu:70"))
    assert t.task == "interleaved"
    assert "needs a __syncthreads() after the load and one after every step" in t.hint


def test_06_interleaved_reads_past_s_data() -> None:
    """interleaved-mod-stride: at stride 1 thread 255 adds s_data[256]."""
    t = sanitized(REDUCE, "memcheck", memcheck_log("Invalid __shared__ read of size 4 bytes",
                                                   f"void reduce_interleaved_kernel<int>{INT_ARGS}",
                                                   "06-reduce/reduce.cu:70"))
    assert t.task == "interleaved" and "s_data[tid + stride] with tid + stride >= kBlock" in t.hint


def test_06_interleaved_tail_not_zeroed() -> None:
    """interleaved-tail-not-zeroed: slots past count keep the scribble; only n = 256 fills every slot."""
    graded = grade(REDUCE, reduce_tests("Interleaved", passes_of(interleaved(zero_tail=False))))
    assert graded["ReduceCorrectness.InterleavedInt/256"].status is Status.PASSED
    for name in ("ReduceCorrectness.InterleavedInt/31", "ReduceCorrectness.InterleavedInt/257",
                 "ReduceCorrectness.Interleaved/1", "ReduceCorrectness.Interleaved/50001"):
        t = graded[name]
        assert t.task == "interleaved", name
        assert "The sum picked up junk: a slot of s_data that no thread stored" in t.hint, name


def test_06_interleaved_adds_slots_twice() -> None:
    """interleaved-mod-stride (kept inside the block): tid % stride picks threads whose slots were added."""
    graded = grade(REDUCE, reduce_tests("Interleaved", passes_of(interleaved(pick=lambda t, s: t % s == 0))))
    assert graded["ReduceCorrectness.InterleavedInt/33"].status is Status.PASSED  # one warp, in step
    t = graded["ReduceCorrectness.InterleavedInt/257"]
    assert "off by " in t.message and "off by -" not in t.message
    assert "only the threads whose index is a multiple of 2 * s may add" in t.hint


def test_06_interleaved_tree_a_step_short() -> None:
    """The stride loop stops before kBlock / 2: the second half of every full block is lost."""
    short = interleaved(strides=(1, 2, 4, 8, 16, 32, 64))
    graded = grade(REDUCE, reduce_tests("Interleaved", passes_of(short)))
    assert graded["ReduceCorrectness.InterleavedInt/33"].status is Status.PASSED
    t = graded["ReduceCorrectness.InterleavedInt/257"]
    assert "off by -" in t.message and "the tree must run every stride 1, 2, 4, ..., kBlock / 2" in t.hint


def test_06_interleaved_float_sum_too_large_gets_the_int_tests_advice() -> None:
    """A float sum off by more than rounding says which way, as the exact int test does: too large."""
    graded = grade(REDUCE, reduce_tests("Interleaved", passes_of(interleaved(pick=lambda t, s: t % s == 0))))
    t = graded["ReduceCorrectness.Interleaved/257"]
    assert "above what it should be" in t.hint and "The sum is too large, so values were added more than once" in t.hint
    assert "Every element is wrong (often still the poison value)" not in t.hint
    assert "The only element was written" not in t.hint  # 257 values in: not a one-element case


# --- step 2: sequential ---

def test_06_sequential_barrier_inside_the_if() -> None:
    """sequential-sync-inside-if."""
    t = sanitized(REDUCE, "synccheck", synccheck_log(f"void reduce_sequential_kernel<int>{INT_ARGS}",
                                                     "06-reduce/reduce.cu:101"))
    assert t.task == "sequential" and "put the barrier after the if" in t.hint
    assert "__syncthreads() must not sit inside a branch" not in t.hint


def test_06_sequential_race() -> None:
    t = sanitized(REDUCE, "racecheck", race_log(f"void reduce_sequential_kernel<float>{FLOAT_ARGS}",
                                                "06-reduce/reduce.cu:97", "06-reduce/reduce.cu:100"))
    assert t.task == "sequential" and "outside the if (tid < stride)" in t.hint


def test_06_sequential_tail_not_zeroed() -> None:
    graded = grade(REDUCE, reduce_tests("Sequential", passes_of(sequential(zero_tail=False)), sizes=(33,)))
    assert "before the first step reads it" in graded["ReduceCorrectness.SequentialInt/33"].hint


def test_06_sequential_stops_at_stride_two() -> None:
    """sequential-stops-at-stride-2: every block's partial misses s_data[1]."""
    graded = grade(REDUCE, reduce_tests("Sequential", passes_of(sequential(strides=HALVING[:-1]))))
    assert graded["ReduceCorrectness.SequentialInt/1"].status is Status.PASSED
    for n in (31, 256, 50001):
        t = graded[f"ReduceCorrectness.SequentialInt/{n}"]
        assert "off by -" in t.message and "check that the loop's condition lets the stride reach 1" in t.hint
    floats = graded["ReduceCorrectness.Sequential/256"].hint
    assert "below what it should be" in floats and "check that the loop's condition lets the stride reach 1" in floats


def huge_failure() -> list[str]:
    expr = "cudalab::AllEqual(std::vector<long long>{expected}, d_out.to_host(), kSeed)"
    return [value_of(f"{REDUCE_AT}:269", expr, compare([-1048576], [-3145728], R_SEED),
                     "int sum of n = 2^32 + 2^20 + 3 values: are indices and counts std::size_t all the way "
                     "(blockIdx.x * blockDim.x is 32-bit unless cast first)?")]


@pytest.mark.parametrize("step, words", [
    ("Sequential", "runs more than 2^24 blocks of 256, so blockIdx.x * kBlock"),
    ("FirstAdd", "a block's start, 2 * kBlock * blockIdx.x, no longer fits in 32 bits"),
    ("SinglePass", "n / 4 (over 2^30 vectors), the grid-stride index and its stride"),
])
def test_06_indices_in_32_bits(step: str, words: str) -> None:
    """sequential-index-32bit, and its kin in steps 3 and 5: only the 2^32 + 2^20 + 3 values go wrong."""
    t = one(REDUCE, f"ReduceHugeCorrectness.{step}", huge_failure())
    assert t.task == STEP_TASK[step] and words in t.hint


# --- step 3: first add ---

def grid_failure(n: int, per_block: int, empty: int, needed: int) -> list[str]:
    return [equal(f"{REDUCE_AT}:213", "empty", str(empty), "0u", "0",
                  f"{empty} block(s) wrote a partial sum of 0: they had no values to add. With {per_block} "
                  f"values per block, n = {n} needs {needed} block(s) in all passes together; is the grid "
                  "sized for the values one block covers?")]


@pytest.mark.parametrize("step", ["FirstAdd", "Shuffle"])
def test_06_grid_sized_for_one_value_per_thread(step: str) -> None:
    """first-add-impl-kblock-per-block: 196 blocks for 50001 values, 98 of them past the data (the sums
    stay right)."""
    t = one(REDUCE, f"ReduceGridCorrectness.{step}/50001", grid_failure(50001, 512, 98, 99))
    assert t.task == STEP_TASK[step]
    assert "Blocks with nothing to add mean the grid is sized for fewer values" in t.hint


def test_06_first_add_second_load_unguarded() -> None:
    """first-add-second-load-unguarded: in[i + kBlock] is read past the end, into the input's guard zone."""
    rng = random.Random(R_SEED)  # the guard zone's bytes, read as ints
    unguarded = first_add(second_guard=False, junk=lambda: wrap32(rng.getrandbits(32)))
    graded = grade(REDUCE, reduce_tests("FirstAdd", passes_of(unguarded, 512), sizes=(1, 31, 257),
                                        types=("Int",)))
    for n in (1, 31, 257):
        t = graded[f"ReduceCorrectness.FirstAddInt/{n}"]
        assert "each of a thread's two loads needs its own bound check" in t.hint, t.message


def test_06_first_add_second_load_unguarded_floats() -> None:
    # Guard bytes read as floats: about 6e21, then two tiny ones.
    guard = iter([from_bits(0x63A5C2F1), from_bits(0x1F3D9A07), from_bits(0xA2B4C6D8)] * 100)
    unguarded = first_add(second_guard=False, junk=lambda: next(guard))
    t = grade(REDUCE, reduce_tests("FirstAdd", passes_of(unguarded, 512), sizes=(31,),
                                   types=("",)))["ReduceCorrectness.FirstAdd/31"]
    assert re.search(r"actual \d\.\d+e\+\d\d", t.message)
    assert "each of a thread's two loads needs its own bound check" in t.hint


def test_06_first_add_blocks_that_overlap() -> None:
    """first-add-block-offset: block b starts at b * kBlock, so neighbours overlap, the end is never read."""
    graded = grade(REDUCE, reduce_tests("FirstAdd", passes_of(first_add(block_start=256), 512)))
    assert graded["ReduceCorrectness.FirstAddInt/257"].status is Status.PASSED
    t = graded["ReduceCorrectness.FirstAddInt/50001"]
    assert "off by -" not in t.message
    assert "as when neighbouring blocks overlap: a block now covers 2 * kBlock values" in t.hint
    floats = graded["ReduceCorrectness.FirstAdd/50001"].hint  # the float sum is off the other way here
    assert "below what it should be" in floats and "A block start of kBlock * b makes neighbouring blocks" in floats


# --- step 4: shuffle ---

def test_06_shuffle_without_shuffles() -> None:
    t = grade(REDUCE, [], missing=["__shfl_down_sync"])["Techniques.shuffle"]
    assert "the old unrolled last warp on a volatile shared array is a data race" in t.hint


def test_06_shuffle_race_on_the_warp_sums() -> None:
    """shuffle-no-sync-in-block-reduce: block_reduce_sum is inlined into the kernel racecheck names."""
    t = sanitized(REDUCE, "racecheck", race_log(f"void reduce_shuffle_kernel<int>{INT_ARGS}",
                                                "06-reduce/reduce.cu:174", "06-reduce/reduce.cu:177"))
    assert t.task == "shuffle"
    assert "warp 0 reads the s_warp_sums that lane 0 of the other warps stores" in t.hint


def test_06_shuffle_lanes_past_the_warp_sums() -> None:
    """shuffle-warp0-no-lane-guard: lanes 8-31 of warp 0 read past s_warp_sums (memcheck) and add junk."""
    t = sanitized(REDUCE, "memcheck", memcheck_log("Invalid __shared__ read of size 4 bytes",
                                                   f"void reduce_shuffle_kernel<float>{FLOAT_ARGS}",
                                                   "06-reduce/reduce.cu:177"))
    assert t.task == "shuffle" and "warp 0's lanes from kWarpsPerBlock on have no warp sum to read" in t.hint
    graded = grade(REDUCE, reduce_tests("Shuffle", passes_of(shuffle(lane_guard=False), 512),
                                        sizes=(1, 33, 257)))
    for name in ("ReduceCorrectness.ShuffleInt/33", "ReduceCorrectness.Shuffle/1"):
        assert "only the first kWarpsPerBlock lanes of warp 0 have a warp sum to read" in graded[name].hint


@pytest.mark.parametrize("bug", [{"offsets": (8, 4, 2, 1)}, {"every_lane0_writes": True}])
def test_06_shuffle_loses_values(bug: dict) -> None:
    """shuffle-offsets-from-8 (lanes 16-31 of every warp lost), shuffle-every-lane0-writes (the last warp's
    share wins)."""
    graded = grade(REDUCE, reduce_tests("Shuffle", passes_of(shuffle(**bug), 512)))
    t = graded["ReduceCorrectness.ShuffleInt/257"]
    assert "off by -" in t.message
    assert "warp_reduce_sum must start at offset 16, half a warp" in t.hint
    floats = graded["ReduceCorrectness.Shuffle/257"].hint
    assert "below what it should be" in floats and "warp_reduce_sum must start at offset 16" in floats


# --- step 5: single pass ---

def calls_in_turn(n: int) -> list[str]:
    """ReduceSinglePassCorrectness.ResetsTheCounterForTheNextCall with the counter never reset: call 1 is
    right and leaves the counter at its grid size; no block of call 2 or 3 draws the last ticket."""
    failures = []
    grid = ceil_div(n // 4, 256)
    for call in range(3):
        seed = R_SEED + 100 + call
        if call:
            values = [random.Random(seed).randint(1, 100) for _ in range(n)]
            expr = "cudalab::AllEqual(std::vector<std::int64_t>{expected}, d_out.to_host(), seed)"
            failures.append(value_of(f"{REDUCE_AT}:159", expr, compare([sum(values)], [POISON_INT], seed),
                                     f"call {call + 1} of 3 on the same workspace, n = {n}"))
        failures.append(equal(f"{REDUCE_AT}:163", "counter", str(grid * (call + 1)), "0u", "0",
                              f"after call {call + 1} (n = {n}), the counter is not back at zero: the last "
                              "block must reset it"))
    return failures


def test_06_single_pass_counter_not_reset() -> None:
    """single-pass-counter-not-reset: every single call passes, calls in turn do not."""
    calls = "ReduceSinglePassCorrectness.ResetsTheCounterForTheNextCall"
    graded = grade(REDUCE, reduce_tests("SinglePass", single_pass) + [(calls, calls_in_turn(50001))])
    assert graded[calls].task == "single-pass" and "Let exactly one block set it back" in graded[calls].hint
    assert graded["ReduceCorrectness.SinglePassInt/50001"].status is Status.PASSED


def test_06_single_pass_that_no_block_finishes() -> None:
    """single-pass-last-ticket-off-by-one: the last block waits for ticket gridDim.x, which nobody draws."""
    graded = grade(REDUCE, reduce_tests("SinglePass", single_pass_with(never_written=True)))
    for name in ("ReduceCorrectness.SinglePassInt/1", "ReduceCorrectness.SinglePass/50001"):
        t = graded[name]
        assert "*d_out was never written, so no block took itself for the last" in t.hint, name
        assert "The float sum is off" not in t.hint


def test_06_single_pass_reads_past_the_input() -> None:
    """single-pass-unroll-bound: memcheck, and junk in the sum where the loads past the end found some."""
    kernel = "void reduce_single_pass_kernel<int>(const int *, int *, unsigned long, int *, unsigned int *)"
    t = sanitized(REDUCE, "memcheck", memcheck_log("Invalid __global__ read of size 16 bytes", kernel,
                                                   "06-reduce/reduce.cu:265"))
    assert t.task == "single-pass" and "test the round's last vector, not its first" in t.hint
    values = int_input(257)
    junked = one(REDUCE, "ReduceCorrectness.SinglePassInt/257",
                 sum_failure(257, values, wrap32(sum(values) + 3 * 1938238411)))
    assert "in the unrolled loop, all kUnroll vectors of a round must lie below n / 4" in junked.hint


@pytest.mark.parametrize("tail", ["missing", "index"])
def test_06_single_pass_last_values(tail: str) -> None:
    """single-pass-no-tail: the sizes that fail are those with n % 4 != 0. single-pass-tail-index: n = 1
    reads in[0] either way, so the sizes show no pattern, and the int tests are off by a few values."""
    graded = grade(REDUCE, reduce_tests("SinglePass", single_pass_with(tail=tail)))
    for n in (32, 256):
        assert graded[f"ReduceCorrectness.SinglePassInt/{n}"].status is Status.PASSED
    if tail == "missing":
        for name in ("ReduceCorrectness.SinglePassInt/1", "ReduceCorrectness.SinglePassInt/257",
                     "ReduceCorrectness.SinglePass/33", "ReduceCorrectness.SinglePass/50001"):
            t = graded[name]
            assert "only sizes that are not a multiple of 32 fail" in t.hint
            assert "The sizes that fail are also exactly those that are not a multiple of 4" in t.hint, name
    else:
        assert graded["ReduceCorrectness.SinglePassInt/1"].status is Status.PASSED
        for n in (257, 50001):
            t = graded[f"ReduceCorrectness.SinglePassInt/{n}"]
            assert re.search(r"off by -?\d{1,3}\n", t.message)
            assert "only a few values are wrong, and in this step the likeliest are the last n % 4" in t.hint


def test_06_single_pass_blocks_that_walk_the_whole_array() -> None:
    """single-pass-stride-one-block: one block (n <= 1024) is right, many count the array many times."""
    graded = grade(REDUCE, reduce_tests("SinglePass", single_pass_with(stride_one_block=True)))
    assert graded["ReduceCorrectness.SinglePassInt/257"].status is Status.PASSED
    t = graded["ReduceCorrectness.SinglePassInt/50001"]
    assert "step by the whole grid, gridDim.x * kBlock vectors, not by one block" in t.hint
    # About 25 times the sum, int or float: read as inputs counted over and over, not as junk (the H200's
    # gate had it as "values that are no input at all"); the float test names the stride itself.
    for name in ("ReduceCorrectness.SinglePass/50001", "ReduceCorrectness.SinglePassInt/50001"):
        hint = graded[name].hint
        assert "about 25 times what it should be" in hint and "no input at all" not in hint
        assert "gridDim.x * kBlock vectors, not by one block" in hint


def test_06_single_pass_flag_read_before_the_barrier() -> None:
    """single-pass-no-barrier-after-flag."""
    kernel = ("void reduce_single_pass_kernel<float>(const float *, float *, unsigned long, float *, "
              "unsigned int *)")
    t = sanitized(REDUCE, "racecheck", race_log(kernel, "06-reduce/reduce.cu:281", "06-reduce/reduce.cu:284"))
    assert t.task == "single-pass"
    assert "Thread 0 writes the __shared__ flag that says this block is last" in t.hint


@pytest.mark.parametrize("missing, words", [
    ("__threadfence() (membar.gl)", "__threadfence() goes between the store to partials[blockIdx.x] and the"),
    ("atomic counter", "hands every block a different number"),
    ("reduces its block with warp shuffles", "Reduce each block with block_reduce_sum from step 4"),
])
def test_06_single_pass_techniques(missing: str, words: str) -> None:
    """single-pass-no-publish-fence (the tests pass; the PTX has no fence before the ticket), and the rest."""
    t = grade(REDUCE, [], missing=[missing])["Techniques.single-pass"]
    assert t.category is Category.TECHNIQUE_MISSING and words in t.hint


# --- lab 06: hints that must stay away ---

def test_06_hints_stay_in_their_task_and_pattern() -> None:
    graded = grade(REDUCE, reduce_tests("Sequential", passes_of(sequential(strides=HALVING[:-1])))
                   + reduce_tests("Interleaved", passes_of(interleaved())))
    lost = graded["ReduceCorrectness.SequentialInt/257"]
    assert "the tree must run every stride 1, 2, 4" not in lost.hint  # the interleaved step's
    # The float test of the same bug reads its side from its own values: its own task's advice only.
    floats = graded["ReduceCorrectness.Sequential/257"]
    assert "check that the loop's condition" in floats.hint and "the tree must run every stride" not in floats.hint
    # A call of step 2 that never wrote *d_out is not the single pass's ticket problem.
    never = one(REDUCE, "ReduceCorrectness.SequentialInt/33", sum_failure(33, int_input(33), POISON_INT))
    assert "ticket" not in never.hint and "off by -" in never.message
    # The n % 4 hint needs the sizes' pattern: one failing size of the single pass does not get it.
    single = grade(REDUCE, reduce_tests("SinglePass", single_pass_with(stride_one_block=True)))
    assert "not a multiple of 4" not in single["ReduceCorrectness.SinglePassInt/50001"].hint
    # The grid-size hint of steps 3 and 4 is not step 1's.
    grid = one(REDUCE, "ReduceGridCorrectness.Interleaved/50001", grid_failure(50001, 256, 3, 197))
    assert "2 * kBlock" not in grid.hint
