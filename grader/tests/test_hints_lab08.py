"""The hints of lab 08 (histogram), each fired on the failure its bug really
produces (solutions/NN-slug/mutants/ describes the bugs), and kept away from the failures of other tasks.

A failure is built the way a test binary reports it: the message a test's EXPECT_* prints (cudalab/
compare.hpp for arrays, written here by _compare), as a GoogleTest JSON report that grader/execute/gtest.py
reads (which also picks the category: a message naming any cudaError... is a cuda_error); compute-sanitizer
findings go through grader/execute/sanitizer.py's parser, missing techniques through penalties. Then the
score stage (scoring.score) gives each test its task and its hint, as in a real grade."""

from __future__ import annotations

import random

from grader.model.results import Category
from grader.tests.gtest_failures import (
    compare, cuda_error, grade, memcheck_log_short, one, graded_race, sanitizer_result, value_of)

FILL_BINS = 0xA5A5A5A5  # the bins before every histogram call


# --- lab 08: histogram -----------------------------------------------------------------------------------
# Every test first calls the function on n bytes all equal to 183 (0xB7; text: n times 'Q'), then on its own
# input; both reports land in the test's message, the call before first.

HOT = 0xB7
HIST_AT = "/home/s/labs/08-histogram/test_histogram.cu"


def _bins(data: bytes | list[int]) -> list[int]:
    bins = [0] * 256
    for b in data:
        bins[b] += 1
    return bins


def _uniform(n: int) -> list[int]:
    rng = random.Random(8008 + n)
    return [rng.randrange(256) for _ in range(n)]


def _before(fn: str, n: int, actual: list[int]) -> str:
    """call_before's failure: fn on n bytes all equal to 183."""
    expected = [0] * 256
    expected[HOT] = n
    return value_of(f"{HIST_AT}:167", "AllEqual(expected, d_bins.to_host(), byte)",
                     compare(expected, actual, HOT),
                     f"{fn} on {n} bytes all equal to {HOT} (the call just before the one on the test's input)")


def _histogram(fn: str, dist: str, n: int, expected: list[int], actual: list[int]) -> str:
    """HistogramCorrectness' own check."""
    return value_of(f"{HIST_AT}:223", "AllEqual(in.expected, run_histogram(fn, name, in.bytes), kSeed + c.n)",
                     compare(expected, actual, 8008 + n),
                     f"{fn} on {dist} bytes, n = {n} (index = bin; 2779096485 = 0xA5A5A5A5 means the bin was "
                     "never zeroed)")


def test_08_global_bins_never_zeroed() -> None:
    """global-bins-not-zeroed: every bin is 0xA5A5A5A5 plus its count, for n = 0 exactly the fill."""
    x = _uniform(4099)
    hot = [0] * 256
    hot[HOT] = 4099
    graded = grade("08-histogram", [
        ("HistogramCorrectness.Global/uniform_0",
         [_histogram("histogram_global", "uniform", 0, [0] * 256, [FILL_BINS] * 256)]),
        ("HistogramCorrectness.Global/uniform_4099",
         [_before("histogram_global", 4099, [FILL_BINS + c for c in hot]),
          _histogram("histogram_global", "uniform", 4099, _bins(x), [FILL_BINS + c for c in _bins(x)])]),
    ])
    for name in ("HistogramCorrectness.Global/uniform_0", "HistogramCorrectness.Global/uniform_4099"):
        hint = graded[name].hint
        assert "nothing set them to zero first" in hint and "is the kernel launched" not in hint


def test_08_global_plain_increment_loses_the_hot_bin() -> None:
    """global-plain-increment: all threads on one bin lose most increments; uniform bytes lose few."""
    x = _uniform(65531)
    lost = _bins(x)
    lost[17] -= 1
    lost[200] -= 2
    hot = [0] * 256
    hot[HOT] = 61
    t = one("08-histogram", "HistogramCorrectness.Global/uniform_65531", [
        _before("histogram_global", 65531, hot), _histogram("histogram_global", "uniform", 65531, _bins(x), lost)])
    assert "loses increments, so count with atomicAdd(&bins[b], 1u)" in t.hint


