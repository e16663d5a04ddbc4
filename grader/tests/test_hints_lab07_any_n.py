"""The hints of lab 07's scans of any n (task 4, the recursive scan, and the decoupled look-back challenge),
each fired on the failure its bug really produces (solutions/07-scan/mutants/), built as
test_hints_lab07.py builds them."""

from __future__ import annotations

from grader.model.results import Category
from grader.tests.test_hints import _wrong
from grader.tests.gtest_failures import (
    POISON_INT, compare, cuda_error, equal, grade, one, graded_race, sanitizer_result, stopped, value_of)
from grader.tests.test_hints_lab07 import SCAN_AT, SCAN_EXPR, _input


def test_07_any_n_launches_zero_blocks_at_one_full_tile() -> None:
    """anyn-single-tile-test-on-n: CUDA 13 reports a grid of 0 blocks as cudaErrorInvalidValue."""
    zero_blocks = cuda_error("cudaErrorInvalidValue", "invalid argument", "kernel launch",
                              "/home/s/labs/07-scan/scan.cu:389")
    graded = grade("07-scan", [("ScanCorrectness.Exclusive/4096", [zero_blocks]),
                                ("ScanCorrectness.Exclusive/4097", []),
                                ("ScanCorrectness.Exclusive/16777216", [zero_blocks])])
    for name in ("ScanCorrectness.Exclusive/4096", "ScanCorrectness.Exclusive/16777216"):
        t = graded[name]
        assert t.category is Category.CUDA_ERROR and t.task == "any-n"
        assert "Check the one-tile test in scan_any at exactly one full tile" in t.hint


def test_07_any_n_misaligned_scratch() -> None:
    """anyn-unaligned-offsets: 6 tile totals (n = 20483) put the offsets 24 bytes in."""
    fault = cuda_error("cudaErrorMisalignedAddress", "misaligned address", "cudaDeviceSynchronize()",
                        "/home/s/labs/07-scan/test_scan.cu:99")
    t = one("07-scan", "ScanCorrectness.Inclusive/20483", [fault])
    assert "must start 16-byte aligned" in t.hint and "round_up_to_int4" in t.hint


def _scratch_overrun(n: int, reserved: int, past: int) -> str:
    """guards_intact of the scratch: the scan wrote `past` bytes beyond the `reserved` it asked for."""
    return value_of(
        "/home/s/labs/07-scan/test_scan.cu:110", 'scratch->guards_intact("the scratch (d_temp)")',
        f"out-of-bounds write: a kernel changed memory outside the scratch (d_temp) ({reserved} element(s) of 1 "
        f"bytes): {past} byte(s) past its end (the first at byte 0 past the end). Check the bounds guard of every "
        "thread that writes it.",
        f"n = {n}: the scan used more scratch than its *_temp_bytes(n) = {reserved} bytes reserved")


def test_07_any_n_uses_more_scratch_than_it_asked_for() -> None:
    """anyn-temp-bytes-half: the output is right, the scratch's guard zone is not."""
    t = one("07-scan", "ScanCorrectness.Exclusive/20483", [_scratch_overrun(20483, 32, 24)])
    assert "scan_any wrote past the scratch that scan_temp_bytes(n) reserved" in t.hint
    assert "i < n, not i <= n" not in t.hint


def _huge(kind: str, first: int, wrong: int) -> str:
    lead = ("Everything before item 2^32 is right: do your kernels compute indices in 64 bits (std::size_t) "
            "everywhere?" if first >= 2**32 else
            "The first wrong item is below 2^32: if smaller tests of this task fail too, fix those first; if only "
            "this one fails, an index that wraps at 2^32 can land on an early item.")
    return equal("/home/s/labs/07-scan/test_scan.cu:367", "errors[0]", str(wrong), "0u", "0",
                  f"{kind} scan of n = 4294979641 (more than 2^32 items): {wrong} item(s) wrong, the first at index "
                  f"{first} (item 2^32 is index 4294967296). {lead}")


def test_07_any_n_tile_base_in_32_bits() -> None:
    """anyn-32bit-tile-base: tile 2^20 lands on tile 0 again."""
    t = one("07-scan", "ScanHugeCorrectness.Propagate", [_huge("inclusive", 0, 4294979641)])
    assert t.task == "any-n" and "Convert blockIdx.x to std::size_t before you multiply" in t.hint


def test_07_any_n_race_before_the_warp_totals_are_scanned() -> None:
    """anyn-no-barrier-before-warp-scan."""
    t = graded_race("07-scan", "void scan_tiles_kernel<true>(const int *, int *, unsigned long, int *)",
                    "07-scan/scan.cu:316", "07-scan/scan.cu:318")
    assert t.task == "any-n" and "a __syncthreads() after the totals are written" in t.hint


def test_07_decoupled_tile_numbers_from_block_index() -> None:
    """dlb-tile-from-blockidx: no test can provoke the hang; the technique check catches it."""
    t = grade("07-scan", [], missing=["atomic counter"])["Techniques.decoupled"]
    assert t.category is Category.TECHNIQUE_MISSING and "a block that has no SM to run on" in t.hint


