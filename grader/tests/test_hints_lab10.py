"""The own hints of lab 10 (cooperative groups): each fires on the failure its bug really produces (the
mutants of solutions/10-cooperative-groups/mutants, the messages of the lab's test file), and not outside
its task or pattern."""

from __future__ import annotations

from grader.model.results import Category, Status
from grader.tests.lab_hints_10_11 import (COOP, POISON_INT, POISON_UNSIGNED, differ, exception, own_hints, own_texts,
                                          racecheck, value_of)
from grader.tests.test_hints import _wrong


# --- lab 10: cooperative groups ---------------------------------------------------------------------

TILE_SIZES = (0, 1, 31, 32, 33, 255)  # one block of 256 threads


def _tile_sums(n: int, mismatch: str) -> str:
    return value_of("AllEqual(expected, d_out.to_host(), seed)", mismatch, f"one sum per 32 values, n = {n}",
                     "test_cooperative.cu:107")


def test_lab_10_tile_output_index_hint_when_only_one_block_is_right() -> None:
    """tile-out-missing-block-offset: every block writes out[meta_group_rank()]."""
    at_257 = _wrong(9, 0, [(0, "16342", "731"), (8, "731", POISON_INT)], bad=2)
    at_1000 = _wrong(32, 0, [(i, str(16000 + i), str(15000 + 7 * i)) for i in range(8)])
    found = own_hints(COOP, [(f"CoopTileCorrectness.TileSums/{n}", "tile-reduce", None, "") for n in TILE_SIZES] + [
        ("CoopTileCorrectness.TileSums/257", "tile-reduce", Category.WRONG_ANSWER, _tile_sums(257, at_257)),
        ("CoopTileCorrectness.TileSums/1000", "tile-reduce", Category.WRONG_ANSWER, _tile_sums(1000, at_1000)),
    ])
    assert all("not its rank inside the block" in h for h in found)
    assert all("above one block (256) fails, from n = 257" in h for h in found)