def test_08_global_launch_for_an_empty_input() -> None:
    zero_blocks = cuda_error("cudaErrorInvalidValue", "invalid argument", "kernel launch",
                              "/home/s/labs/08-histogram/histogram.cu:47")
    t = one("08-histogram", "HistogramCorrectness.Global/uniform_0", [zero_blocks])
    assert t.category is Category.CUDA_ERROR and "launch the kernel only when n > 0" in t.hint


def test_08_global_index_in_int() -> None:
    """global-int-index: the bytes past 2^31 are not counted."""
    expected = [8388624 + (b % 5) for b in range(256)]
    actual = [e - 16 for e in expected]
    t = one("08-histogram", "HistogramHugeCorrectness.Global", [value_of(
        f"{HIST_AT}:374", "AllEqual(expected, d_bins.to_host(), kSeed + 31)", compare(expected, actual, 8039),
        "histogram_global on 2147487747 uniform bytes (more than 2^31): do your kernels compute indices in 64 bits "
        "(std::size_t) everywhere?")])
    assert t.task == "global" and "converting blockIdx.x before you multiply" in t.hint


def test_08_shared_counts_lost_on_their_way_to_the_bins() -> None:
    """shared-no-barrier-before-commit (a commit before the counting is done) and shared-no-grid-stride-loop
    (the capped grid counts 1056 x 256 bytes and stops): both first show on the hot bin of the call before."""
    n = (1 << 20) + 3
    early, capped = [0] * 256, [0] * 256
    early[HOT], capped[HOT] = n - 5120, 1056 * 256
    for failures in ([_before("histogram_shared", n, early)], [_before("histogram_shared", n, capped)]):
        t = one("08-histogram", f"HistogramCorrectness.Shared/uniform_{n}", failures)
        assert "visits every byte exactly once" in t.hint and "separates the counting from the commit" in t.hint


def test_08_shared_private_bins_never_zeroed() -> None:
    """The private bins start from the junk the tests leave in shared memory."""
    rng = random.Random(5)
    junk = [rng.randrange(1 << 32) for _ in range(256)]
    t = one("08-histogram", "HistogramCorrectness.Shared/skewed_4099", [_before("histogram_shared", 4099, junk)])
    assert "Zero the private bins, then __syncthreads() before counting" in t.hint


def test_08_shared_barrier_after_zeroing_missing() -> None:
    """shared-no-barrier-after-zeroing: no output shows it; the compiled kernel has one barrier."""
    t = grade("08-histogram", [], missing=["after zeroing"])["Techniques.shared"]
    assert t.category is Category.TECHNIQUE_MISSING and "no test output can show the first one missing" in t.hint


def _letters(name: str, n: int, expected: list[int], actual: list[int], seed: int) -> str:
    return value_of(f"{HIST_AT}:303", "AllEqual(cpu_text_histogram(text), d_bins.to_host(), seed)",
                     compare(expected, actual, seed), f"bins: a-d, e-h, i-l, m-p, q-t, u-x, y-z; n = {n}")


def _q_before(n: int, actual: list[int]) -> str:
    """call_before of the text histogram: n times 'Q', all in bin q-t."""
    expected = [0, 0, 0, 0, n, 0, 0]
    return value_of(f"{HIST_AT}:167", "AllEqual(expected, d_bins.to_host(), byte)",
                     compare(expected, actual, 81),
                     f"histogram_text on {n} bytes all equal to 81 (the call just before the one on the test's "
                     "input)")