def test_07_decoupled_scratch_cleared_only_once() -> None:
    """dlb-scratch-cleared-once: call 2 starts past the last tile, so nothing is written."""
    n = (1 << 18) + 11
    x = _input(n, 7007 + 101)
    acc, expected = 0, []
    for v in x:
        acc += v
        expected.append(acc)
    body = compare(expected, [POISON_INT] * n, 7007 + 101)
    t = one("07-scan", "ScanDecoupledReuseCorrectness.FiveCallsOneScratch", [
        value_of(SCAN_AT, SCAN_EXPR, body, f"inclusive scan of n = {n}"),
        "/home/s/labs/07-scan/test_scan.cu:238\nFailed\ncall 2 of 5 with the same scratch went wrong"])
    assert "the tile counter and the status words still held the previous call's values" in t.hint


def test_07_reused_scratch_comes_before_the_look_back_pattern() -> None:
    """With only the statuses left over (the counter cleared), call 2 finds stale P words: tile 0 is right and
    the later tiles are not, which alone would get the look-back advice; the reuse is the sharper clue."""
    stale = _wrong(262155, 8192, [(8192, "32821", "65590"), (8193, "32824", "65593")])
    t = one("07-scan", "ScanDecoupledReuseCorrectness.FiveCallsOneScratch", [
        value_of(SCAN_AT, SCAN_EXPR, stale, "inclusive scan of n = 262155"),
        "/home/s/labs/07-scan/test_scan.cu:238\nFailed\ncall 2 of 5 with the same scratch went wrong"])
    assert t.hint.startswith("Everything from index 8,192 on is wrong")
    assert "still held the previous call's values" in t.hint and "the look-back must add" not in t.hint
    # Call 1 wrong is no reuse problem: the look-back advice.
    first = one("07-scan", "ScanDecoupledReuseCorrectness.FiveCallsOneScratch", [
        value_of(SCAN_AT, SCAN_EXPR, stale, "exclusive scan of n = 262155"),
        "/home/s/labs/07-scan/test_scan.cu:238\nFailed\ncall 1 of 5 with the same scratch went wrong"])
    assert "the look-back must add every earlier tile" in first.hint


def test_07_reused_scratch_only_when_fresh_scratch_passes() -> None:
    """dlb-farthest-prefix and dlb-publish-exclusive-prefix race in the look-back: call 1 of FiveCallsOneScratch
    may pass by chance, yet the tests with fresh scratch fail too, so the scratch is not what is wrong."""
    stale = _wrong(262155, 8192, [(8192, "32821", "65590"), (8193, "32824", "65593")])
    reuse = [value_of(SCAN_AT, SCAN_EXPR, stale, "inclusive scan of n = 262155"),
             "/home/s/labs/07-scan/test_scan.cu:238\nFailed\ncall 2 of 5 with the same scratch went wrong"]
    fresh = _wrong(1048583, 12288, [(12288, "49150", "49170"), (12289, "49153", "49173")])
    graded = grade("07-scan", [("ScanDecoupledReuseCorrectness.FiveCallsOneScratch", reuse),
                                ("ScanDecoupledCorrectness.Exclusive/1048583", [value_of(SCAN_AT, SCAN_EXPR, fresh)])])
    hint = graded["ScanDecoupledReuseCorrectness.FiveCallsOneScratch"].hint
    assert "still held the previous call's values" not in hint and "the look-back must add" in hint


def test_07_any_n_offsets_that_include_the_tiles_own_total() -> None:
    """anyn-inclusive-tile-offsets on an H200: n up to one tile passes, n = 4097 has its last element wrong."""
    tile = _wrong(4097, 4096, [(4096, "16312", "16313")])
    two = _wrong(8192, 4096, [(4096, "16312", "16313"), (4097, "16318", "16319")])
    graded = grade("07-scan", [("ScanCorrectness.Inclusive/1", []), ("ScanCorrectness.Inclusive/4096", []),
                                ("ScanCorrectness.Inclusive/4097", [value_of(SCAN_AT, SCAN_EXPR, tile)]),
                                ("ScanCorrectness.Inclusive/8192", [value_of(SCAN_AT, SCAN_EXPR, two)])])
    hint = graded["ScanCorrectness.Inclusive/4097"].hint
    assert "scan the tile totals exclusively" in hint and "adds each tile's own total a second time" in hint


def test_07_decoupled_scratch_and_64_bit_hints() -> None:
    scratch = grade("07-scan", [("ScanDecoupledCorrectness.Exclusive/1048583", [_scratch_overrun(1048583, 520, 8)])])
    assert "scan_decoupled_temp_bytes(n) reserved" in scratch["ScanDecoupledCorrectness.Exclusive/1048583"].hint
    assert "scan_any" not in scratch["ScanDecoupledCorrectness.Exclusive/1048583"].hint
    huge = grade("07-scan", [("ScanHugeCorrectness.Decoupled", [_huge("exclusive", 4294967296, 12345)])])
    hint = huge["ScanHugeCorrectness.Decoupled"].hint
    assert "Convert the tile number to std::size_t before you multiply" in hint and "blockIdx.x" not in hint


