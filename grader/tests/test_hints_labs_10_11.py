"""The own hints of labs 10 (cooperative groups) and 11 (quicksort): each fires on the failure its bug
really produces (the mutants of solutions/NN-slug/mutants, the messages of the lab's test file), and not
outside its task or pattern."""

from __future__ import annotations

from functools import lru_cache

from grader.model.labs import Lab, discover
from grader.model.results import Category, LabResult, Status
from grader.model.results import TestResult as TResult
from grader.score import hints
from grader.tests.test_hints import ROOT, _lab_hint, _wrong

COOP = "10-cooperative-groups"
QSORT = "11-quicksort"
POISON_INT = "-1515870811"  # cudalab::poison of an int: 0xA5 bytes
POISON_UNSIGNED = "2779096485"  # ... of an unsigned


@lru_cache(maxsize=None)
def _lab(name: str) -> Lab:
    return {lab.name: lab for lab in discover(ROOT)}[name]


def _hints(lab_name: str, tests: list[tuple]) -> list[str]:
    """Annotate (name, task, category, message[, status]) tests with the lab's own hints and geometry; the
    hints of those that did not pass, in order. category None: a passed test."""
    lab = _lab(lab_name)
    result = LabResult(number=lab.number, name=lab.name, title=lab.title, max_score=100)
    for name, task, category, message, *status in tests:
        state = status[0] if status else (Status.FAILED if category else Status.PASSED)
        result.tests.append(TResult(name=name, task=task, status=state, category=category, message=message))
    hints.annotate(result, hints.hints_for_lab(lab.path), geometry=lab.geometry)
    return [t.hint for t in result.tests if t.status is not Status.PASSED]


def _own_texts(lab_name: str) -> list[str]:
    return [h.text for h in hints.load_hints(_lab(lab_name).path / hints.LAB_HINTS)]


def _differ(n: int, bad: int, first: int, last: int, samples: list[tuple[int, str, str]], seed: int,
            rule: str = "exact") -> str:
    """cudalab::AllEqual / AllNear's message (common/include/cudalab/compare.hpp)."""
    lines = "".join(f"  [{i}] expected {e}, actual {a}\n" for i, e, a in samples)
    more = f"  ... and {bad - len(samples)} more" if bad > len(samples) else ""
    return (f"{bad} of {n} elements differ (seed {seed}, {rule}); mismatches span indices {first}..{last}\n"
            + lines + more)


def _value_of(expression: str, why: str, note: str, at: str) -> str:
    """EXPECT_TRUE(assertion) << note, as the grader keeps it (the location moved to the end)."""
    return f"Value of: {expression}\n  Actual: false ({why})\nExpected: true\n{note}\n(at {at})"


def _exception(error: str, description: str, expression: str, where: str) -> str:
    """A cudalab::CudaError (check.cuh) that escaped the test body."""
    return (f'C++ exception with description "CUDA error {error} ({description}) from `{expression}` at '
            f'{where}" thrown in the test body.')


def _racecheck(kernel: str, write: str, read: str) -> str:
    return (f"compute-sanitizer racecheck reported 24 error(s):\n  Shared-memory race (error) between a write at "
            f"{write} and a read at {read} in {kernel}; 8 hazards")


# --- lab 10: cooperative groups ---------------------------------------------------------------------

TILE_SIZES = (0, 1, 31, 32, 33, 255)  # one block of 256 threads


def _tile_sums(n: int, mismatch: str) -> str:
    return _value_of("AllEqual(expected, d_out.to_host(), seed)", mismatch, f"one sum per 32 values, n = {n}",
                     "test_cooperative.cu:107")


def test_lab_10_tile_output_index_hint_when_only_one_block_is_right() -> None:
    """tile-out-missing-block-offset: every block writes out[meta_group_rank()]."""
    at_257 = _wrong(9, 0, [(0, "16342", "731"), (8, "731", POISON_INT)], bad=2)
    at_1000 = _wrong(32, 0, [(i, str(16000 + i), str(15000 + 7 * i)) for i in range(8)])
    found = _hints(COOP, [(f"CoopTileCorrectness.TileSums/{n}", "tile-reduce", None, "") for n in TILE_SIZES] + [
        ("CoopTileCorrectness.TileSums/257", "tile-reduce", Category.WRONG_ANSWER, _tile_sums(257, at_257)),
        ("CoopTileCorrectness.TileSums/1000", "tile-reduce", Category.WRONG_ANSWER, _tile_sums(1000, at_1000)),
    ])
    assert all("not its rank inside the block" in h for h in found)
    assert all("above one block (256) fails, from n = 257" in h for h in found)


def test_lab_10_tile_writer_lane_hint_for_a_short_tile_never_written() -> None:
    """tile-last-lane-writes: lane 31 writes, and a short last tile has none."""
    found = _hints(COOP, [
        ("CoopTileCorrectness.TileSums/0", "tile-reduce", None, ""),
        ("CoopTileCorrectness.TileSums/1", "tile-reduce", Category.WRONG_ANSWER,
         _tile_sums(1, _wrong(1, 0, [(0, "317", POISON_INT)]))),
        ("CoopTileCorrectness.TileSums/32", "tile-reduce", None, ""),
        ("CoopTileCorrectness.TileSums/33", "tile-reduce", Category.WRONG_ANSWER,
         _tile_sums(33, _wrong(2, 1, [(1, "412", POISON_INT)]))),
        ("CoopTileCorrectness.TileSums/1000", "tile-reduce", Category.WRONG_ANSWER,
         _tile_sums(1000, _wrong(32, 31, [(31, "4127", POISON_INT)]))),
    ])
    assert all("a lane every non-empty tile has, lane 0" in h for h in found)
    assert "only sizes that are not a multiple of 32 fail" in found[1]
    assert all("not its rank inside the block" not in h for h in found)