def test_08_text_memset_of_bytes_not_bins() -> None:
    """text-memset-bytes-not-bins: 7 bytes cleared, so bin 1 keeps 0xA5 in its top byte, bins 2-6 all of it."""
    actual = [0, 0xA5000000, FILL_BINS, FILL_BINS, FILL_BINS + 4099, FILL_BINS, FILL_BINS]
    t = one("08-histogram", "HistogramTextCorrectness.Letters/mixed_4099", [_q_before(4099, actual)])
    assert "cudaMemsetAsync takes a count of bytes" in t.hint and "histogram_global" not in t.hint


def test_08_text_upper_case_not_counted() -> None:
    """text-upper-case-ignored: the text of 'Q's counts nothing."""
    graded = grade("08-histogram", [
        ("HistogramTextCorrectness.Letters/shout_257",
         [_q_before(257, [0] * 7), _letters("shout", 257, [0, 0, 0, 0, 257, 0, 0], [0] * 7, 8008 + 3 * 257 + 2)]),
        ("HistogramTextCorrectness.Letters/mixed_1",
         [_q_before(1, [0] * 7)]),
    ])
    for t in graded.values():
        assert "upper-case letters count too" in t.hint


def test_08_text_letter_range_off_by_one() -> None:
    """text-letter-range-off-by-one: '{' (after 'z') counted with y-z."""
    expected = [590, 0, 0, 0, 0, 0, 1181]
    t = one("08-histogram", "HistogramTextCorrectness.Letters/edges_4099",
              [_letters("edges", 4099, expected, expected[:6] + [1181 + 287], 8008 + 3 * 4099 + 1)])
    assert "check both ends of your range test" in t.hint and "ceil-div" not in t.hint


def test_08_text_shared_counters_never_zeroed() -> None:
    """Counters that start from junk: every bin too large says so first; junk that left a bin too small
    (a bin of 255 'Q's holding less) gets the every-bin-wrong advice. On the H200 the same bug showed on one
    letter of text as an empty bin that counted 1."""
    rng = random.Random(9)
    high = [rng.randrange(1000, 1 << 32) for _ in range(7)]
    t = one("08-histogram", "HistogramTextCorrectness.Letters/mixed_255", [_q_before(255, high)])
    assert "Letter bins count more letters than the text holds" in t.hint and "Zero the shared counters" in t.hint
    t = one("08-histogram", "HistogramTextCorrectness.Letters/mixed_255", [_q_before(255, high[:4] + [7] + high[5:])])
    assert "the 7 shared counters start with whatever shared memory held" in t.hint
    edge = value_of(f"{HIST_AT}:303", "AllEqual(cpu_text_histogram(text), d_bins.to_host(), seed)",
                    compare([0, 0, 0, 0, 0, 0, 0], [0, 0, 0, 0, 1, 0, 0], 8012),
                    "bins: a-d, e-h, i-l, m-p, q-t, u-x, y-z; n = 1")
    t = one("08-histogram", "HistogramTextCorrectness.Letters/edges_1", [edge])
    assert "Letter bins count more letters than the text holds" in t.hint


def test_08_text_letters_in_the_wrong_bins_keep_their_total() -> None:
    """text-bin-from-byte-over-4 on the H200: all 7 bins wrong, some high and some low, the total right."""
    expected = [104350, 104916, 104499, 104994, 105228, 104944, 52621]
    actual = [78219, 104685, 104799, 105078, 104749, 105179, 78843]
    wrong = value_of(f"{HIST_AT}:303", "AllEqual(cpu_text_histogram(text), d_bins.to_host(), seed)",
                     compare(expected, actual, 3153745), "bins: a-d, e-h, i-l, m-p, q-t, u-x, y-z; n = 1048579")
    t = one("08-histogram", "HistogramTextCorrectness.Letters/mixed_1048579", [wrong])
    assert "Every letter was counted, into the wrong bins" in t.hint, t.hint
    moved = actual[:6] + [actual[6] + 5]  # five letters too many: not the same total
    t = one("08-histogram", "HistogramTextCorrectness.Letters/mixed_1048579",
            [wrong.replace(f"actual {actual[6]}", f"actual {moved[6]}")])
    assert "into the wrong bins" not in t.hint


