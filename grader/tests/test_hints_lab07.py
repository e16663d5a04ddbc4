"""The hints of lab 07's block scans (tasks 1-3; test_hints_lab07_any_n.py has tasks 4 and C), each fired
on the failure its bug really produces (solutions/NN-slug/mutants/ describes the bugs), and kept away from
the failures of other tasks.

A failure is built the way a test binary reports it: the message a test's EXPECT_* prints (cudalab/
compare.hpp for arrays, written here by _compare), as a GoogleTest JSON report that grader/execute/gtest.py
reads (which also picks the category: a message naming any cudaError... is a cuda_error); compute-sanitizer
findings go through grader/execute/sanitizer.py's parser, missing techniques through penalties. Then the
score stage (scoring.score) gives each test its task and its hint, as in a real grade."""

from __future__ import annotations

import random

from grader.model.results import Status
from grader.model.results import TestResult as TResult
from grader.tests.test_hints import _lab_hint, _wrong
from grader.tests.gtest_failures import (
    compare, grade, memcheck_log_short, graded_race, sanitizer_result, value_of)

# --- lab 07: scan ----------------------------------------------------------------------------------------
# The block scans (tasks 1-3) are simulated, right and with a mutant's bug, on 1024-element tiles: their
# wrong answers are the ones the kernels give (no race involved).

TILE = 1024
SCAN_AT = "/home/s/labs/07-scan/test_scan.cu:103"
SCAN_EXPR = "cudalab::DeviceAllEqual(reference_scan(d_original, kind, segment), d_out, seed)"


def _input(n: int, seed: int) -> list[int]:
    rng = random.Random(seed)
    return [rng.randint(1, 7) for _ in range(n)]


def _tiles(x: list[int], scan_tile) -> list[int]:
    out: list[int] = []
    for b in range(0, len(x), TILE):
        part = x[b:b + TILE]
        out += scan_tile(part + [0] * (TILE - len(part)))[:len(part)]
    return out


def _reference(x: list[int], inclusive: bool) -> list[int]:
    def scan(t: list[int]) -> list[int]:
        sums, acc = [], 0
        for v in t:
            acc += v
            sums.append(acc if inclusive else acc - v)
        return sums
    return _tiles(x, scan)


def _hillis_steele(x: list[int], strict_guard: bool = False, stale_buffer: bool = False) -> list[int]:
    def scan(t: list[int]) -> list[int]:
        buf, cur, offset = [t[:], [0] * TILE], 0, 1
        while offset < TILE:
            for i in range(TILE):
                adds = i > offset if strict_guard else i >= offset  # hs-strict-offset-guard
                buf[cur ^ 1][i] = buf[cur][i] + (buf[cur][i - offset] if adds else 0)
            cur ^= 1
            offset *= 2
        return buf[cur ^ 1] if stale_buffer else buf[cur]  # hs-reads-stale-buffer
    return _tiles(x, scan)