def test_lab_10_tile_collective_hint_for_a_wrong_last_tile() -> None:
    """tile-guard-off-by-one (the lane at i == n adds the guard zone) and tile-early-return."""
    found = _hints(COOP, [("CoopTileCorrectness.TileSums/1000", "tile-reduce", Category.WRONG_ANSWER,
                           _tile_sums(1000, _wrong(32, 31, [(31, "4127", "-1834022531")])))])
    assert "every lane of the tile must still call cg::reduce" in found[0]
    assert found[0].startswith("Only the last element is wrong")


def test_lab_10_synccheck_hints_name_the_collective_of_their_task() -> None:
    message = ("compute-sanitizer synccheck reported 1 error(s):\n  Barrier error detected. Invalid arguments in {} "
               "at cooperative.cu:{}")
    tile, vote = _hints(COOP, [
        ("sanitizer.synccheck", "tile-reduce", Category.SANITIZER, message.format("tile_sums_kernel", 41)),
        ("sanitizer.synccheck", "vote", Category.SANITIZER, message.format("count_above_kernel", 121)),
    ])
    assert "cg::reduce is called by all 32 lanes" in tile
    assert "all 32 lanes must call __ballot_sync, __any_sync and __all_sync" in vote


BLOCK_RULE = "tolerance rel 4.41074e-06 abs 0"


def _block_sums(n: int, mismatch: str) -> str:
    return _value_of("AllNear(expected, d_out.to_host(), {relative_tolerance(kBlockItems), 0.0}, seed)", mismatch,
                     f"one sum per 1024 values, n = {n}", "test_cooperative.cu:132")


def test_lab_10_block_nan_hint_for_the_shared_tile_sums() -> None:
    """block-tile-sum-slot-by-lane: every tile stores at slot 0, slots 1-7 keep the test's NaN."""
    nan_sums = _differ(49, 49, 0, 48, [(i, f"{1530.5 + i:.9g}", "nan") for i in range(8)], 101012, BLOCK_RULE)
    found = _hints(COOP, [("CoopBlockCorrectness.BlockSums/50001", "block-reduce", Category.WRONG_ANSWER,
                           _block_sums(50001, nan_sums))])
    assert "tile 0 added a shared slot that no tile had written" in found[0]
    assert "A NaN comes from a slot nobody wrote" not in found[0]  # the grader's default, less precise


def test_lab_10_block_chunk_hint_when_one_chunk_is_right() -> None:
    """block-chunk-base-threads: block b starts at b * kThreads, so the chunks overlap."""
    samples = [(i, f"{1536.25 + i:.9g}", f"{1534.75 - i:.9g}") for i in range(1, 9)]
    wrong = _differ(49, 48, 1, 48, samples, 101012, BLOCK_RULE)
    found = _hints(COOP, [(f"CoopBlockCorrectness.BlockSums/{n}", "block-reduce", None, "")
                          for n in (0, 1, 31, 32, 33, 255, 257, 1000)] + [
        ("CoopBlockCorrectness.BlockSums/50001", "block-reduce", Category.WRONG_ANSWER, _block_sums(50001, wrong)),
        ("CoopBlockCorrectness.BlockSums/1048579", "block-reduce", Category.WRONG_ANSWER,
         _block_sums(1048579, _differ(1025, 1024, 1, 1024, samples, 2098168, BLOCK_RULE))),
    ])
    assert all("starting at b * kBlockItems (not b * kThreads)" in h for h in found)
    assert all("above one block chunk (1,024) fails" in h for h in found)
    assert all("not its rank inside the block" not in h for h in found)  # task 1's hint for the same sizes pattern


def test_lab_10_racecheck_hints_follow_the_kernel_that_raced() -> None:
    block, mean = _hints(COOP, [
        ("sanitizer.racecheck", "block-reduce", Category.SANITIZER,
         _racecheck("block_sums_kernel", "cooperative.cu:70", "cooperative.cu:73")),
        ("sanitizer.racecheck", "subtract-mean", Category.SANITIZER,
         _racecheck("subtract_mean_kernel", "cooperative.cu:283", "cooperative.cu:285")),
    ])
    assert "block_reduce_sum needs a block.sync() between the stores and the reads" in block
    assert "between thread 0 storing the mean and the other threads reading it" in mean


def test_lab_10_block_memcheck_hint_for_reading_past_the_tile_sums() -> None:
    """block-tile0-reads-32-slots: all 32 lanes of tile 0 read s_tile_sums, which has 8 slots."""
    message = ("compute-sanitizer memcheck reported 56 error(s):\n  Invalid __shared__ read of size 4 bytes in "
               "block_sums_kernel at cooperative.cu:74 (56 times)")
    found = _hints(COOP, [("sanitizer.memcheck", "block-reduce", Category.SANITIZER, message)])
    assert "the lanes at or above kTilesPerBlock take 0" in found[0]


def _count(n: int, expected: str, actual: str, what: str, seed: int) -> str:
    return _value_of("AllEqual(std::vector<unsigned int>{expected}, d_count.to_host(), seed)",
                     _wrong(1, 0, [(0, expected, actual)]).replace("seed 7", f"seed {seed}"),
                     f"values above 0.5 among n = {n} (the count must be exact), {what}", "test_cooperative.cu:175")