def test_08_text_course_notes_bug() -> None:
    """The course notes' kernel: byte / 4 indexes far past the 7 shared counters."""
    log = memcheck_log_short("Invalid __shared__ write of size 4 bytes",
                        "histogram_text_kernel(const char *, unsigned long, unsigned int *)", "08-histogram/histogram.cu:84")
    fault = cuda_error("cudaErrorIllegalAddress", "an illegal memory access was encountered", "cudaDeviceSynchronize()",
                        f"{HIST_AT}:300")
    graded = grade("08-histogram", [("HistogramTextCorrectness.Letters/mixed_4099", [fault])],
                    extra=[sanitizer_result("memcheck", log)])
    memcheck = graded["sanitizer.memcheck"]
    assert memcheck.task == "text" and "the bug of the course notes' version" in memcheck.hint
    crash = graded["HistogramTextCorrectness.Letters/mixed_4099"]
    assert crash.category is Category.CUDA_ERROR and "most likely writing past its 7 shared counters" in crash.hint


def test_08_coarsened_counts_the_zero_padding() -> None:
    """coarse-counts-padding: the vectors past n / 16 of the last step count as 0 bytes."""
    hot = [0] * 256
    hot[HOT], hot[0] = 4099, 61
    t = one("08-histogram", "HistogramCorrectness.Coarsened/hot_4099", [_before("histogram_coarsened", 4099, hot)])
    assert "Only bin 0 is wrong: zero bytes that are not part of the input were counted" in t.hint
    assert "even when you load it as zeros" in t.hint


def test_08_coarsened_runs_and_tail() -> None:
    """coarse-last-run-not-flushed, coarse-tail-not-counted (the hot bin short of the input: a run lost),
    coarse-tail-counted-by-every-block and coarse-zeroes-one-row-per-warp (more than the input: counted twice,
    or junk in a per-warp row never zeroed; the H200 saw 14,336 too many)."""
    for counted, advice in ((4099 - 2048, "counts fewer bytes than the input holds"),
                            (4096, "counts fewer bytes than the input holds"),
                            (4099 + 3 * 15, "counts more bytes than the input holds"),
                            (4099 + 14336, "All kCoarseWarps x 256 per-warp counters must start at zero")):
        hot = [0] * 256
        hot[HOT] = counted
        t = one("08-histogram", "HistogramCorrectness.Coarsened/runs_4099", [_before("histogram_coarsened", 4099, hot)])
        assert advice in t.hint, (counted, t.hint)
        assert ("Each thread must add its last run after its loop" in t.hint) == (counted < 4099)
        assert ("counted once, by block 0 only" in t.hint) == (counted > 4099)
    hot = [0] * 256
    hot[HOT] = 0xA5A5A5A5  # the hot bin never written: neither way, both causes
    t = one("08-histogram", "HistogramCorrectness.Coarsened/runs_4099", [_before("histogram_coarsened", 4099, hot)])
    assert "check the run merging and the tail" in t.hint, t.hint


def test_08_coarsened_per_warp_histograms_partly_zeroed() -> None:
    rng = random.Random(11)
    t = one("08-histogram", "HistogramCorrectness.Coarsened/uniform_257",
              [_before("histogram_coarsened", 257, [rng.randrange(1 << 32) for _ in range(256)])])
    assert "zero every one of them in a loop" in t.hint


def test_08_coarsened_row_from_the_lane() -> None:
    """coarse-histogram-per-lane-index: rows past kCoarseWarps."""
    log = memcheck_log_short("Invalid __shared__ atomic of size 4 bytes",
                        "histogram_coarsened_kernel(const uint4 *, unsigned long, const unsigned char *, int, unsigned int *)",
                        "08-histogram/histogram.cu:160")
    t = grade("08-histogram", [], extra=[sanitizer_result("memcheck", log)])["sanitizer.memcheck"]
    assert t.task == "coarsened" and "the row is the warp's number, threadIdx.x / 32" in t.hint