def test_07_a_huge_failure_beside_smaller_ones_is_no_32_bit_lead() -> None:
    """A GPU run of anyn-inclusive-tile-offsets (issue 25): the tile offsets are wrong from n = 4097 on, and the
    2^32 test fails for the same reason; its hint said to widen blockIdx.x, a wrong lead."""
    tile = _wrong(4097, 4096, [(4096, "16312", "16313")])
    graded = grade("07-scan", [("ScanCorrectness.Inclusive/4097", [value_of(SCAN_AT, SCAN_EXPR, tile)]),
                                ("ScanHugeCorrectness.Propagate", [_huge("inclusive", 4096, 4294975545)])])
    hint = graded["ScanHugeCorrectness.Propagate"].hint
    assert "Smaller tests of this task fail too: fix those first" in hint and "blockIdx.x" not in hint


def test_07_decoupled_race_after_the_look_back() -> None:
    """dlb-no-barrier-after-lookback."""
    t = graded_race("07-scan", "void decoupled_scan_kernel<false>(const int *, int *, unsigned long, "
                    "unsigned long long *, unsigned int *)", "07-scan/scan.cu:517", "07-scan/scan.cu:521")
    assert t.task == "decoupled" and "only after a __syncthreads() that follows that write" in t.hint


def test_07_decoupled_look_back_that_never_ends() -> None:
    name = "ScanDecoupledCorrectness.Exclusive/16777216"
    t = grade("07-scan", [], extra=[stopped(name, Category.TIMEOUT,
                                              "the test did not finish within 300 s and was stopped")])[name]
    assert t.task == "decoupled" and "a look-back waited for a status that never left X" in t.hint


def test_07_decoupled_scan_illegal_address_points_at_the_reused_scratch() -> None:
    """dlb-scratch-cleared-once on the H200: the second call with the same scratch starts past the last
    tile and faults. The decoupled task's hint names clearing the counter and the statuses per call; the
    same error in another task keeps the grader's bounds hint."""
    fault = cuda_error("cudaErrorIllegalAddress", "an illegal memory access was encountered", "cudaDeviceSynchronize()",
                       "/home/s/labs/07-scan/test_scan.cu:99")
    graded = grade("07-scan", [("ScanDecoupledCorrectness.Exclusive/31", [fault]),
                               ("ScanCorrectness.Exclusive/31", [fault])])
    hint = graded["ScanDecoupledCorrectness.Exclusive/31"].hint
    assert graded["ScanDecoupledCorrectness.Exclusive/31"].task == "decoupled"
    assert "clear the tile counter and every status word at the start of each call" in hint, hint
    assert "clear the tile counter" not in graded["ScanCorrectness.Exclusive/31"].hint


def test_07_decoupled_status_word_written_past_the_scratch() -> None:
    """dlb-scratch-cleared-once under memcheck (the H200 gate, --diagnose): the write is inside the libcu++
    atomic the look-back inlines; the finding is the decoupled kernel's, at the student's line, and its
    hint names the reused scratch. The same write in another kernel keeps the grader's bounds hint."""
    from grader.tests.test_sanitizer_logs import INLINED

    t = grade("07-scan", [], extra=[sanitizer_result("memcheck", INLINED, ("scan.cu",))])["sanitizer.memcheck"]
    assert t.task == "decoupled" and "at scan.cu:512" in t.message
    assert "published a tile's status word past the scratch" in t.hint and "in every call" in t.hint, t.hint
    other = INLINED.replace("decoupled_scan_kernel<false, 256, 4>", "scan_tiles_kernel<true>")
    t = grade("07-scan", [], extra=[sanitizer_result("memcheck", other, ("scan.cu",))])["sanitizer.memcheck"]
    assert t.task == "any-n" and "status word" not in t.hint


def test_07_look_back_that_adds_past_the_nearest_inclusive_prefix() -> None:
    """dlb-farthest-prefix on the H200: from tile 72 on every element is too large by 196,248 (prefixes
    added twice); the same tiles too small by a constant (dlb-publish-exclusive-prefix, or a status read
    before it was final) keep the look-back-wait hint."""
    def failure(offset: int) -> str:
        rows = "".join(f"  [{294912 + i}] expected {1177260 + 2 * i}, actual {1177260 + 2 * i + offset}\n"
                       for i in range(8))
        body = ("655360 of 1048583 elements differ (seed 6298505, exact); mismatches span indices 294912..1048575\n"
                + rows + "  ... and 655352 more")
        return value_of(SCAN_AT, SCAN_EXPR, body, "exclusive scan of n = 1048583")

    name = "ScanDecoupledCorrectness.Exclusive/1048583"
    high = grade("07-scan", [(name, [failure(196248)])])[name].hint
    assert "the look-back added something twice" in high and "stop at the nearest such tile" in high, high
    low = grade("07-scan", [(name, [failure(-98651)])])[name].hint
    assert "added something twice" not in low and "Wait (spin" in low, low