def test_lab_10_count_reset_hint_for_a_count_that_kept_the_poison() -> None:
    """vote-count-no-reset (the count adds to 0xA5A5A5A5) and vote-count-n0-unset (n = 0 returns first)."""
    some = "threshold 0.5: some values are exactly 0.5"
    found = _hints(COOP, [
        ("CoopVoteCorrectness.CountAbove/1000", "vote", Category.WRONG_ANSWER,
         _count(1000, "441", "2779096926", some, 4010)),
        ("CoopVoteCorrectness.CountAbove/0", "vote", Category.WRONG_ANSWER, _count(0, "0", POISON_UNSIGNED, some, 1010)),
        ("CoopVoteCorrectness.CountAboveAllAtThreshold/257", "vote", Category.WRONG_ANSWER,
         _count(257, "0", POISON_UNSIGNED, "every value equals the threshold", 1010)),
    ])
    assert all("count_above must set the count to 0 itself" in h for h in found)


def test_lab_10_threshold_hint_only_in_the_all_at_threshold_test() -> None:
    """vote-count-ge-threshold counts the values equal to the threshold; vote-count-every-lane-adds counts
    each warp 32 times (441 x 32), which the threshold hint must not claim."""
    at_threshold, every_lane = _hints(COOP, [
        ("CoopVoteCorrectness.CountAboveAllAtThreshold/257", "vote", Category.WRONG_ANSWER,
         _count(257, "0", "257", "every value equals the threshold", 1010)),
        ("CoopVoteCorrectness.CountAbove/1000", "vote", Category.WRONG_ANSWER,
         _count(1000, "441", "14112", "threshold 0.5: some values are exactly 0.5", 4010)),
    ])
    assert "'above' means strictly greater (>)" in at_threshold
    assert "if every lane adds it, the warp counts 32 times" in every_lane
    assert "strictly greater" not in every_lane and "set the count to 0" not in every_lane


def _any_all(flags: str, mismatch: str, n: int) -> str:
    notes = {"d_any": "d_any (1 if some value of the group is above)",
             "d_all": "d_all (1 if every value of the group is above)"}
    return _value_of(f"AllEqual({flags[2:]}, {flags}.to_host(), seed)", mismatch,
                     f"{notes[flags]}, threshold 0.5: every outcome occurs", "test_cooperative.cu:197")


def test_lab_10_vote_flag_hints() -> None:
    """vote-flags-thread0-only (only groups 0, 8, 16, 24 written) and vote-all-missing-lanes-veto."""
    unwritten = _differ(32, 28, 1, 31, [(i, str(i % 2), POISON_INT) for i in (1, 2, 3, 4, 5, 6, 7, 9)], 5010)
    thread0 = _any_all("d_any", unwritten, 1000) + "\n\n" + _any_all("d_all", unwritten, 1000)
    veto = _any_all("d_all", _wrong(2, 1, [(1, "1", "0")]), 33)
    veto_one = _any_all("d_all", _wrong(1, 0, [(0, "1", "0")]), 1)
    found = _hints(COOP, [
        ("CoopVoteCorrectness.AnyAll/1000", "vote", Category.WRONG_ANSWER, thread0),
        ("CoopVoteCorrectness.AnyAll/33", "vote", Category.WRONG_ANSWER, veto),
        ("CoopVoteCorrectness.AnyAll/1", "vote", Category.WRONG_ANSWER, veto_one),
    ])
    assert "lane 0 of the warp, not thread 0 of the block" in found[0]
    assert all("their vote must be the neutral one, true" in h for h in found[1:])


def _grid_size(*failures: tuple[str, int, int]) -> str:
    """EXPECT_EQ(cooperative_grid_blocks(...), expected) << name << ": " << per_sm << " blocks per SM x " ...,
    once per probe that failed: (probe, blocks per SM, what cooperative_grid_blocks returned), 132 SMs."""
    return "\n\n".join(
        f"Expected equality of these values:\n  cooperative_grid_blocks(p.kernel, p.threads, p.dynamic_smem)\n"
        f"    Which is: {got}\n  expected\n    Which is: {per_sm * 132}\n{name}: {per_sm} blocks per SM x 132 SMs\n"
        f"(at test_cooperative.cu:262)" for name, per_sm, got in failures)


LIGHT_128 = "probe_light_kernel, 128 threads"
LIGHT_1024 = "probe_light_kernel, 1024 threads"
LIGHT_DYN = "probe_light_kernel, 256 threads, 40 KiB dynamic shared memory"
HEAVY = "probe_heavy_kernel (40 KiB static shared memory), 256 threads"
HEAVY_DYN = "probe_heavy_kernel, 256 threads, 6 KiB dynamic shared memory"


def test_lab_10_grid_size_hints_tell_the_three_bugs_apart() -> None:
    per_sm_only = _grid_size((LIGHT_128, 16, 16), (LIGHT_1024, 2, 2), (LIGHT_DYN, 5, 5), (HEAVY, 5, 5),
                             (HEAVY_DYN, 4, 4))
    fixed_block = _grid_size((LIGHT_128, 16, 1056), (LIGHT_1024, 2, 1056))
    no_dynamic = _grid_size((LIGHT_DYN, 5, 1056), (HEAVY_DYN, 4, 660))
    name = "CoopGridSizeCorrectness.MatchesTheOccupancyApi"
    found = _hints(COOP, [(name, "grid-size", Category.WRONG_ANSWER, m) for m in (per_sm_only, fixed_block, no_dynamic)])
    assert "multiply the occupancy API's blocks per SM by the number of SMs" in found[0]
    assert "not about the lab's kThreads" in found[1] and "by the number of SMs" not in found[1]
    assert "pass dynamic_smem_bytes to cudaOccupancyMaxActiveBlocksPerMultiprocessor" in found[2]
    assert "by the number of SMs" not in found[2] and "kThreads" not in found[2]