def test_lab_10_tile_writer_lane_hint_for_a_short_tile_never_written() -> None:
    """tile-last-lane-writes: lane 31 writes, and a short last tile has none."""
    found = own_hints(COOP, [
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
    found = own_hints(COOP, [("CoopTileCorrectness.TileSums/1000", "tile-reduce", Category.WRONG_ANSWER,
                           _tile_sums(1000, _wrong(32, 31, [(31, "4127", "-1834022531")])))])
    assert "every lane of the tile must still call cg::reduce" in found[0]
    assert found[0].startswith("Only the last element is wrong")


def test_lab_10_synccheck_hints_name_the_collective_of_their_task() -> None:
    message = ("compute-sanitizer synccheck reported 1 error(s):\n  Barrier error detected. Invalid arguments in {} "
               "at cooperative.cu:{}")
    tile, vote = own_hints(COOP, [
        ("sanitizer.synccheck", "tile-reduce", Category.SANITIZER, message.format("tile_sums_kernel", 41)),
        ("sanitizer.synccheck", "vote", Category.SANITIZER, message.format("count_above_kernel", 121)),
    ])
    assert "cg::reduce is called by all 32 lanes" in tile
    assert "all 32 lanes must call __ballot_sync, __any_sync and __all_sync" in vote


BLOCK_RULE = "tolerance rel 4.41074e-06 abs 0"


def _block_sums(n: int, mismatch: str) -> str:
    return value_of("AllNear(expected, d_out.to_host(), {relative_tolerance(kBlockItems), 0.0}, seed)", mismatch,
                     f"one sum per 1024 values, n = {n}", "test_cooperative.cu:132")


def test_lab_10_block_nan_hint_for_the_shared_tile_sums() -> None:
    """block-tile-sum-slot-by-lane: every tile stores at slot 0, slots 1-7 keep the test's NaN."""
    nan_sums = differ(49, 49, 0, 48, [(i, f"{1530.5 + i:.9g}", "nan") for i in range(8)], 101012, BLOCK_RULE)
    found = own_hints(COOP, [("CoopBlockCorrectness.BlockSums/50001", "block-reduce", Category.WRONG_ANSWER,
                           _block_sums(50001, nan_sums))])
    assert "tile 0 added a shared slot that no tile had written" in found[0]
    assert "A NaN comes from a slot nobody wrote" not in found[0]  # the grader's default, less precise


def test_lab_10_block_chunk_hint_when_one_chunk_is_right() -> None:
    """block-chunk-base-threads: block b starts at b * kThreads, so the chunks overlap."""
    samples = [(i, f"{1536.25 + i:.9g}", f"{1534.75 - i:.9g}") for i in range(1, 9)]
    wrong = differ(49, 48, 1, 48, samples, 101012, BLOCK_RULE)
    found = own_hints(COOP, [(f"CoopBlockCorrectness.BlockSums/{n}", "block-reduce", None, "")
                          for n in (0, 1, 31, 32, 33, 255, 257, 1000)] + [
        ("CoopBlockCorrectness.BlockSums/50001", "block-reduce", Category.WRONG_ANSWER, _block_sums(50001, wrong)),
        ("CoopBlockCorrectness.BlockSums/1048579", "block-reduce", Category.WRONG_ANSWER,
         _block_sums(1048579, differ(1025, 1024, 1, 1024, samples, 2098168, BLOCK_RULE))),
    ])
    assert all("starting at b * kBlockItems (not b * kThreads)" in h for h in found)
    assert all("above one block chunk (1,024) fails" in h for h in found)
    assert all("not its rank inside the block" not in h for h in found)  # task 1's hint for the same sizes pattern


def test_lab_10_racecheck_hints_follow_the_kernel_that_raced() -> None:
    block, mean = own_hints(COOP, [
        ("sanitizer.racecheck", "block-reduce", Category.SANITIZER,
         racecheck("block_sums_kernel", "cooperative.cu:70", "cooperative.cu:73")),
        ("sanitizer.racecheck", "subtract-mean", Category.SANITIZER,
         racecheck("subtract_mean_kernel", "cooperative.cu:283", "cooperative.cu:285")),
    ])
    assert "block_reduce_sum needs a block.sync() between the stores and the reads" in block
    assert "between thread 0 storing the mean and the other threads reading it" in mean


def test_lab_10_block_memcheck_hint_for_reading_past_the_tile_sums() -> None:
    """block-tile0-reads-32-slots: all 32 lanes of tile 0 read s_tile_sums, which has 8 slots."""
    message = ("compute-sanitizer memcheck reported 56 error(s):\n  Invalid __shared__ read of size 4 bytes in "
               "block_sums_kernel at cooperative.cu:74 (56 times)")
    found = own_hints(COOP, [("sanitizer.memcheck", "block-reduce", Category.SANITIZER, message)])
    assert "the lanes at or above kTilesPerBlock take 0" in found[0]


def _count(n: int, expected: str, actual: str, what: str, seed: int) -> str:
    return value_of("AllEqual(std::vector<unsigned int>{expected}, d_count.to_host(), seed)",
                     _wrong(1, 0, [(0, expected, actual)]).replace("seed 7", f"seed {seed}"),
                     f"values above 0.5 among n = {n} (the count must be exact), {what}", "test_cooperative.cu:175")


def test_lab_10_count_reset_hint_for_a_count_that_kept_the_poison() -> None:
    """vote-count-no-reset (the count adds to 0xA5A5A5A5) and vote-count-n0-unset (n = 0 returns first)."""
    some = "threshold 0.5: some values are exactly 0.5"
    found = own_hints(COOP, [
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
    at_threshold, every_lane = own_hints(COOP, [
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
    return value_of(f"AllEqual({flags[2:]}, {flags}.to_host(), seed)", mismatch,
                     f"{notes[flags]}, threshold 0.5: every outcome occurs", "test_cooperative.cu:197")


def test_lab_10_vote_flag_hints() -> None:
    """vote-flags-thread0-only (only groups 0, 8, 16, 24 written) and vote-all-missing-lanes-veto."""
    unwritten = differ(32, 28, 1, 31, [(i, str(i % 2), POISON_INT) for i in (1, 2, 3, 4, 5, 6, 7, 9)], 5010)
    thread0 = _any_all("d_any", unwritten, 1000) + "\n\n" + _any_all("d_all", unwritten, 1000)
    veto = _any_all("d_all", _wrong(2, 1, [(1, "1", "0")]), 33)
    veto_one = _any_all("d_all", _wrong(1, 0, [(0, "1", "0")]), 1)
    found = own_hints(COOP, [
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
    found = own_hints(COOP, [(name, "grid-size", Category.WRONG_ANSWER, m) for m in (per_sm_only, fixed_block, no_dynamic)])
    assert "multiply the occupancy API's blocks per SM by the number of SMs" in found[0]
    assert "not about the lab's kThreads" in found[1] and "by the number of SMs" not in found[1]
    assert "pass dynamic_smem_bytes to cudaOccupancyMaxActiveBlocksPerMultiprocessor" in found[2]
    assert "by the number of SMs" not in found[2] and "kThreads" not in found[2]


def test_lab_10_grid_size_hint_when_the_full_grid_cannot_launch() -> None:
    """cooperative_grid_blocks counts more blocks than fit: the test's own cooperative launch fails."""
    message = ("Expected equality of these values:\n  err\n    Which is: 720\n  cudaSuccess\n    Which is: 0\n"
               "a cooperative launch of 4224 blocks failed: cudaErrorCooperativeLaunchTooLarge\n"
               "(at test_cooperative.cu:282)")
    found = own_hints(COOP, [("CoopGridSizeCorrectness.FullGridLaunchesAndMeets", "grid-size", Category.CUDA_ERROR,
                           message)])
    assert "counts more blocks than can be resident at once" in found[0]


COOP_LAUNCH = "cudaLaunchCooperativeKernel(kernel, dim3(static_cast<unsigned>(blocks)), dim3(kThreads), args, 0, nullptr)"
TOO_LARGE = exception("cudaErrorCooperativeLaunchTooLarge", "too many blocks in cooperative launch", COOP_LAUNCH,
                       "cooperative.cu:257")


def test_lab_10_too_large_cooperative_launch_hints_per_task() -> None:
    """coop-reduce-grid-not-capped: the grid sized from n alone, for 2^24 + 5 values."""
    reduce, mean = own_hints(COOP, [
        ("CoopReduceCorrectness.Sum/16777221", "coop-reduce", Category.CUDA_ERROR, TOO_LARGE),
        ("CoopSubtractMeanCorrectness.SubtractMean/16777221", "subtract-mean", Category.CUDA_ERROR, TOO_LARGE),
    ])
    assert "launch at most what cooperative_grid_blocks gives for coop_reduce_kernel" in reduce
    assert "size subtract_mean_kernel's grid as in task 5" in mean


def test_lab_10_cooperative_launch_hints_for_a_trap_and_a_crash() -> None:
    """A grid.sync() kernel launched with <<<...>>> traps; coop-reduce-args-not-addresses hands the runtime
    pointer values where it reads the arguments from."""
    trap = exception("cudaErrorLaunchFailure", "unspecified launch failure", "cudaDeviceSynchronize()",
                      "test_cooperative.cu:336")
    trapped, crashed = own_hints(COOP, [
        ("CoopReduceCorrectness.Sum/50001", "coop-reduce", Category.CUDA_ERROR, trap),
        ("CoopReduceCorrectness.Sum/1", "coop-reduce", Category.CRASH, "the test process was killed by SIGSEGV"),
    ])
    assert "launched with cudaLaunchCooperativeKernel: in an ordinary <<<...>>> launch" in trapped
    assert "its args array holds the address of each kernel argument" in crashed


def _sum(n: int, expected: str, actual: str, seed: int, tolerance: str) -> str:
    mismatch = differ(1, 1, 0, 0, [(0, expected, actual)], seed, f"tolerance rel {tolerance} abs 0")
    return value_of("cudalab::Near(expected, d_out.to_host()[0], {relative_tolerance(n), 0.0}, seed)", mismatch,
                     f"sum of n = {n} values in [1, 2), call 1", "test_cooperative.cu:338")


def test_lab_10_coop_reduce_wrong_sum_hints() -> None:
    """coop-reduce-block-sync-not-grid (block 0 adds NaN partials) and coop-reduce-partials-no-loop (a grid
    of 1056 blocks, of which block 0 adds the first 256 partials)."""
    nan, short = own_hints(COOP, [
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
    reduce, mean, never_ran = own_hints(COOP, [
        ("CoopReduceCorrectness.Sum/50001", "coop-reduce", Category.TIMEOUT, stopped),
        ("CoopSubtractMeanCorrectness.SubtractMean/50001", "subtract-mean", Category.TIMEOUT, stopped),
        ("CoopReduceCorrectness.Sum/1048579", "coop-reduce", Category.TIMEOUT, capped, Status.NOT_RUN),
    ])
    assert "not even in blocks other than block 0" in reduce
    assert "a bounds check that returns before the barrier deadlocks the grid" in mean
    assert not any(text in never_ran for text in own_texts(COOP))  # it never ran: no kernel hung
    assert "The whole grade ran out of time" in never_ran


MEAN_RULE = "tolerance rel 0 abs 7.39373e-06"


def _mean(n: int, mismatch: str) -> str:
    return value_of("AllNear(expected, d_out.to_host(), {0.0, abs_tol}, seed)", mismatch,
                     f"d_out[i] = d_in[i] - mean, n = {n}, mean = 1.50011", "test_cooperative.cu:372")


def test_lab_10_subtract_mean_output_hints() -> None:
    """mean-no-grid-stride (49 blocks write 12544 outputs), mean-block0-only (block 0's share only),
    mean-missing-block-sync (NaN from the scribbled s_mean) and mean-divides-by-blocks."""
    no_stride = differ(50001, 37457, 12544, 50000, [(12544 + i, f"{0.25 - i / 8:.9g}", "nan") for i in range(8)],
                        301016, MEAN_RULE)
    block0 = differ(50001, 48977, 256, 50000, [(256 + i, f"{0.25 - i / 8:.9g}", "nan") for i in range(8)],
                     301016, MEAN_RULE)  # block 0 wrote 4 x 256 values, 12544 apart
    scattered = differ(50001, 1536, 32, 49951, [(32 + i, f"{0.25 - i / 8:.9g}", "nan") for i in range(8)],
                        301016, MEAN_RULE)
    by_blocks = differ(50001, 50001, 0, 50000, [(i, f"{0.25 - i / 8:.9g}", f"{-1529.5 - i / 8:.9g}")
                                                 for i in range(8)], 301016, MEAN_RULE)
    name = "CoopSubtractMeanCorrectness.SubtractMean/50001"
    found = own_hints(COOP, [(name, "subtract-mean", Category.WRONG_ANSWER, _mean(50001, m))
                          for m in (no_stride, block0, scattered, by_blocks)])
    assert "in a grid-stride loop" in found[0] and found[0].startswith("Everything from index 12,544 on is wrong")
    assert all("every block (not only block 0) writes its share" in h for h in found[1:3])
    assert "divided by n (not by the number of blocks)" in found[3]


def test_lab_10_hints_stay_in_their_task() -> None:
    """The same failure under another task gets that task's hint or the grader's, never lab 10's for
    the wrong task; a CUDA error a lab hint does not name gets the grader's."""
    nan_sum = _sum(50001, "75013.7373", "nan", 251015, "4.76837e-06")
    invalid = exception("cudaErrorInvalidValue", "invalid argument", COOP_LAUNCH, "cooperative.cu:257")
    wrong_task, other_error = own_hints(COOP, [
        ("CoopVoteCorrectness.CountAbove/1000", "vote", Category.WRONG_ANSWER, nan_sum),
        ("CoopReduceCorrectness.Sum/50001", "coop-reduce", Category.CUDA_ERROR, invalid),
    ])
    assert "cg::this_grid().sync()" not in wrong_task
    assert not any(text in other_error for text in own_texts(COOP))
    assert "An argument out of range" in other_error


def test_lab_10_offsets_seen_in_one_test() -> None:
    """The tile and block offsets as one failing test shows them (the H200's first failures): tile 8's
    sum at slot 0, and block 0's sum right with every later one wrong."""
    tile, block = own_hints("10-cooperative-groups", [
        ("CoopTileCorrectness.TileSums/257", "tile-reduce", Category.WRONG_ANSWER,
         _wrong(9, 0, [(0, "16280", "831"), (8, "831", "-1515870811")], bad=2)),
        ("CoopBlockCorrectness.BlockSums/50001", "block-reduce", Category.WRONG_ANSWER,
         _wrong(49, 1, [(1, "1536.80467", "1538.10815"), (2, "1536.80227", "1536.53394")])),
    ])
    assert "A tile's sum landed in another tile's slot" in tile
    assert "block b must add exactly its own chunk, starting at b * kBlockItems" in block


def test_lab_10_tile_sums_written_to_one_slot_race_in_the_helper() -> None:
    """block-tile-sum-slot-by-lane on the H200: every tile's lane 0 stored at s_tile_sums[thread_rank()], slot 0.
    racecheck names block_reduce_sum (the helper, not the kernel) and two writes on one line; the helper is
    the block-reduce task's, so the finding costs that task and gets its hint."""
    from grader.tests.gtest_failures import sanitized

    helper = "block_reduce_sum(const cooperative_groups::__v1::thread_block &, float)"
    log = ("========= COMPUTE-SANITIZER\n"
           f"========= Error: Race reported between Write access at {helper}+0x1f0 in "
           "/home/s/labs/10-cooperative-groups/cooperative.cu:72\n"
           f"=========     and Write access at {helper}+0x1f0 in /home/s/labs/10-cooperative-groups/cooperative.cu:72 "
           "[4 hazards]\n=========\n========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)\n")
    t = sanitized(COOP, "racecheck", log)
    assert t.task == "block-reduce" and "tile.meta_group_rank()" in t.hint
    # A write racing a read keeps the barrier hint.
    block, = own_hints(COOP, [("sanitizer.racecheck", "block-reduce", Category.SANITIZER,
                               racecheck("block_reduce_sum", "cooperative.cu:72", "cooperative.cu:75"))])
    assert "needs a block.sync() between the stores and the reads" in block


def test_lab_10_short_tile_adds_a_value_past_the_end() -> None:
    """tile-guard-off-by-one on the H200: at n = 1 the one tile's sum is junk (2012259559 for 895)."""
    one = _wrong(1, 0, [(0, "895", "2012259559")], bad=1)
    found = own_hints(COOP, [(f"CoopTileCorrectness.TileSums/{n}", "tile-reduce", None, "") for n in (32, 64)] + [
        ("CoopTileCorrectness.TileSums/1", "tile-reduce", Category.WRONG_ANSWER, _tile_sums(1, one)),
        ("CoopTileCorrectness.TileSums/33", "tile-reduce", Category.WRONG_ANSWER,
         _tile_sums(33, _wrong(2, 1, [(1, "31", "2012259590")], bad=1)))])
    assert "the short last tile added something from past the end of the input" in found[0]
