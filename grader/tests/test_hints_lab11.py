"""The own hints of lab 11 (quicksort): each fires on the failure its bug really produces (the mutants of
solutions/11-quicksort/mutants, the messages of the lab's test file), and not outside its task or
pattern."""

from __future__ import annotations

from grader.model.results import Category, Status
from grader.score import hints
from grader.tests.lab_hints_10_11 import (COOP, POISON_UNSIGNED, QSORT, differ, exception, lab_of, own_hints,
                                          value_of)
from grader.tests.test_hints import _lab_hint, _wrong


# --- lab 11: quicksort ------------------------------------------------------------------------------

BLOCK_SORT_SIZES = (0, 1, 2, 31, 32, 33, 1000, 1024, 1025, 4097, 8191, 8192)


def _sorted_keys(n: int, mismatch: str, note: str = "") -> str:
    return value_of("cudalab::DeviceAllEqual(d_expected, d_out, seed)", mismatch, note or f"block_sort of n = {n}",
                     "test_quicksort.cu:161")


def test_lab_11_block_sort_hints_by_what_the_output_holds() -> None:
    """bitonic-guard-hi-le-m: slot m (a zeroed shared slot) takes part, every key moves one place up;
    sort-small-missing-load-sync: comparators read slots still 0; bitonic-no-mirror-step: not sorted."""
    keys = [4295, 8623, 12977, 21003, 30011, 41234, 52345, 60001, 70123]
    shifted = _wrong(1000, 0, [(i, str(keys[i]), str(keys[i - 1]) if i else "0") for i in range(8)])
    zeros = differ(8192, 301, 0, 8191, [(i, str(keys[i]), "0") for i in range(8)], 19203)
    unsorted = differ(1000, 812, 3, 998, [(3 + i, str(keys[i]), str(keys[8 - i])) for i in range(8)], 12011)
    found = own_hints(QSORT, [
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
    wrong = differ(8192, 7890, 12, 8191, [(12 + i, str(6207912 + i), str(9876543 - i)) for i in range(8)], 19203)
    found = own_hints(QSORT, [(f"BlockSortCorrectness.Random/{n}", "block-sort", None, "") for n in BLOCK_SORT_SIZES[:9]]
                   + [(f"BlockSortCorrectness.Random/{n}", "block-sort", Category.WRONG_ANSWER, _sorted_keys(n, wrong))
                      for n in (4097, 8191, 8192)])
    assert all("each thread must loop over its comparators" in h for h in found)
    assert all("mirror pass" not in h for h in found)


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
    found = own_hints(QSORT, [(f"PartitionCorrectness.ElementPivot/{n}", "partition", None, "") for n in (1, 2, 31, 32, 33)]
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
    staged = _side("<", differ(500, 380, 120, 499, [(120 + i, str(1000 + i), str(3000000000 + i)) for i in range(8)],
                                5011))
    tiles = _side(">", differ(1024, 1024, 0, 1023, [(i, str(2200000000 + i), POISON_UNSIGNED) for i in range(8)], 15256))
    one_tile = own_hints(QSORT, [("PartitionCorrectness.ElementPivot/1000", "partition", Category.WRONG_ANSWER,
                               _partition(1000, staged))])
    many_tiles = own_hints(QSORT, [(f"PartitionCorrectness.ElementPivot/{n}", "partition", None, "")
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
    recursion, block_sort = own_hints(QSORT, [
        ("QuicksortCorrectness.Random/100003", "recursion", Category.COMPILE_ERROR, error, Status.NOT_RUN),
        ("BlockSortCorrectness.Random/1000", "block-sort", Category.COMPILE_ERROR, error, Status.NOT_RUN),
    ])
    assert "has no cudaDeviceSynchronize() in device code" in recursion
    assert "cudaStreamTailLaunch" in recursion
    assert "fix the first error in the compiler output" in block_sort  # the grader's, outside the task


def _quicksort(n: int, mismatch: str) -> str:
    return value_of("cudalab::DeviceAllEqual(sorted_copy(d_keys.data(), n), d_out, seed)", mismatch,
                     f"quicksort of n = {n}", "test_quicksort.cu:311")


def test_lab_11_single_key_and_never_written_hints() -> None:
    """schedule-skips-single-key (n = 1 is never copied), leaves-fire-and-forget (the leaf sort runs before
    the tree records its leaves) and equal-run-in-target-buffer (the pivot run goes to scratch)."""
    one_key = ("Expected equality of these values:\n  d_out.to_host()[0]\n    Which is: 2779096485\n  0x0BADCAFEu\n"
               "    Which is: 195939070\nquicksort with n = 1 must copy the key to the output\n(at test_quicksort.cu:333)")
    unsorted = differ(100003, 99890, 0, 100002, [(i, str(41907 + 97 * i), POISON_UNSIGNED) for i in range(8)], 1111044)
    pivot_run = _wrong(100003, 50001, [(50001, "2147480001", POISON_UNSIGNED)], bad=1)
    single = own_hints(QSORT, [("QuicksortEdgeCorrectness.ZeroKeysWriteNothingOneKeyIsCopied", "recursion",
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
    return exception("cudaErrorLaunchPendingCountExceeded", PENDING, "a device-side launch in the quicksort tree",
                      where)


def test_lab_11_pending_launch_hints_by_size_and_task() -> None:
    """At 2^24 keys a correct tree outgrows the default pool (pending-limit-never-raised); at 100003 keys
    only a tree that launches 32 grids per segment does (schedule-every-lane-launches)."""
    found = own_hints(QSORT, [
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
    device, host = own_hints(QSORT, [
        ("QuicksortCorrectness.Random/1048576", "recursion", Category.CUDA_ERROR,
         exception("cudaErrorMemoryAllocation", oom, "a device-side launch in the quicksort tree", "quicksort.cu:402")),
        ("QuicksortCorrectness.Random/16777216", "recursion", Category.CUDA_ERROR,
         exception("cudaErrorMemoryAllocation", oom, "cudaMalloc(&data_, bytes())", "device_buffer.cuh:22")),
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
    nothing, wrong_code = own_hints(QSORT, [(name, "limits", Category.WRONG_ANSWER, returned),
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
    exact, from_one = own_hints(QSORT, [
        ("QuicksortPendingLimitCorrectness.ExplicitLimitIsSetExactly", "limits", Category.WRONG_ANSWER, lowered),
        ("QuicksortPendingLimitCorrectness.RaisedFromAPoolOfOne", "limits", Category.WRONG_ANSWER, raised),
    ])
    assert "whether it is above or below the current limit" in exact
    assert "quicksort left the pool of pending launches at 1" in from_one


def test_lab_11_depth_limit_and_fallback_hints() -> None:
    """fallback-no-copy (the leaf is sorted in the poisoned output), fallback-missing-copy-sync (the network
    starts before the slow half of the block has copied), and unchecked launches at 2^26 keys."""
    poisoned = differ(60001, 60001, 0, 60000, [(i, str(71234 + 89 * i), POISON_UNSIGNED) for i in range(8)], 11032)
    raced = differ(60001, 41230, 3, 59998, [(3 + i, str(215000 + 31 * i), str(216000 + 29 * i)) for i in range(8)],
                    71037)
    unrun = differ(67108864, 40000000, 0, 67108863, [(i, str(64 + i), POISON_UNSIGNED) for i in range(8)], 11052)
    depth = value_of("cudalab::DeviceAllEqual(sorted_copy(d_keys.data(), n), d_out, seed)", poisoned,
                      "quicksort of n = 60001 with max_depth = 0", "test_quicksort.cu:381")
    fallback = "quicksort of n = 60001 with max_depth = 0 (one leaf, sorted by the fallback), round 1"
    found = own_hints(QSORT, [
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
    found = own_hints(QSORT, [("PartitionCorrectness.Sorted/1000", "partition", Category.WRONG_ANSWER,
                            _partition(1000, shifted, "key_at(d_keys, n / 2)", "kSeed + 9 * n"))])
    assert "hi is m or more" not in found[0]
    assert "stage the less keys at the front of s_keys" in found[0]


# --- both labs ---------------------------------------------------------------------------------------

def test_labs_10_and_11_have_at_least_eight_hints_each_keyed_on_a_public_task() -> None:
    for name in (COOP, QSORT):
        lab = lab_of(name)
        own = hints.load_hints(lab.path / hints.LAB_HINTS)
        public = {t.id for t in lab.tasks if not t.hidden}
        assert len(own) >= 8, name
        assert all(h.tasks and set(h.tasks) <= public for h in own), name


def _quicksorted(n: int, mismatch: str) -> str:
    return value_of("cudalab::DeviceAllEqual(sorted_copy(d_keys.data(), n), d_out, seed)", mismatch,
                    f"quicksort of n = {n}", "test_quicksort.cu:311")


def test_lab_11_a_sorted_run_one_slot_off_is_a_bound_not_a_scan() -> None:
    """fill-inline-off-by-one (the pivot run one slot too long: the keys after it move up) and
    greater-side-begin-after-less (the greater side placed too early: keys move down), as the H200 gate
    saw them at n = 100,003 and 8,193: the hint names the bounds that place keys, not inclusive scans."""
    up = [195811212, 195816485, 195865211, 195876617, 195902637, 195921496, 195930010, 195960849, 195988883]
    late = differ(100003, 31976, 4510, 88974, [(4510 + i, str(up[i + 1]), str(up[i])) for i in range(8)], 1111044)
    down = [4223451957, 4223737415, 4224298010, 4224467812, 4224706348, 4225721814, 4225842705, 4226051335,
            4226118023]
    early = differ(8193, 120, 8074, 8192, [(8074 + i, str(down[i]), str(down[i + 1])) for i in range(8)], 101134)
    found = own_hints(QSORT, [
        ("QuicksortCorrectness.Random/100003", "recursion", Category.WRONG_ANSWER, _quicksorted(100003, late)),
        ("QuicksortCorrectness.Random/8193", "recursion", Category.WRONG_ANSWER, _quicksorted(8193, early)),
    ])
    for hint in found:
        assert "A run of sorted keys sits one slot off" in hint, hint
        assert "i < equal" in hint and "begin + count - greater" in hint
        assert "inclusive" not in hint.lower()


def test_lab_11_the_missing_fence_technique_names_the_fence() -> None:
    """last-block-no-threadfence: no result shows it, the PTX check of the recursion task does."""
    message = ("each block fences its stores (__threadfence()) before it counts itself done with atomicAdd, and "
               "the last block fences again before it reads. Expected /(membar\\.gl|fence\\.(sc|acq_rel)\\.gpu)/ in "
               "the PTX of quicksort_partition_kernel (the task's points withheld)")
    found = own_hints(QSORT, [("Techniques.recursion", "recursion", Category.TECHNIQUE_MISSING, message)])
    assert found[0].startswith("A block's stores to d_out")
    assert "__threadfence() between a block's last store and that atomicAdd" in found[0]
    other = own_hints(QSORT, [("Techniques.recursion/2", "recursion", Category.TECHNIQUE_MISSING,
                               "the quicksort launches its kernels from device code (dynamic parallelism)")])
    assert "__threadfence" not in other[0]


def test_lab_11_keys_out_of_place_name_the_tree_order() -> None:
    """leaves-fire-and-forget on the H200: 99,974 of 100,003 keys out of place, every slot a key (not
    the poison). The hint names the tail launch and the one scheduling lane; slots still holding the
    poison keep the never-written hint."""
    exp = [42559, 148865, 267004, 302057, 324193, 404267, 409462, 423863]
    got = [3483167, 152902745, 192236838, 103235303, 117745993, 16548711, 289653547, 240954758]
    scattered = differ(100003, 99974, 0, 100002, [(i, str(exp[i]), str(got[i])) for i in range(8)], 1111044)
    poison = differ(100003, 99974, 0, 100002, [(i, str(exp[i]), POISON_UNSIGNED) for i in range(8)], 1111044)
    found = own_hints(QSORT, [
        ("QuicksortCorrectness.Random/100003", "recursion", Category.WRONG_ANSWER, _quicksorted(100003, scattered)),
        ("QuicksortCorrectness.Sorted/100003", "recursion", Category.WRONG_ANSWER, _quicksorted(100003, poison)),
    ])
    assert "Nearly every key is out of place" in found[0] and "cudaStreamTailLaunch" in found[0], found[0]
    assert "only lane 0 of the scheduling warp" in found[0]
    assert "Some output slots were never written" in found[1], found[1]


def test_lab_11_leaf_sort_race_shows_as_a_few_keys_out_of_place() -> None:
    """bitonic-sync-per-run on the H200: 27 keys of 60,001 a few places off in one stretch, in the recursion's
    tests, while the BlockSort tests passed."""
    samples = [(33083, "2353161787", "2353329741"), (33084, "2353266236", "2353946686"),
               (33087, "2353329741", "2354792612"), (33089, "2353505915", "2353161787")]
    stretch = _wrong(60001, 33083, samples, bad=27)
    found = _lab_hint(QSORT, [("QuicksortOffsetCorrectness.UnalignedRanges/60001", "recursion", stretch)])
    assert "a leaf sort raced" in found[0] and "every (k, j) step needs a __syncthreads()" in found[0]


def _partition_write(kernel: str, where: str) -> str:
    """memcheck's report of a bad write in a partition kernel (inlined partition_tile), first access at where."""
    from grader.tests.gtest_failures import memcheck_log

    return memcheck_log("Invalid __global__ write of size 4 bytes", f"{kernel}(const unsigned int *, unsigned int *, int)",
                        "11-quicksort/quicksort.cu:202", errors=125,
                        detail=("by thread (12,0,0) in block (3,0,0)", "Address 0x7f2440808000 is out of bounds",
                                f"and is {where} the nearest allocation at 0x7f2440804000 of size 2,016 bytes"))


def test_lab_11_a_partitions_bad_write_is_read_by_where_it_went() -> None:
    """The H200's --diagnose gate: three partition bugs led their reports with a memcheck write in a
    partition kernel, all with the grader's bounds advice. Where the first write went tells them apart:
    just before the nearest allocation (greater keys begun one block too far back), just past the end
    (a key counted twice), far outside (bases read before the barrier). The finding's task follows its
    kernel (partition or recursion), and the hint fits both."""
    from grader.tests.gtest_failures import sanitized

    cases = [("quicksort_partition_kernel", "132 bytes before", "recursion", "count - s_base_greater - total_greater"),
             ("partition_kernel", "1 bytes after", "partition", "counted twice"),
             ("quicksort_partition_kernel", "1,993,346,645 bytes after", "recursion", "a __syncthreads() must separate")]
    for kernel, where, task, advice in cases:
        t = sanitized(QSORT, "memcheck", _partition_write(kernel, where))
        assert t.task == task and advice in t.hint, (kernel, where, t.task, t.hint)
    # A bad write in another kernel keeps the grader's advice.
    from grader.tests.gtest_failures import memcheck_log

    other = sanitized(QSORT, "memcheck", memcheck_log("Invalid __global__ write of size 4 bytes",
                                                      "block_sort_kernel(const unsigned int *, unsigned int *, int)",
                                                      "11-quicksort/quicksort.cu:90"))
    assert "partition kernel" not in other.hint and other.hint


def test_a_lab_hint_may_name_several_tasks() -> None:
    both = hints.parse_hints('[[hint]]\ncategory = "sanitizer"\ntask = ["partition", "recursion"]\ntext = "x"\n')[0]
    assert both.tasks == ("partition", "recursion")
    assert both.fits(Category.SANITIZER, "", set(), task="recursion") and not both.fits(Category.SANITIZER, "", set(),
                                                                                          task="block-sort")
    import pytest

    with pytest.raises(hints.HintsError, match="task must be a task id or a list"):
        hints.parse_hints('[[hint]]\ncategory = "sanitizer"\ntask = []\ntext = "x"\n')


def test_lab_11_a_few_keys_swapped_at_the_largest_block_sort_is_a_race() -> None:
    """sort-small-missing-load-sync on the H200: 2 of 8191 keys swapped, every smaller size sorted. A race,
    not the network, which misplaces many keys at small sizes too (bitonic-runs-up-to-m: 27 of 31)."""
    sizes = [31, 1000, 4097, 8191]
    swapped = differ(8191, 2, 7395, 7396, [(7395, "3881200401", "3881411852"), (7396, "3881411852", "3881200401")],
                     19202)
    found = own_hints(QSORT, [(f"BlockSortCorrectness.Random/{n}", "block-sort", None, "") for n in sizes[:-1]]
                      + [("BlockSortCorrectness.Random/8191", "block-sort", Category.WRONG_ANSWER,
                          _sorted_keys(8191, swapped))])
    assert "a comparator read a slot before another thread had written it" in found[0], found[0]
    keys = [100, 210, 340, 400, 515, 620, 777, 810]
    network = differ(31, 27, 0, 26, [(i, str(keys[i]), str(keys[(i + 3) % 8])) for i in range(8)], 11042)
    found = own_hints(QSORT, [("BlockSortCorrectness.Random/31", "block-sort", Category.WRONG_ANSWER,
                               _sorted_keys(31, network))])
    assert "The network does not sort" in found[0], found[0]


def test_lab_11_nearly_every_key_wrong_past_the_block_sort_names_the_tree_order() -> None:
    """schedule-every-lane-launches on the H200: every block-sorted size passes, and from 8193 on (the first
    that partitions) nearly every key is out of place: 32 grids partitioned each segment. The tree-order
    hint leads the sizes hint; a few keys wrong past the block sort keep the sizes hint."""
    passing = [(f"QuicksortCorrectness.Random/{n}", "recursion", None, "") for n in (1, 31, 1000, 8192)]
    exp = [1270333, 2284212, 3391227, 4012551, 5120347, 6033811, 7201992, 8034427]
    most = differ(8193, 7968, 2, 8188, [(2 + i, str(exp[i]), str(exp[(i + 3) % 8])) for i in range(8)], 101134)
    found = own_hints(QSORT, passing + [("QuicksortCorrectness.Random/8193", "recursion", Category.WRONG_ANSWER,
                                         _quicksorted(8193, most)),
                                        ("QuicksortCorrectness.Random/100003", "recursion", Category.WRONG_ANSWER,
                                         _quicksorted(100003, ""))])
    assert "Nearly every key is out of place" in found[0] and "only lane 0 of the scheduling warp" in found[0]
    some = differ(8193, 1200, 2, 8188, [(2 + i, str(exp[i]), str(exp[(i + 3) % 8])) for i in range(8)], 101134)
    found = own_hints(QSORT, passing + [("QuicksortCorrectness.Random/8193", "recursion", Category.WRONG_ANSWER,
                                         _quicksorted(8193, some)),
                                        ("QuicksortCorrectness.Random/100003", "recursion", Category.WRONG_ANSWER,
                                         _quicksorted(100003, ""))])
    assert "go straight to the block sort" in found[0], found[0]