def test_lab_10_grid_size_hint_when_the_full_grid_cannot_launch() -> None:
    """cooperative_grid_blocks counts more blocks than fit: the test's own cooperative launch fails."""
    message = ("Expected equality of these values:\n  err\n    Which is: 720\n  cudaSuccess\n    Which is: 0\n"
               "a cooperative launch of 4224 blocks failed: cudaErrorCooperativeLaunchTooLarge\n"
               "(at test_cooperative.cu:282)")
    found = _hints(COOP, [("CoopGridSizeCorrectness.FullGridLaunchesAndMeets", "grid-size", Category.CUDA_ERROR,
                           message)])
    assert "counts more blocks than can be resident at once" in found[0]


COOP_LAUNCH = "cudaLaunchCooperativeKernel(kernel, dim3(static_cast<unsigned>(blocks)), dim3(kThreads), args, 0, nullptr)"
TOO_LARGE = _exception("cudaErrorCooperativeLaunchTooLarge", "too many blocks in cooperative launch", COOP_LAUNCH,
                       "cooperative.cu:257")


def test_lab_10_too_large_cooperative_launch_hints_per_task() -> None:
    """coop-reduce-grid-not-capped: the grid sized from n alone, for 2^24 + 5 values."""
    reduce, mean = _hints(COOP, [
        ("CoopReduceCorrectness.Sum/16777221", "coop-reduce", Category.CUDA_ERROR, TOO_LARGE),
        ("CoopSubtractMeanCorrectness.SubtractMean/16777221", "subtract-mean", Category.CUDA_ERROR, TOO_LARGE),
    ])
    assert "launch at most what cooperative_grid_blocks gives for coop_reduce_kernel" in reduce
    assert "size subtract_mean_kernel's grid as in task 5" in mean


def test_lab_10_cooperative_launch_hints_for_a_trap_and_a_crash() -> None:
    """A grid.sync() kernel launched with <<<...>>> traps; coop-reduce-args-not-addresses hands the runtime
    pointer values where it reads the arguments from."""
    trap = _exception("cudaErrorLaunchFailure", "unspecified launch failure", "cudaDeviceSynchronize()",
                      "test_cooperative.cu:336")
    trapped, crashed = _hints(COOP, [
        ("CoopReduceCorrectness.Sum/50001", "coop-reduce", Category.CUDA_ERROR, trap),
        ("CoopReduceCorrectness.Sum/1", "coop-reduce", Category.CRASH, "the test process was killed by SIGSEGV"),
    ])
    assert "launched with cudaLaunchCooperativeKernel: in an ordinary <<<...>>> launch" in trapped
    assert "its args array holds the address of each kernel argument" in crashed


def _sum(n: int, expected: str, actual: str, seed: int, tolerance: str) -> str:
    mismatch = _differ(1, 1, 0, 0, [(0, expected, actual)], seed, f"tolerance rel {tolerance} abs 0")
    return _value_of("cudalab::Near(expected, d_out.to_host()[0], {relative_tolerance(n), 0.0}, seed)", mismatch,
                     f"sum of n = {n} values in [1, 2), call 1", "test_cooperative.cu:338")


def test_lab_10_coop_reduce_wrong_sum_hints() -> None:
    """coop-reduce-block-sync-not-grid (block 0 adds NaN partials) and coop-reduce-partials-no-loop (a grid
    of 1056 blocks, of which block 0 adds the first 256 partials)."""
    nan, short = _hints(COOP, [
        ("CoopReduceCorrectness.Sum/50001", "coop-reduce", Category.WRONG_ANSWER,
         _sum(50001, "75013.7373", "nan", 251015, "4.76837e-06")),
        ("CoopReduceCorrectness.Sum/16777221", "coop-reduce", Category.WRONG_ANSWER,
         _sum(16777221, "25165831.3", "6100917.5", 83887115, "5.00679e-06")),
    ])
    assert "the whole grid must meet at cg::this_grid().sync()" in nan
    assert "looping when the grid has more blocks than a block has threads" in short
    assert "Every element is wrong" not in short  # the grader's default for mismatch:all, about arrays


def test_lab_10_timeout_hints_of_the_cooperative_tasks() -> None:
    """coop-reduce-return-before-sync: the blocks that return never arrive at grid.sync()."""
    stopped = "the test did not finish within 300 s and was stopped"
    capped = "the grade reached its global time limit (3600 s) before this test could run"
    reduce, mean, never_ran = _hints(COOP, [
        ("CoopReduceCorrectness.Sum/50001", "coop-reduce", Category.TIMEOUT, stopped),
        ("CoopSubtractMeanCorrectness.SubtractMean/50001", "subtract-mean", Category.TIMEOUT, stopped),
        ("CoopReduceCorrectness.Sum/1048579", "coop-reduce", Category.TIMEOUT, capped, Status.NOT_RUN),
    ])
    assert "not even in blocks other than block 0" in reduce
    assert "a bounds check that returns before the barrier deadlocks the grid" in mean
    assert not any(text in never_ran for text in _own_texts(COOP))  # it never ran: no kernel hung
    assert "The whole grade ran out of time" in never_ran