def test_08_fast_grid_of_zero_blocks_below_16_bytes() -> None:
    zero_blocks = cuda_error("cudaErrorInvalidValue", "invalid argument", "kernel launch",
                              "/home/s/labs/08-histogram/histogram.cu:331")
    graded = grade("08-histogram", [("HistogramCorrectness.Fast/uniform_1", [zero_blocks]),
                                     ("HistogramCorrectness.Fast/uniform_15", [zero_blocks]),
                                     ("HistogramCorrectness.Fast/uniform_255", [])])
    for n in (1, 15):
        assert "Launch at least one block when n > 0" in graded[f"HistogramCorrectness.Fast/uniform_{n}"].hint


def test_08_fast_lanes_read_before_the_others_finish() -> None:
    """fast-no-syncwarp-before-reduce."""
    t = graded_race("08-histogram",
                    "histogram_fast_kernel(const uint4 *, unsigned long, const unsigned char *, int, unsigned int *)",
                    "08-histogram/histogram.cu:301", "08-histogram/histogram.cu:309")
    assert t.task == "fast" and "put a __syncwarp() between counting into lane-private counters" in t.hint


def test_08_hints_stay_with_their_task() -> None:
    # The fill in a text histogram gets the text advice, not histogram_global's.
    fill = [0, 0xA5000000, FILL_BINS, FILL_BINS, FILL_BINS + 15, FILL_BINS, FILL_BINS]
    t = one("08-histogram", "HistogramTextCorrectness.Letters/mixed_255", [_q_before(15, fill)])
    assert "histogram_global owns its output" not in t.hint
    # The hot bin right and two other bins wrong: no hot-bin advice, the grader's own.
    x = _uniform(4099)
    off = _bins(x)
    off[17] += 1
    off[201] += 1
    t = one("08-histogram", "HistogramCorrectness.Shared/uniform_4099",
              [_histogram("histogram_shared", "uniform", 4099, _bins(x), off)])
    assert "hot bin" not in t.hint and "Some elements are wrong" in t.hint
    # Bin 0 alone wrong in the byte histogram of task 1: neither the text nor the coarsened advice.
    hot = [0] * 256
    hot[HOT], hot[0] = 4099, 1
    t = one("08-histogram", "HistogramCorrectness.Global/hot_4099", [_before("histogram_global", 4099, hot)])
    assert "range test" not in t.hint and "zero padding" not in t.hint


def test_08_counts_in_the_wrong_bins() -> None:
    """coarse-byte-shift-in-bits (some bins high, others low) and fast-tail-index-not-scaled (the one tail
    byte counted in bin 5, not its own 183), as the H200 reported them."""
    shifted = [0] * 256
    shifted[183], shifted[219], shifted[237] = 255, 0, 0
    wrong = list(shifted)
    wrong[183], wrong[219], wrong[237] = 75, 60, 60
    t = one("08-histogram", "HistogramCorrectness.Coarsened/uniform_255", [value_of(
        f"{HIST_AT}:190", "AllEqual(expected, d_bins.to_host(), byte)", compare(shifted, wrong, 183),
        "histogram_coarsened on 255 bytes")])
    assert t.task == "coarsened" and "counts went to the wrong bins" in t.hint and "8 bits per byte" in t.hint
    one_byte = [0] * 256
    one_byte[183] = 1
    moved = [0] * 256
    moved[5] = 1
    t = one("08-histogram", "HistogramCorrectness.Fast/uniform_1", [value_of(
        f"{HIST_AT}:190", "AllEqual(expected, d_bins.to_host(), byte)", compare(one_byte, moved, 183),
        "histogram_fast on 1 bytes all equal to 183")])
    assert "A count turned up in another bin" in t.hint and "4 * word index + k" in t.hint