def _blelloch(x: list[int], root_unpadded: bool = False, downsweep_no_temp: bool = False,
              unpadded_loads: bool = False) -> list[int]:
    def cf(i: int) -> int:
        return i + (i >> 5)

    def scan(t: list[int]) -> list[int]:
        tree = [3] * (cf(TILE - 1) + 1)  # what shared memory held before
        for i, v in enumerate(t):
            tree[i if unpadded_loads else cf(i)] = v  # blelloch-unpadded-loads
        s = 1
        while s < TILE:
            for k in range(TILE // (2 * s)):
                tree[cf(s * (2 * k + 2) - 1)] += tree[cf(s * (2 * k + 1) - 1)]
            s *= 2
        tree[TILE - 1 if root_unpadded else cf(TILE - 1)] = 0  # blelloch-root-cleared-unpadded
        s = TILE // 2
        while s >= 1:
            for k in range(TILE // (2 * s)):
                left, right = cf(s * (2 * k + 1) - 1), cf(s * (2 * k + 2) - 1)
                if downsweep_no_temp:  # blelloch-downsweep-no-temp: the left sum is overwritten first
                    tree[left] = tree[right]
                    tree[right] += tree[left]
                else:
                    tree[left], tree[right] = tree[right], tree[right] + tree[left]
            s //= 2
        return [tree[cf(i)] for i in range(TILE)]
    return _tiles(x, scan)


def _warp_shuffle(x: list[int], steps: int = 5, inclusive_offsets: bool = False,
                  total_from_lane_0: bool = False) -> list[int]:
    def scan(t: list[int]) -> list[int]:
        warps = []
        for w in range(TILE // 32):
            v = t[32 * w:32 * w + 32]
            for d in (1, 2, 4, 8, 16)[:steps]:  # warp-scan-four-steps
                v = [v[lane] + (v[lane - d] if lane >= d else 0) for lane in range(32)]
            warps.append(v)
        totals = [v[0] if total_from_lane_0 else v[31] for v in warps]  # warp-total-from-lane-0
        offsets = [sum(totals[:w + 1]) if inclusive_offsets else sum(totals[:w]) for w in range(len(totals))]
        return [v + offsets[w] for w, vs in enumerate(warps) for v in vs]
    return _tiles(x, scan)


def _block_scan(test: str, n: int, inclusive: bool, bug) -> tuple[str, list[str]]:
    """One block-scan test (BlockScanCorrectness.<test>/<n>) of the kernel `bug` simulates."""
    seed = 7007 + {"HillisSteele": 1, "Blelloch": 2, "WarpShuffle": 3}[test] * n  # as test_scan.cu seeds them
    x = _input(n, seed)
    expected, actual = _reference(x, inclusive), bug(x)
    if expected == actual:
        return f"BlockScanCorrectness.{test}/{n}", []
    kind = "inclusive" if inclusive else "exclusive"
    body = compare(expected, actual, seed)
    streamed = f"{kind} scan of n = {n}" + (f" in independent tiles of {TILE}" if TILE < n else "")
    return f"BlockScanCorrectness.{test}/{n}", [value_of(SCAN_AT, SCAN_EXPR, body, streamed)]


def _block_scans(test: str, inclusive: bool, bug,
                 sizes=(1, 31, 33, 1023, 1024, 1025, 4097)) -> dict[str, TResult]:
    return grade("07-scan", [_block_scan(test, n, inclusive, bug) for n in sizes])


def test_07_simulated_block_scans_are_right_without_their_bugs() -> None:
    x = _input(4097, 1)
    assert _hillis_steele(x) == _warp_shuffle(x) == _reference(x, True)
    assert _blelloch(x) == _reference(x, False)


def test_07_hillis_steele_that_misses_its_last_step() -> None:
    """hs-reads-stale-buffer: the result is written from the buffer the last step read."""
    graded = _block_scans("HillisSteele", True, lambda x: _hillis_steele(x, stale_buffer=True))
    assert graded["BlockScanCorrectness.HillisSteele/33"].status is Status.PASSED
    for n in (1023, 1024, 4097):
        hint = graded[f"BlockScanCorrectness.HillisSteele/{n}"].hint
        assert "the output misses the last step (offset 512)" in hint and "not the one it read from" in hint
        assert "ceil-div" not in hint


def test_07_hillis_steele_whose_first_element_reaches_no_other() -> None:
    """hs-strict-offset-guard: t > offset instead of t >= offset."""
    graded = _block_scans("HillisSteele", True, lambda x: _hillis_steele(x, strict_guard=True))
    for n in (33, 1024, 1025, 4097):
        hint = graded[f"BlockScanCorrectness.HillisSteele/{n}"].hint
        assert "is off by -" in hint and "that element never reaches the others" in hint, hint


def test_07_hillis_steele_race() -> None:
    """hs-no-barrier-per-step, hs-in-place-one-barrier: racecheck in the Hillis-Steele kernel."""
    t = graded_race("07-scan", "block_scan_hillis_steele_kernel(const int *, int *, unsigned long)",
                    "07-scan/scan.cu:39", "07-scan/scan.cu:38")
    assert t.task == "hillis-steele"
    assert "with one buffer, read, __syncthreads(), write, __syncthreads()" in t.hint


def test_07_blelloch_that_clears_the_root_at_its_unpadded_index() -> None:
    graded = _block_scans("Blelloch", False, lambda x: _blelloch(x, root_unpadded=True))
    for n in (33, 1024, 4097):
        hint = graded[f"BlockScanCorrectness.Blelloch/{n}"].hint
        assert "the down-sweep started from a root that still held it" in hint
        assert "conflict_free(kBlockScanTile - 1)" in hint and "Blelloch's scan is exclusive" not in hint


def test_07_blelloch_first_failures_name_their_cause() -> None:
    """What a GPU run of the gate with --diagnose showed first for three Blelloch bugs (issue 25), which the
    generic advice explained as "is the kernel launched?" or not at all."""
    root = _block_scans("Blelloch", False, lambda x: _blelloch(x, root_unpadded=True), sizes=(1,))
    hint = root["BlockScanCorrectness.Blelloch/1"].hint
    assert "out[0] is always 0" in hint and "conflict_free(kBlockScanTile - 1)" in hint
    assert "is the kernel launched" not in hint
    no_temp = _block_scans("Blelloch", False, lambda x: _blelloch(x, downsweep_no_temp=True), sizes=(1, 31, 1024))
    assert no_temp["BlockScanCorrectness.Blelloch/1"].status is Status.PASSED
    hint = no_temp["BlockScanCorrectness.Blelloch/31"].hint
    assert "the wrong elements are 0" in hint and "read the left child's old value" in hint
    loads = _block_scans("Blelloch", False, lambda x: _blelloch(x, unpadded_loads=True), sizes=(31, 1023))
    assert loads["BlockScanCorrectness.Blelloch/31"].status is Status.PASSED  # below 32 both indices agree
    hint = loads["BlockScanCorrectness.Blelloch/1023"].hint
    assert "must all use conflict_free()" in hint


def test_07_warp_offsets_inclusive_at_one_element() -> None:
    """warp-inclusive-warp-offsets at n = 1: warp 0 adds its own total, so its one element doubles."""
    graded = _block_scans("WarpShuffle", True, lambda x: _warp_shuffle(x, inclusive_offsets=True), sizes=(1,))
    hint = graded["BlockScanCorrectness.WarpShuffle/1"].hint
    assert "warp 0 added its own total" in hint and "is the kernel launched" not in hint


def test_07_blelloch_race() -> None:
    """blelloch-no-final-barrier, blelloch-upsweep-barrier-late."""
    t = graded_race("07-scan", "block_scan_blelloch_kernel(const int *, int *, unsigned long)",
                    "07-scan/scan.cu:104", "07-scan/scan.cu:109")
    assert t.task == "blelloch" and "before every level of the up-sweep and the down-sweep" in t.hint


def test_07_warp_scan_of_four_steps() -> None:
    graded = _block_scans("WarpShuffle", True, lambda x: _warp_shuffle(x, steps=4))
    for n in (33, 1024, 4097):
        hint = graded[f"BlockScanCorrectness.WarpShuffle/{n}"].hint
        assert "the warp scan stops one step short" in hint and "d = 1, 2, 4, 8 and 16" in hint
        assert "ceil-div" not in hint


def test_07_warp_totals_from_lane_0() -> None:
    """warp-total-from-lane-0: warp 0 is right, every later warp adds a wrong offset."""
    graded = _block_scans("WarpShuffle", True, lambda x: _warp_shuffle(x, total_from_lane_0=True))
    for n in (33, 1024, 4097):
        hint = graded[f"BlockScanCorrectness.WarpShuffle/{n}"].hint
        assert "Check that lane 31, which holds the warp's total after the scan, writes s_warp_sums" in hint


def test_07_warp_offsets_that_include_the_warps_own_total() -> None:
    """warp-inclusive-warp-offsets: the first warp is wrong too, by a constant."""
    graded = _block_scans("WarpShuffle", True, lambda x: _warp_shuffle(x, inclusive_offsets=True))
    for n in (33, 1024, 4097):
        hint = graded[f"BlockScanCorrectness.WarpShuffle/{n}"].hint
        assert "an exclusive scan of the warp totals" in hint and "lane 31" not in hint


def test_07_warp_shuffle_called_by_some_lanes_only() -> None:
    """warp-shfl-inside-branch: synccheck, not a wrong answer."""
    log = ("========= COMPUTE-SANITIZER\n"
           "========= Barrier error detected. Divergent thread(s) in warp\n"
           "=========     at 0x00000270 in /home/s/labs/07-scan/scan.cu:141:block_scan_warp_shuffle_kernel(const int *, "
           "int *, unsigned long)\n"
           "=========     by thread (1,0,0) in block (0,0,0)\n"
           "=========\n"
           "========= ERROR SUMMARY: 96 errors\n")
    t = grade("07-scan", [], extra=[sanitizer_result("synccheck", log)])["sanitizer.synccheck"]
    assert t.task == "warp-shuffle" and "Keep the shuffle out of any if (lane >= d)" in t.hint
    assert "__syncthreads() must not sit inside a branch" not in t.hint


def test_07_hints_stay_with_their_task() -> None:
    # The upper half of a Blelloch tile wrong: not Hillis-Steele's missing last step.
    blelloch = _lab_hint("07-scan", [("BlockScanCorrectness.Blelloch/4096", "blelloch",
                                      _wrong(4096, 512, [(512, "2041", "2050"), (513, "2045", "2049")], bad=2048))])[0]
    assert "misses the last step" not in blelloch and "the __syncthreads() between loading a tile" in blelloch
    # A Hillis-Steele scan off by a constant is not Blelloch's root.
    hs = _block_scans("HillisSteele", True, lambda x: _hillis_steele(x, strict_guard=True), sizes=(1024,))
    assert "conflict_free" not in hs["BlockScanCorrectness.HillisSteele/1024"].hint
    # A whole-array scan wrong from index 32 on is not a warp-offset bug.
    any_n = _lab_hint("07-scan", [("ScanCorrectness.Inclusive/4096", "any-n",
                                   _wrong(4096, 32, [(32, "130", "125"), (33, "133", "128")], bad=4064))])[0]
    assert "lane 31" not in any_n
    # A memcheck finding in the Hillis-Steele kernel gets the grader's bounds advice, not the race advice.
    oob = memcheck_log_short("Invalid __global__ write of size 4 bytes",
                        "block_scan_hillis_steele_kernel(const int *, int *, unsigned long)", "07-scan/scan.cu:45")
    t = grade("07-scan", [], extra=[sanitizer_result("memcheck", oob)])["sanitizer.memcheck"]
    assert t.task == "hillis-steele" and "bounds guard" in t.hint and "__syncthreads" not in t.hint


def test_07_hillis_steele_that_reads_a_neighbour_mid_step() -> None:
    """hs-no-barrier-per-step as the H200 gate saw it at n = 31: partial sums a place off ([4] holds what
    belongs at [3]) before racecheck runs. The hint names the barrier after each step."""
    expected = [6, 6, 12, 18, 24, 27, 28, 30, 33, 39]
    actual = [6, 6, 6, 7, 18, 14, 5, 9, 11, 12]
    body = ("29 of 31 elements differ (seed 7038, exact); mismatches span indices 2..30\n"
            + "".join(f"  [{i}] expected {expected[i]}, actual {actual[i]}\n" for i in range(2, 10))
            + "  ... and 21 more")
    failure = value_of(SCAN_AT, SCAN_EXPR, body, "inclusive scan of n = 31")
    t = grade("07-scan", [("BlockScanCorrectness.HillisSteele/31", [failure])])["BlockScanCorrectness.HillisSteele/31"]
    assert t.task == "hillis-steele"
    assert "a thread read its neighbour while that neighbour was still in the middle of a step" in t.hint, t.hint
    assert "__syncthreads() after every step" in t.hint