MEAN_RULE = "tolerance rel 0 abs 7.39373e-06"


def _mean(n: int, mismatch: str) -> str:
    return _value_of("AllNear(expected, d_out.to_host(), {0.0, abs_tol}, seed)", mismatch,
                     f"d_out[i] = d_in[i] - mean, n = {n}, mean = 1.50011", "test_cooperative.cu:372")


def test_lab_10_subtract_mean_output_hints() -> None:
    """mean-no-grid-stride (49 blocks write 12544 outputs), mean-block0-only (block 0's share only),
    mean-missing-block-sync (NaN from the scribbled s_mean) and mean-divides-by-blocks."""
    no_stride = _differ(50001, 37457, 12544, 50000, [(12544 + i, f"{0.25 - i / 8:.9g}", "nan") for i in range(8)],
                        301016, MEAN_RULE)
    block0 = _differ(50001, 48977, 256, 50000, [(256 + i, f"{0.25 - i / 8:.9g}", "nan") for i in range(8)],
                     301016, MEAN_RULE)  # block 0 wrote 4 x 256 values, 12544 apart
    scattered = _differ(50001, 1536, 32, 49951, [(32 + i, f"{0.25 - i / 8:.9g}", "nan") for i in range(8)],
                        301016, MEAN_RULE)
    by_blocks = _differ(50001, 50001, 0, 50000, [(i, f"{0.25 - i / 8:.9g}", f"{-1529.5 - i / 8:.9g}")
                                                 for i in range(8)], 301016, MEAN_RULE)
    name = "CoopSubtractMeanCorrectness.SubtractMean/50001"
    found = _hints(COOP, [(name, "subtract-mean", Category.WRONG_ANSWER, _mean(50001, m))
                          for m in (no_stride, block0, scattered, by_blocks)])
    assert "in a grid-stride loop" in found[0] and found[0].startswith("Everything from index 12,544 on is wrong")
    assert all("every block (not only block 0) writes its share" in h for h in found[1:3])
    assert "divided by n (not by the number of blocks)" in found[3]


def test_lab_10_hints_stay_in_their_task() -> None:
    """The same failure under another task gets that task's hint or the grader's, never lab 10's for
    the wrong task; a CUDA error a lab hint does not name gets the grader's."""
    nan_sum = _sum(50001, "75013.7373", "nan", 251015, "4.76837e-06")
    invalid = _exception("cudaErrorInvalidValue", "invalid argument", COOP_LAUNCH, "cooperative.cu:257")
    wrong_task, other_error = _hints(COOP, [
        ("CoopVoteCorrectness.CountAbove/1000", "vote", Category.WRONG_ANSWER, nan_sum),
        ("CoopReduceCorrectness.Sum/50001", "coop-reduce", Category.CUDA_ERROR, invalid),
    ])
    assert "cg::this_grid().sync()" not in wrong_task
    assert not any(text in other_error for text in _own_texts(COOP))
    assert "An argument out of range" in other_error


# --- lab 11: quicksort ------------------------------------------------------------------------------

BLOCK_SORT_SIZES = (0, 1, 2, 31, 32, 33, 1000, 1024, 1025, 4097, 8191, 8192)


def _sorted_keys(n: int, mismatch: str, note: str = "") -> str:
    return _value_of("cudalab::DeviceAllEqual(d_expected, d_out, seed)", mismatch, note or f"block_sort of n = {n}",
                     "test_quicksort.cu:161")


def test_lab_11_block_sort_hints_by_what_the_output_holds() -> None:
    """bitonic-guard-hi-le-m: slot m (a zeroed shared slot) takes part, every key moves one place up;
    sort-small-missing-load-sync: comparators read slots still 0; bitonic-no-mirror-step: not sorted."""
    keys = [4295, 8623, 12977, 21003, 30011, 41234, 52345, 60001, 70123]
    shifted = _wrong(1000, 0, [(i, str(keys[i]), str(keys[i - 1]) if i else "0") for i in range(8)])
    zeros = _differ(8192, 301, 0, 8191, [(i, str(keys[i]), "0") for i in range(8)], 19203)
    unsorted = _differ(1000, 812, 3, 998, [(3 + i, str(keys[i]), str(keys[8 - i])) for i in range(8)], 12011)
    found = _hints(QSORT, [
        ("BlockSortCorrectness.Random/1000", "block-sort", Category.WRONG_ANSWER, _sorted_keys(1000, shifted)),
        ("BlockSortCorrectness.Random/8192", "block-sort", Category.WRONG_ANSWER, _sorted_keys(8192, zeros)),
        ("BlockSortCorrectness.Sorted/1000", "block-sort", Category.WRONG_ANSWER, _sorted_keys(1000, unsorted)),
    ])
    assert "skip every comparator whose hi is m or more" in found[0]
    assert "inclusive and exclusive" not in found[0].split(".", 1)[1]  # the grader's shift hint is about scans
    assert "a comparator read a slot before its key was loaded" in found[1]
    assert "Each stage k starts with the mirror pass" in found[2]


def test_lab_11_block_sort_comparator_loop_hint_above_2048_keys() -> None:
    """bitonic-one-comparator-per-thread: comparators past the block's 1024 threads are never applied."""
    wrong = _differ(8192, 7890, 12, 8191, [(12 + i, str(6207912 + i), str(9876543 - i)) for i in range(8)], 19203)
    found = _hints(QSORT, [(f"BlockSortCorrectness.Random/{n}", "block-sort", None, "") for n in BLOCK_SORT_SIZES[:9]]
                   + [(f"BlockSortCorrectness.Random/{n}", "block-sort", Category.WRONG_ANSWER, _sorted_keys(n, wrong))
                      for n in (4097, 8191, 8192)])
    assert all("each thread must loop over its comparators" in h for h in found)
    assert all("mirror pass" not in h for h in found)


def test_lab_11_racecheck_hints_of_the_block_sort_and_the_partition() -> None:
    block_sort, partition = _hints(QSORT, [
        ("sanitizer.racecheck", "block-sort", Category.SANITIZER,
         _racecheck("block_sort_kernel", "quicksort.cu:61", "quicksort.cu:60")),
        ("sanitizer.racecheck", "partition", Category.SANITIZER,
         _racecheck("partition_kernel", "quicksort.cu:140", "quicksort.cu:146")),
    ])
    assert "a __syncthreads() after every (k, j) step" in block_sort
    assert "separate staging in s_keys from copying out" in partition


def _partition(n: int, why: str, pivot_expr: str = "key_at(d_keys, n / 2)", seed_expr: str = "kSeed + 5 * n") -> str:
    return f"Value of: check_partition(d_keys, {pivot_expr}, {seed_expr})\n  Actual: false ({why})\nExpected: true\n" \
           "(at test_quicksort.cu:214)"


def test_lab_11_partition_hints_for_the_counts_and_the_guard() -> None:
    """partition-greater-begin-off (writes past the end), partition-tail-as-zero (the 1048 missing keys of
    the last tile count as less) and partition-pack-8-bits (less overflows into greater)."""
    past_end = ("out-of-bounds write: a kernel changed memory outside the partitioned keys (1000 element(s) of 4 "
                "bytes): 1996 byte(s) past its end (the first at byte 0 past the end). Check the bounds guard of every "
                "thread that writes it.")
    tail = "partition_three_way returned less = 1548, greater = 499; expected 500 and 499 (n = 1000, pivot 2151234567)"
    packed = ("partition_three_way returned less = 254, greater = 1028; expected 1022 and 1025 (n = 2048, pivot "
              "2143998713)")
    found = _hints(QSORT, [(f"PartitionCorrectness.ElementPivot/{n}", "partition", None, "") for n in (1, 2, 31, 32, 33)]
                   + [("PartitionCorrectness.ElementPivot/1000", "partition", Category.WRONG_ANSWER, _partition(1000, m))
                      for m in (past_end, tail)]
                   + [("PartitionCorrectness.ElementPivot/2048", "partition", Category.WRONG_ANSWER,
                       _partition(2048, packed))])
    assert "a block's greater keys must end where the slots already taken at the back begin" in found[0]
    assert "Only the less count is off" in found[1]
    assert "8 bits are too few" in found[2] and "Only the less count" not in found[2]


def _side(side: str, mismatch: str) -> str:
    what = {"<": "d_out[0, less) is not exactly the keys < pivot (shown sorted):",
            ">": "d_out[n - greater, n) is not exactly the keys > pivot (shown sorted):"}[side]
    return f"{what}\n{mismatch}"


def test_lab_11_partition_side_hints() -> None:
    """partition-staging-greater-no-offset: the counts are right and the less side holds greater keys; a
    partition whose blocks take their bases from the block index: right for one tile only."""
    staged = _side("<", _differ(500, 380, 120, 499, [(120 + i, str(1000 + i), str(3000000000 + i)) for i in range(8)],
                                5011))
    tiles = _side(">", _differ(1024, 1024, 0, 1023, [(i, str(2200000000 + i), POISON_UNSIGNED) for i in range(8)], 15256))
    one_tile = _hints(QSORT, [("PartitionCorrectness.ElementPivot/1000", "partition", Category.WRONG_ANSWER,
                               _partition(1000, staged))])
    many_tiles = _hints(QSORT, [(f"PartitionCorrectness.ElementPivot/{n}", "partition", None, "")
                                for n in (1, 2, 31, 32, 33, 1000, 2047, 2048)]
                        + [(f"PartitionCorrectness.ElementPivot/{n}", "partition", Category.WRONG_ANSWER,
                            _partition(n, tiles)) for n in (2049, 100003)])
    assert "stage the less keys at the front of s_keys" in one_tile[0]
    assert all("takes its slots from the return value of one atomicAdd per side" in h for h in many_tiles)
    assert all("stage the less keys" not in h for h in many_tiles)


def test_lab_11_cdp1_device_synchronize_hint() -> None:
    """Old course notes call cudaDeviceSynchronize() in device code; nvcc 13 rejects it for sm_90."""
    error = ('lab11_student_object did not build (compile error: labs/11-quicksort/quicksort.cu(236): error: calling a '
             '__host__ function("cudaDeviceSynchronize") from a __device__ function("schedule_segment") is not allowed)')
    recursion, block_sort = _hints(QSORT, [
        ("QuicksortCorrectness.Random/100003", "recursion", Category.COMPILE_ERROR, error, Status.NOT_RUN),
        ("BlockSortCorrectness.Random/1000", "block-sort", Category.COMPILE_ERROR, error, Status.NOT_RUN),
    ])
    assert "has no cudaDeviceSynchronize() in device code" in recursion
    assert "cudaStreamTailLaunch" in recursion
    assert "fix the first error in the compiler output" in block_sort  # the grader's, outside the task


def _quicksort(n: int, mismatch: str) -> str:
    return _value_of("cudalab::DeviceAllEqual(sorted_copy(d_keys.data(), n), d_out, seed)", mismatch,
                     f"quicksort of n = {n}", "test_quicksort.cu:311")


def test_lab_11_single_key_and_never_written_hints() -> None:
    """schedule-skips-single-key (n = 1 is never copied), leaves-fire-and-forget (the leaf sort runs before
    the tree records its leaves) and equal-run-in-target-buffer (the pivot run goes to scratch)."""
    one_key = ("Expected equality of these values:\n  d_out.to_host()[0]\n    Which is: 2779096485\n  0x0BADCAFEu\n"
               "    Which is: 195939070\nquicksort with n = 1 must copy the key to the output\n(at test_quicksort.cu:333)")
    unsorted = _differ(100003, 99890, 0, 100002, [(i, str(41907 + 97 * i), POISON_UNSIGNED) for i in range(8)], 1111044)
    pivot_run = _wrong(100003, 50001, [(50001, "2147480001", POISON_UNSIGNED)], bad=1)
    single = _hints(QSORT, [("QuicksortEdgeCorrectness.ZeroKeysWriteNothingOneKeyIsCopied", "recursion",
                             Category.WRONG_ANSWER, one_key)])
    tree = _lab_hint(QSORT, [(f"QuicksortCorrectness.Random/{n}", "recursion", "") for n in (1000, 8191, 8192)] + [
        ("QuicksortCorrectness.Random/8193", "recursion", _quicksort(8193, unsorted)),
        ("QuicksortCorrectness.Random/100003", "recursion", _quicksort(100003, unsorted)),
        ("QuicksortCorrectness.FewUnique/100003", "recursion", _quicksort(100003, pivot_run)),
    ])
    assert "record a leaf for every non-empty segment, one key included" in single[0]
    assert all("that it fills the pivot run in ws.out" in h for h in tree)
    assert all("larger ones are partitioned first" not in h for h in tree)  # the lab's broader sizes hint


PENDING = "launch failed because launch would exceed cudaLimitDevRuntimePendingLaunchCount"


def _pending(where: str = "quicksort.cu:402") -> str:
    return _exception("cudaErrorLaunchPendingCountExceeded", PENDING, "a device-side launch in the quicksort tree",
                      where)


def test_lab_11_pending_launch_hints_by_size_and_task() -> None:
    """At 2^24 keys a correct tree outgrows the default pool (pending-limit-never-raised); at 100003 keys
    only a tree that launches 32 grids per segment does (schedule-every-lane-launches)."""
    found = _hints(QSORT, [
        ("QuicksortCorrectness.Random/16777216", "recursion", Category.CUDA_ERROR, _pending()),
        ("QuicksortCorrectness.Random/100003", "recursion", Category.CUDA_ERROR, _pending()),
        ("QuicksortLimitsCorrectness.FromDefaultPendingLimit/67108864", "limits", Category.CUDA_ERROR, _pending()),
        ("QuicksortPendingLimitCorrectness.RaisedFromAPoolOfOne", "limits", Category.CUDA_ERROR, _pending()),
    ])
    assert "more grids than the default pool of 2048 pending launches" in found[0]
    assert "only lane 0 of the scheduling warp may take a node" in found[1] and "default pool" not in found[1]
    assert all("read cudaLimitDevRuntimePendingLaunchCount with cudaDeviceGetLimit" in h for h in found[2:])
    assert all("lane 0" not in h for h in found[2:])


def test_lab_11_leaf_list_overflow_hint_is_not_the_host_allocation_one() -> None:
    """schedule-leaf-every-lane: push_leaf records cudaErrorMemoryAllocation; a failing cudaMalloc on the
    host keeps the grader's hint."""
    oom = "out of memory"
    device, host = _hints(QSORT, [
        ("QuicksortCorrectness.Random/1048576", "recursion", Category.CUDA_ERROR,
         _exception("cudaErrorMemoryAllocation", oom, "a device-side launch in the quicksort tree", "quicksort.cu:402")),
        ("QuicksortCorrectness.Random/16777216", "recursion", Category.CUDA_ERROR,
         _exception("cudaErrorMemoryAllocation", oom, "cudaMalloc(&data_, bytes())", "device_buffer.cuh:22")),
    ])
    assert "This error comes from push_leaf" in device
    assert "push_leaf" not in host and "Out of device memory" in host


def test_lab_11_device_error_reporting_hints() -> None:
    """check-launch-only-prints / host-ignores-device-error (nothing thrown), and a throw of the wrong code."""
    returned = ("Value of: thrown\n  Actual: false\nExpected: true\nquicksort with a pending-launch limit of 1 returned "
                "normally: device-side launch failures must be recorded on the device and thrown as cudalab::CudaError "
                "on the host\n(at test_quicksort.cu:440)")
    other_code = ("Value of: code == cudaErrorLaunchPendingCountExceeded || code == cudaErrorLaunchOutOfResources\n"
                  "  Actual: false\nExpected: true\nquicksort threw cudaErrorUnknown; a full pending-launch pool "
                  "reports cudaErrorLaunchPendingCountExceeded\n(at test_quicksort.cu:442)")
    name = "QuicksortErrorsCorrectness.ReportsFailedDeviceLaunch"
    nothing, wrong_code = _hints(QSORT, [(name, "limits", Category.WRONG_ANSWER, returned),
                                         (name, "limits", Category.CUDA_ERROR, other_code)])
    assert "check_launch must record it with record_error" in nothing
    assert "throw cudalab::CudaError with the code record_error kept" in wrong_code


def test_lab_11_pending_limit_setting_hints() -> None:
    """pending-limit-only-raised (700 is never set) and pending-limit-never-raised (the pool stays at 1)."""
    lowered = ("Expected equality of these values:\n  pending_limit()\n    Which is: 3000\n"
               "  static_cast<std::size_t>(kSmaller)\n    Which is: 700\npending_launch_limit = 700 must lower the pool "
               "too: the caller asked for exactly that\n(at test_quicksort.cu:510)")
    raised = ("Expected: (pending_limit()) > (std::size_t{1}), actual: 1 vs 1\nquicksort must raise the pool as far "
              "as n needs\n(at test_quicksort.cu:523)")
    exact, from_one = _hints(QSORT, [
        ("QuicksortPendingLimitCorrectness.ExplicitLimitIsSetExactly", "limits", Category.WRONG_ANSWER, lowered),
        ("QuicksortPendingLimitCorrectness.RaisedFromAPoolOfOne", "limits", Category.WRONG_ANSWER, raised),
    ])
    assert "whether it is above or below the current limit" in exact
    assert "quicksort left the pool of pending launches at 1" in from_one


def test_lab_11_depth_limit_and_fallback_hints() -> None:
    """fallback-no-copy (the leaf is sorted in the poisoned output), fallback-missing-copy-sync (the network
    starts before the slow half of the block has copied), and unchecked launches at 2^26 keys."""
    poisoned = _differ(60001, 60001, 0, 60000, [(i, str(71234 + 89 * i), POISON_UNSIGNED) for i in range(8)], 11032)
    raced = _differ(60001, 41230, 3, 59998, [(3 + i, str(215000 + 31 * i), str(216000 + 29 * i)) for i in range(8)],
                    71037)
    unrun = _differ(67108864, 40000000, 0, 67108863, [(i, str(64 + i), POISON_UNSIGNED) for i in range(8)], 11052)
    depth = _value_of("cudalab::DeviceAllEqual(sorted_copy(d_keys.data(), n), d_out, seed)", poisoned,
                      "quicksort of n = 60001 with max_depth = 0", "test_quicksort.cu:381")
    fallback = "quicksort of n = 60001 with max_depth = 0 (one leaf, sorted by the fallback), round 1"
    found = _hints(QSORT, [
        ("QuicksortDepthCorrectness.Random/max_depth0", "limits", Category.WRONG_ANSWER, depth),
        ("QuicksortFallbackCorrectness.UnevenCopy/60001", "limits", Category.WRONG_ANSWER,
         _sorted_keys(60001, poisoned, fallback)),
        ("QuicksortFallbackCorrectness.UnevenCopy/60001", "limits", Category.WRONG_ANSWER,
         _sorted_keys(60001, raced, fallback)),
        ("QuicksortLimitsCorrectness.FromDefaultPendingLimit/67108864", "limits", Category.WRONG_ANSWER,
         _quicksort(67108864, unrun)),
    ])
    assert all("the else branch of sort_leaves_kernel must copy such a leaf to dst" in h for h in found[:2])
    assert "a __syncthreads() must separate the copy from the first comparator" in found[2]
    assert "check_launch must record every refused launch" in found[3] and "else branch" not in found[3]


def test_lab_11_hints_stay_in_their_task() -> None:
    """A shifted side of a partition is not a bitonic guard bug: the block sort's hint stays in its task."""
    shifted = _side("<", _wrong(500, 0, [(i, str(1000 * (i + 1)), str(1000 * i)) for i in range(8)]))
    found = _hints(QSORT, [("PartitionCorrectness.Sorted/1000", "partition", Category.WRONG_ANSWER,
                            _partition(1000, shifted, "key_at(d_keys, n / 2)", "kSeed + 9 * n"))])
    assert "hi is m or more" not in found[0]
    assert "stage the less keys at the front of s_keys" in found[0]


# --- both labs ---------------------------------------------------------------------------------------

def test_labs_10_and_11_have_at_least_eight_hints_each_keyed_on_a_public_task() -> None:
    for name in (COOP, QSORT):
        lab = _lab(name)
        own = hints.load_hints(lab.path / hints.LAB_HINTS)
        public = {t.id for t in lab.tasks if not t.hidden}
        assert len(own) >= 8, name
        assert all(h.task in public for h in own), name



def test_lab_10_offsets_seen_in_one_test() -> None:
    """The tile and block offsets as one failing test shows them (the H200's first failures): tile 8's
    sum at slot 0, and block 0's sum right with every later one wrong."""
    tile, block = _hints("10-cooperative-groups", [
        ("CoopTileCorrectness.TileSums/257", "tile-reduce", Category.WRONG_ANSWER,
         _wrong(9, 0, [(0, "16280", "831"), (8, "831", "-1515870811")], bad=2)),
        ("CoopBlockCorrectness.BlockSums/50001", "block-reduce", Category.WRONG_ANSWER,
         _wrong(49, 1, [(1, "1536.80467", "1538.10815"), (2, "1536.80227", "1536.53394")])),
    ])
    assert "A tile's sum landed in another tile's slot" in tile
    assert "block b must add exactly its own chunk, starting at b * kBlockItems" in block
