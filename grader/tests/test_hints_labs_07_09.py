"""The hints of labs 07 (scan), 08 (histogram) and 09 (streams), each fired on the failure its bug really
produces (solutions/NN-slug/mutants/ describes the bugs), and kept away from the failures of other tasks.

A failure is built the way a test binary reports it: the message a test's EXPECT_* prints (cudalab/
compare.hpp for arrays, written here by _compare), as a GoogleTest JSON report that grader/execute/gtest.py
reads (which also picks the category: a message naming any cudaError... is a cuda_error); compute-sanitizer
findings go through grader/execute/sanitizer.py's parser, missing techniques through penalties. Then the
score stage (scoring.score) gives each test its task and its hint, as in a real grade."""

from __future__ import annotations

import io
import math
import random
from pathlib import Path

from grader.execute import gtest, sanitizer
from grader.inspect.techniques import TechniqueOutcome
from grader.model.labs import discover
from grader.model.progress import Progress
from grader.model.results import Category, LabResult, Status
from grader.model.results import TestResult as TResult
from grader.score import scoring
from grader.tests.test_hints import _lab_hint, _wrong

ROOT = Path(__file__).resolve().parents[2]
LABS = {lab.name: lab for lab in discover(ROOT)}
POISON_INT = -1515870811  # an int32 of 0xA5 bytes (cudalab::poison)
FILL_BINS = 0xA5A5A5A5  # the bins before every histogram call


# --- failures as the test binaries print them ------------------------------------------------------------

def _show(v: float | int) -> str:
    """A value as compare.hpp prints it: integers as they are, floats with 9 significant digits."""
    if isinstance(v, float):
        if math.isnan(v):
            return "-nan" if math.copysign(1.0, v) < 0 else "nan"
        return f"{v:.9g}"
    return str(v)


def _compare(expected: list, actual: list, seed: int) -> str:
    """cudalab::AllEqual's failure text (compare.hpp): the count, the span, the first 8 mismatches."""
    bad = [i for i, (e, a) in enumerate(zip(expected, actual)) if not (e == a)]
    assert bad, "a failure needs a mismatch"
    text = (f"{len(bad)} of {len(expected)} elements differ (seed {seed}, exact); mismatches span indices "
            f"{bad[0]}..{bad[-1]}\n")
    text += "".join(f"  [{i}] expected {_show(expected[i])}, actual {_show(actual[i])}\n" for i in bad[:8])
    return text + (f"  ... and {len(bad) - 8} more" if len(bad) > 8 else "")


def _value_of(where: str, expr: str, body: str, streamed: str = "") -> str:
    """EXPECT_TRUE(expr) << streamed, failed with an AssertionResult message, as gtest reports it."""
    text = f"{where}\nValue of: {expr}\n  Actual: false ({body})\nExpected: true"
    return text + (f"\n{streamed}" if streamed else "")


def _equal(where: str, a: str, a_is: str, b: str, b_is: str, streamed: str = "") -> str:
    """EXPECT_EQ(a, b) << streamed (gtest leaves out "Which is" where the expression is its own value)."""
    def side(expr: str, value: str) -> str:
        return f"\n  {expr}" + (f"\n    Which is: {value}" if value != expr else "")
    return (f"{where}\nExpected equality of these values:{side(a, a_is)}{side(b, b_is)}"
            + (f"\n{streamed}" if streamed else ""))


def _exception(what: str) -> str:
    """A CudaError (cudalab/check.cuh) escaping the test body."""
    return f'unknown file\nC++ exception with description "{what}" thrown in the test body.'


def _cuda_error(name: str, text: str, call: str, where: str) -> str:
    return _exception(f"CUDA error {name} ({text}) from `{call}` at {where}")


def _sanitizer(tool: str, log: str) -> TResult:
    """A compute-sanitizer result as grader/execute/sanitizer.run_tool makes it from the tool's log."""
    findings, total = sanitizer.parse_log(log, tool)
    count = total if total is not None else sum(f.count for f in findings)
    lines = [f"compute-sanitizer {tool} reported {count} error(s):"] + [f"  {f.line()}" for f in findings]
    kernels = ",".join(sorted({f.kernel for f in findings if f.kernel}))
    return TResult(name=f"sanitizer.{tool}", status=Status.FAILED, kind="correctness",
                   category=Category.SANITIZER, message="\n".join(lines),
                   properties={"sanitizer_tool": tool, "sanitizer_kernels": kernels})


def _race_log(kernel: str, write_at: str, read_at: str, hazards: int = 2048) -> str:
    return ("========= COMPUTE-SANITIZER\n"
            "========= Error: Race reported between Write access at "
            f"{kernel}+0x3f0 in /home/s/labs/{write_at}\n"
            f"=========     and Read access at {kernel}+0x410 in /home/s/labs/{read_at} [{hazards} hazards]\n"
            "=========\n"
            "========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)\n")


def _memcheck_log(what: str, kernel: str, at: str, errors: int = 64) -> str:
    return ("========= COMPUTE-SANITIZER\n"
            f"========= {what}\n"
            f"=========     at {kernel}+0x2c0 in /home/s/labs/{at}\n"
            "=========     by thread (37,0,0) in block (0,0,0)\n"
            "=========     Address 0x3c is out of bounds\n"
            "=========\n"
            f"========= ERROR SUMMARY: {errors} errors\n")


def _grade(lab_name: str, tests: list[tuple[str, list[str]]], extra: list[TResult] | None = None,
           missing: list[str] | None = None) -> dict[str, TResult]:
    """Score a run of the lab's binary that reported these tests (name, raw gtest failures; none: passed),
    plus extra results (sanitizer, a stopped process) and the techniques whose message contains one of
    missing; the tests by name, each with its task and hint."""
    lab = LABS[lab_name]
    suites: dict[str, list[dict]] = {}
    for name, failures in tests:
        suite, _, test = name.partition(".")
        suites.setdefault(suite, []).append({"name": test, "status": "RUN", "result": "COMPLETED",
                                             "failures": [{"failure": f} for f in failures]})
    run = gtest.parse_report({"testsuites": [{"name": s, "testsuite": t} for s, t in suites.items()]})
    result = LabResult(number=lab.number, name=lab.name, title=lab.title, max_score=100)
    result.tests = run.tests + list(extra or [])
    outcomes = [TechniqueOutcome(t, False, f"the PTX of {t.kernel}" if t.kind == "ptx"
                                 else "the functions your code calls")
                for t in lab.techniques if any(m in t.message for m in missing or [])]
    assert len(outcomes) == len(missing or []), "each missing technique names one of the lab's"
    scoring.score(lab, result, techniques=(outcomes, []) if missing else None, gpu={}, label="student",
                  progress=Progress(stream=io.StringIO()))
    return {t.name: t for t in result.tests}


def _hint(lab_name: str, name: str, failures: list[str], **kwargs) -> TResult:
    return _grade(lab_name, [(name, failures)], **kwargs)[name]


def _stopped(name: str, category: Category, message: str) -> TResult:
    """A test whose process was stopped (grader/execute/runs.py)."""
    return TResult(name=name, status=Status.FAILED, kind="correctness", category=category, message=message)


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


def _blelloch(x: list[int], root_unpadded: bool = False) -> list[int]:
    def cf(i: int) -> int:
        return i + (i >> 5)

    def scan(t: list[int]) -> list[int]:
        tree = [0] * (cf(TILE - 1) + 1)
        for i, v in enumerate(t):
            tree[cf(i)] = v
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
    body = _compare(expected, actual, seed)
    streamed = f"{kind} scan of n = {n}" + (f" in independent tiles of {TILE}" if TILE < n else "")
    return f"BlockScanCorrectness.{test}/{n}", [_value_of(SCAN_AT, SCAN_EXPR, body, streamed)]


def _block_scans(test: str, inclusive: bool, bug,
                 sizes=(1, 31, 33, 1023, 1024, 1025, 4097)) -> dict[str, TResult]:
    return _grade("07-scan", [_block_scan(test, n, inclusive, bug) for n in sizes])


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
    log = _race_log("block_scan_hillis_steele_kernel(const int *, int *, unsigned long)", "07-scan/scan.cu:39",
                    "07-scan/scan.cu:38")
    t = _grade("07-scan", [], extra=[_sanitizer("racecheck", log)])["sanitizer.racecheck"]
    assert t.task == "hillis-steele"
    assert "with one buffer, read, __syncthreads(), write, __syncthreads()" in t.hint


def test_07_blelloch_that_clears_the_root_at_its_unpadded_index() -> None:
    graded = _block_scans("Blelloch", False, lambda x: _blelloch(x, root_unpadded=True))
    for n in (33, 1024, 4097):
        hint = graded[f"BlockScanCorrectness.Blelloch/{n}"].hint
        assert "the down-sweep started from a root that still held it" in hint
        assert "conflict_free(kBlockScanTile - 1)" in hint and "Blelloch's scan is exclusive" not in hint


def test_07_blelloch_race() -> None:
    """blelloch-no-final-barrier, blelloch-upsweep-barrier-late."""
    log = _race_log("block_scan_blelloch_kernel(const int *, int *, unsigned long)", "07-scan/scan.cu:104",
                    "07-scan/scan.cu:109")
    t = _grade("07-scan", [], extra=[_sanitizer("racecheck", log)])["sanitizer.racecheck"]
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
    t = _grade("07-scan", [], extra=[_sanitizer("synccheck", log)])["sanitizer.synccheck"]
    assert t.task == "warp-shuffle" and "Keep the shuffle out of any if (lane >= d)" in t.hint
    assert "__syncthreads() must not sit inside a branch" not in t.hint


def test_07_any_n_launches_zero_blocks_at_one_full_tile() -> None:
    """anyn-single-tile-test-on-n: CUDA 13 reports a grid of 0 blocks as cudaErrorInvalidValue."""
    zero_blocks = _cuda_error("cudaErrorInvalidValue", "invalid argument", "kernel launch",
                              "/home/s/labs/07-scan/scan.cu:389")
    graded = _grade("07-scan", [("ScanCorrectness.Exclusive/4096", [zero_blocks]),
                                ("ScanCorrectness.Exclusive/4097", []),
                                ("ScanCorrectness.Exclusive/16777216", [zero_blocks])])
    for name in ("ScanCorrectness.Exclusive/4096", "ScanCorrectness.Exclusive/16777216"):
        t = graded[name]
        assert t.category is Category.CUDA_ERROR and t.task == "any-n"
        assert "Check the one-tile test in scan_any at exactly one full tile" in t.hint


def test_07_any_n_misaligned_scratch() -> None:
    """anyn-unaligned-offsets: 6 tile totals (n = 20483) put the offsets 24 bytes in."""
    fault = _cuda_error("cudaErrorMisalignedAddress", "misaligned address", "cudaDeviceSynchronize()",
                        "/home/s/labs/07-scan/test_scan.cu:99")
    t = _hint("07-scan", "ScanCorrectness.Inclusive/20483", [fault])
    assert "must start 16-byte aligned" in t.hint and "round_up_to_int4" in t.hint


def _scratch_overrun(n: int, reserved: int, past: int) -> str:
    """guards_intact of the scratch: the scan wrote `past` bytes beyond the `reserved` it asked for."""
    return _value_of(
        "/home/s/labs/07-scan/test_scan.cu:110", 'scratch->guards_intact("the scratch (d_temp)")',
        f"out-of-bounds write: a kernel changed memory outside the scratch (d_temp) ({reserved} element(s) of 1 "
        f"bytes): {past} byte(s) past its end (the first at byte 0 past the end). Check the bounds guard of every "
        "thread that writes it.",
        f"n = {n}: the scan used more scratch than its *_temp_bytes(n) = {reserved} bytes reserved")


def test_07_any_n_uses_more_scratch_than_it_asked_for() -> None:
    """anyn-temp-bytes-half: the output is right, the scratch's guard zone is not."""
    t = _hint("07-scan", "ScanCorrectness.Exclusive/20483", [_scratch_overrun(20483, 32, 24)])
    assert "scan_any wrote past the scratch that scan_temp_bytes(n) reserved" in t.hint
    assert "i < n, not i <= n" not in t.hint


def _huge(kind: str, first: int, wrong: int) -> str:
    return _equal("/home/s/labs/07-scan/test_scan.cu:367", "errors[0]", str(wrong), "0u", "0",
                  f"{kind} scan of n = 4294979641 (more than 2^32 items): {wrong} item(s) wrong, the first at index "
                  f"{first} (item 2^32 is index 4294967296). Do your kernels compute indices in 64 bits "
                  "(std::size_t) everywhere?")


def test_07_any_n_tile_base_in_32_bits() -> None:
    """anyn-32bit-tile-base: tile 2^20 lands on tile 0 again."""
    t = _hint("07-scan", "ScanHugeCorrectness.Propagate", [_huge("inclusive", 0, 4294979641)])
    assert t.task == "any-n" and "Convert blockIdx.x to std::size_t before you multiply" in t.hint


def test_07_any_n_race_before_the_warp_totals_are_scanned() -> None:
    """anyn-no-barrier-before-warp-scan."""
    log = _race_log("void scan_tiles_kernel<true>(const int *, int *, unsigned long, int *)", "07-scan/scan.cu:316",
                    "07-scan/scan.cu:318")
    t = _grade("07-scan", [], extra=[_sanitizer("racecheck", log)])["sanitizer.racecheck"]
    assert t.task == "any-n" and "a __syncthreads() after the totals are written" in t.hint


def test_07_decoupled_tile_numbers_from_block_index() -> None:
    """dlb-tile-from-blockidx: no test can provoke the hang; the technique check catches it."""
    t = _grade("07-scan", [], missing=["atomic counter"])["Techniques.decoupled"]
    assert t.category is Category.TECHNIQUE_MISSING and "a block that has no SM to run on" in t.hint


def test_07_decoupled_scratch_cleared_only_once() -> None:
    """dlb-scratch-cleared-once: call 2 starts past the last tile, so nothing is written."""
    n = (1 << 18) + 11
    x = _input(n, 7007 + 101)
    acc, expected = 0, []
    for v in x:
        acc += v
        expected.append(acc)
    body = _compare(expected, [POISON_INT] * n, 7007 + 101)
    t = _hint("07-scan", "ScanDecoupledReuseCorrectness.FiveCallsOneScratch", [
        _value_of(SCAN_AT, SCAN_EXPR, body, f"inclusive scan of n = {n}"),
        "/home/s/labs/07-scan/test_scan.cu:238\nFailed\ncall 2 of 5 with the same scratch went wrong"])
    assert "the tile counter and the status words still held the previous call's values" in t.hint


def test_07_reused_scratch_comes_before_the_look_back_pattern() -> None:
    """With only the statuses left over (the counter cleared), call 2 finds stale P words: tile 0 is right and
    the later tiles are not, which alone would get the look-back advice; the reuse is the sharper clue."""
    stale = _wrong(262155, 8192, [(8192, "32821", "65590"), (8193, "32824", "65593")])
    t = _hint("07-scan", "ScanDecoupledReuseCorrectness.FiveCallsOneScratch", [
        _value_of(SCAN_AT, SCAN_EXPR, stale, "inclusive scan of n = 262155"),
        "/home/s/labs/07-scan/test_scan.cu:238\nFailed\ncall 2 of 5 with the same scratch went wrong"])
    assert t.hint.startswith("Everything from index 8,192 on is wrong")
    assert "still held the previous call's values" in t.hint and "the look-back must add" not in t.hint
    # Call 1 wrong is no reuse problem: the look-back advice.
    first = _hint("07-scan", "ScanDecoupledReuseCorrectness.FiveCallsOneScratch", [
        _value_of(SCAN_AT, SCAN_EXPR, stale, "exclusive scan of n = 262155"),
        "/home/s/labs/07-scan/test_scan.cu:238\nFailed\ncall 1 of 5 with the same scratch went wrong"])
    assert "the look-back must add every earlier tile" in first.hint


def test_07_decoupled_scratch_and_64_bit_hints() -> None:
    scratch = _grade("07-scan", [("ScanDecoupledCorrectness.Exclusive/1048583", [_scratch_overrun(1048583, 520, 8)])])
    assert "scan_decoupled_temp_bytes(n) reserved" in scratch["ScanDecoupledCorrectness.Exclusive/1048583"].hint
    assert "scan_any" not in scratch["ScanDecoupledCorrectness.Exclusive/1048583"].hint
    huge = _grade("07-scan", [("ScanHugeCorrectness.Decoupled", [_huge("exclusive", 4294967296, 12345)])])
    hint = huge["ScanHugeCorrectness.Decoupled"].hint
    assert "Convert the tile number to std::size_t before you multiply" in hint and "blockIdx.x" not in hint


def test_07_a_huge_failure_beside_smaller_ones_is_no_32_bit_lead() -> None:
    """A GPU run of anyn-inclusive-tile-offsets (issue 25): the tile offsets are wrong from n = 4097 on, and the
    2^32 test fails for the same reason; its hint said to widen blockIdx.x, a wrong lead."""
    tile = _wrong(4097, 4096, [(4096, "16312", "16313")])
    graded = _grade("07-scan", [("ScanCorrectness.Inclusive/4097", [_value_of(SCAN_AT, SCAN_EXPR, tile)]),
                                ("ScanHugeCorrectness.Propagate", [_huge("inclusive", 4096, 4294975545)])])
    hint = graded["ScanHugeCorrectness.Propagate"].hint
    assert "Smaller tests of this task fail too: fix those first" in hint and "blockIdx.x" not in hint


def test_07_decoupled_race_after_the_look_back() -> None:
    """dlb-no-barrier-after-lookback."""
    log = _race_log("void decoupled_scan_kernel<false>(const int *, int *, unsigned long, unsigned long long *, "
                    "unsigned int *)", "07-scan/scan.cu:517", "07-scan/scan.cu:521")
    t = _grade("07-scan", [], extra=[_sanitizer("racecheck", log)])["sanitizer.racecheck"]
    assert t.task == "decoupled" and "only after a __syncthreads() that follows that write" in t.hint


def test_07_decoupled_look_back_that_never_ends() -> None:
    name = "ScanDecoupledCorrectness.Exclusive/16777216"
    t = _grade("07-scan", [], extra=[_stopped(name, Category.TIMEOUT,
                                              "the test did not finish within 300 s and was stopped")])[name]
    assert t.task == "decoupled" and "a look-back waited for a status that never left X" in t.hint


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
    oob = _memcheck_log("Invalid __global__ write of size 4 bytes",
                        "block_scan_hillis_steele_kernel(const int *, int *, unsigned long)", "07-scan/scan.cu:45")
    t = _grade("07-scan", [], extra=[_sanitizer("memcheck", oob)])["sanitizer.memcheck"]
    assert t.task == "hillis-steele" and "bounds guard" in t.hint and "__syncthreads" not in t.hint


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
    return _value_of(f"{HIST_AT}:167", "AllEqual(expected, d_bins.to_host(), byte)",
                     _compare(expected, actual, HOT),
                     f"{fn} on {n} bytes all equal to {HOT} (the call just before the one on the test's input)")


def _histogram(fn: str, dist: str, n: int, expected: list[int], actual: list[int]) -> str:
    """HistogramCorrectness' own check."""
    return _value_of(f"{HIST_AT}:223", "AllEqual(in.expected, run_histogram(fn, name, in.bytes), kSeed + c.n)",
                     _compare(expected, actual, 8008 + n),
                     f"{fn} on {dist} bytes, n = {n} (index = bin; 2779096485 = 0xA5A5A5A5 means the bin was "
                     "never zeroed)")


def test_08_global_bins_never_zeroed() -> None:
    """global-bins-not-zeroed: every bin is 0xA5A5A5A5 plus its count, for n = 0 exactly the fill."""
    x = _uniform(4099)
    hot = [0] * 256
    hot[HOT] = 4099
    graded = _grade("08-histogram", [
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
    t = _hint("08-histogram", "HistogramCorrectness.Global/uniform_65531", [
        _before("histogram_global", 65531, hot), _histogram("histogram_global", "uniform", 65531, _bins(x), lost)])
    assert "loses increments, so count with atomicAdd(&bins[b], 1u)" in t.hint


def test_08_global_launch_for_an_empty_input() -> None:
    zero_blocks = _cuda_error("cudaErrorInvalidValue", "invalid argument", "kernel launch",
                              "/home/s/labs/08-histogram/histogram.cu:47")
    t = _hint("08-histogram", "HistogramCorrectness.Global/uniform_0", [zero_blocks])
    assert t.category is Category.CUDA_ERROR and "launch the kernel only when n > 0" in t.hint


def test_08_global_index_in_int() -> None:
    """global-int-index: the bytes past 2^31 are not counted."""
    expected = [8388624 + (b % 5) for b in range(256)]
    actual = [e - 16 for e in expected]
    t = _hint("08-histogram", "HistogramHugeCorrectness.Global", [_value_of(
        f"{HIST_AT}:374", "AllEqual(expected, d_bins.to_host(), kSeed + 31)", _compare(expected, actual, 8039),
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
        t = _hint("08-histogram", f"HistogramCorrectness.Shared/uniform_{n}", failures)
        assert "visits every byte exactly once" in t.hint and "separates the counting from the commit" in t.hint


def test_08_shared_private_bins_never_zeroed() -> None:
    """The private bins start from the junk the tests leave in shared memory."""
    rng = random.Random(5)
    junk = [rng.randrange(1 << 32) for _ in range(256)]
    t = _hint("08-histogram", "HistogramCorrectness.Shared/skewed_4099", [_before("histogram_shared", 4099, junk)])
    assert "Zero the private bins, then __syncthreads() before counting" in t.hint


def test_08_shared_barrier_after_zeroing_missing() -> None:
    """shared-no-barrier-after-zeroing: no output shows it; the compiled kernel has one barrier."""
    t = _grade("08-histogram", [], missing=["after zeroing"])["Techniques.shared"]
    assert t.category is Category.TECHNIQUE_MISSING and "no test output can show the first one missing" in t.hint


def _letters(name: str, n: int, expected: list[int], actual: list[int], seed: int) -> str:
    return _value_of(f"{HIST_AT}:303", "AllEqual(cpu_text_histogram(text), d_bins.to_host(), seed)",
                     _compare(expected, actual, seed), f"bins: a-d, e-h, i-l, m-p, q-t, u-x, y-z; n = {n}")


def _q_before(n: int, actual: list[int]) -> str:
    """call_before of the text histogram: n times 'Q', all in bin q-t."""
    expected = [0, 0, 0, 0, n, 0, 0]
    return _value_of(f"{HIST_AT}:167", "AllEqual(expected, d_bins.to_host(), byte)",
                     _compare(expected, actual, 81),
                     f"histogram_text on {n} bytes all equal to 81 (the call just before the one on the test's "
                     "input)")


def test_08_text_memset_of_bytes_not_bins() -> None:
    """text-memset-bytes-not-bins: 7 bytes cleared, so bin 1 keeps 0xA5 in its top byte, bins 2-6 all of it."""
    actual = [0, 0xA5000000, FILL_BINS, FILL_BINS, FILL_BINS + 4099, FILL_BINS, FILL_BINS]
    t = _hint("08-histogram", "HistogramTextCorrectness.Letters/mixed_4099", [_q_before(4099, actual)])
    assert "cudaMemsetAsync takes a count of bytes" in t.hint and "histogram_global" not in t.hint


def test_08_text_upper_case_not_counted() -> None:
    """text-upper-case-ignored: the text of 'Q's counts nothing."""
    graded = _grade("08-histogram", [
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
    t = _hint("08-histogram", "HistogramTextCorrectness.Letters/edges_4099",
              [_letters("edges", 4099, expected, expected[:6] + [1181 + 287], 8008 + 3 * 4099 + 1)])
    assert "check both ends of your range test" in t.hint and "ceil-div" not in t.hint


def test_08_text_shared_counters_never_zeroed() -> None:
    rng = random.Random(9)
    t = _hint("08-histogram", "HistogramTextCorrectness.Letters/mixed_255",
              [_q_before(255, [rng.randrange(1 << 32) for _ in range(7)])])
    assert "the 7 shared counters start with whatever shared memory held" in t.hint


def test_08_text_course_notes_bug() -> None:
    """The course notes' kernel: byte / 4 indexes far past the 7 shared counters."""
    log = _memcheck_log("Invalid __shared__ write of size 4 bytes",
                        "histogram_text_kernel(const char *, unsigned long, unsigned int *)", "08-histogram/histogram.cu:84")
    fault = _cuda_error("cudaErrorIllegalAddress", "an illegal memory access was encountered", "cudaDeviceSynchronize()",
                        f"{HIST_AT}:300")
    graded = _grade("08-histogram", [("HistogramTextCorrectness.Letters/mixed_4099", [fault])],
                    extra=[_sanitizer("memcheck", log)])
    memcheck = graded["sanitizer.memcheck"]
    assert memcheck.task == "text" and "the bug of the course notes' version" in memcheck.hint
    crash = graded["HistogramTextCorrectness.Letters/mixed_4099"]
    assert crash.category is Category.CUDA_ERROR and "most likely writing past its 7 shared counters" in crash.hint


def test_08_coarsened_counts_the_zero_padding() -> None:
    """coarse-counts-padding: the vectors past n / 16 of the last step count as 0 bytes."""
    hot = [0] * 256
    hot[HOT], hot[0] = 4099, 61
    t = _hint("08-histogram", "HistogramCorrectness.Coarsened/hot_4099", [_before("histogram_coarsened", 4099, hot)])
    assert "Only bin 0 is wrong: zero bytes that are not part of the input were counted" in t.hint
    assert "even when you load it as zeros" in t.hint


def test_08_coarsened_runs_and_tail() -> None:
    """coarse-last-run-not-flushed, coarse-tail-not-counted, coarse-tail-counted-by-every-block."""
    for counted in (4099 - 2048, 4096, 4099 + 3 * 15):
        hot = [0] * 256
        hot[HOT] = counted
        t = _hint("08-histogram", "HistogramCorrectness.Coarsened/runs_4099", [_before("histogram_coarsened", 4099, hot)])
        assert "Each thread must add its last run after its loop" in t.hint


def test_08_coarsened_per_warp_histograms_partly_zeroed() -> None:
    rng = random.Random(11)
    t = _hint("08-histogram", "HistogramCorrectness.Coarsened/uniform_257",
              [_before("histogram_coarsened", 257, [rng.randrange(1 << 32) for _ in range(256)])])
    assert "zero every one of them in a loop" in t.hint


def test_08_coarsened_row_from_the_lane() -> None:
    """coarse-histogram-per-lane-index: rows past kCoarseWarps."""
    log = _memcheck_log("Invalid __shared__ atomic of size 4 bytes",
                        "histogram_coarsened_kernel(const uint4 *, unsigned long, const unsigned char *, int, unsigned int *)",
                        "08-histogram/histogram.cu:160")
    t = _grade("08-histogram", [], extra=[_sanitizer("memcheck", log)])["sanitizer.memcheck"]
    assert t.task == "coarsened" and "the row is the warp's number, threadIdx.x / 32" in t.hint


def test_08_fast_grid_of_zero_blocks_below_16_bytes() -> None:
    zero_blocks = _cuda_error("cudaErrorInvalidValue", "invalid argument", "kernel launch",
                              "/home/s/labs/08-histogram/histogram.cu:331")
    graded = _grade("08-histogram", [("HistogramCorrectness.Fast/uniform_1", [zero_blocks]),
                                     ("HistogramCorrectness.Fast/uniform_15", [zero_blocks]),
                                     ("HistogramCorrectness.Fast/uniform_255", [])])
    for n in (1, 15):
        assert "Launch at least one block when n > 0" in graded[f"HistogramCorrectness.Fast/uniform_{n}"].hint


def test_08_fast_lanes_read_before_the_others_finish() -> None:
    """fast-no-syncwarp-before-reduce."""
    log = _race_log("histogram_fast_kernel(const uint4 *, unsigned long, const unsigned char *, int, unsigned int *)",
                    "08-histogram/histogram.cu:301", "08-histogram/histogram.cu:309")
    t = _grade("08-histogram", [], extra=[_sanitizer("racecheck", log)])["sanitizer.racecheck"]
    assert t.task == "fast" and "put a __syncwarp() between counting into lane-private counters" in t.hint


def test_08_hints_stay_with_their_task() -> None:
    # The fill in a text histogram gets the text advice, not histogram_global's.
    fill = [0, 0xA5000000, FILL_BINS, FILL_BINS, FILL_BINS + 15, FILL_BINS, FILL_BINS]
    t = _hint("08-histogram", "HistogramTextCorrectness.Letters/mixed_255", [_q_before(15, fill)])
    assert "histogram_global owns its output" not in t.hint
    # The hot bin right and two other bins wrong: no hot-bin advice, the grader's own.
    x = _uniform(4099)
    off = _bins(x)
    off[17] += 1
    off[201] += 1
    t = _hint("08-histogram", "HistogramCorrectness.Shared/uniform_4099",
              [_histogram("histogram_shared", "uniform", 4099, _bins(x), off)])
    assert "hot bin" not in t.hint and "Some elements are wrong" in t.hint
    # Bin 0 alone wrong in the byte histogram of task 1: neither the text nor the coarsened advice.
    hot = [0] * 256
    hot[HOT], hot[0] = 4099, 1
    t = _hint("08-histogram", "HistogramCorrectness.Global/hot_4099", [_before("histogram_global", 4099, hot)])
    assert "range test" not in t.hint and "zero padding" not in t.hint


# --- lab 09: streams -------------------------------------------------------------------------------------

STREAMS_AT = "/home/s/labs/09-streams/test_streams.cu"


def _work(n: int, seed: int) -> list[float]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        x = y = rng.uniform(1.0, 2.0)
        for _ in range(7):
            y = y * 0.5 + x
        out.append(y)
    return out


def _output(expected: list[float], actual: list[float], seed: int, streamed: str = "", line: int = 514) -> str:
    return _value_of(f"{STREAMS_AT}:{line}", "p.output_matches()", _compare(expected, actual, seed), streamed)


def _idle(what: str, stream: int, line: int) -> str:
    """StreamsIdle: the function returned while a stream still had work."""
    return _value_of(f"{STREAMS_AT}:{line}", f'StreamsIdle(streams.get(), "{what}")',
                     f"{what} returned while stream {stream} still had work (cudaStreamQuery: cudaErrorNotReady): wait "
                     "for every stream you used before returning, so h_out holds the result")


def _legacy(what: str, seconds: float) -> list[str]:
    """expect_ignores_legacy_stream: the function waited for the kernel holding stream 0."""
    return [
        _equal(f"{STREAMS_AT}:330", "still_closed", "0", "cudaErrorNotReady", "600",
               f"{what} returned only after {seconds} s, once a kernel holding the legacy default stream (stream 0) had "
               "timed out: something in it waits for stream 0. Use your own streams created with cudaStreamNonBlocking, "
               "cudaMemcpyAsync on them (not cudaMemcpy), launches with a stream, and cudaStreamSynchronize (not "
               "cudaDeviceSynchronize)."),
        _equal(f"{STREAMS_AT}:335", "gate.outcome()", "2", "1", "1",
               "the gate kernel on stream 0 timed out instead of being opened"),
    ]


NAN = float("nan")
NEG_NAN = -float("nan")  # cudalab::poison's 0xFF bytes: printed -nan


def test_09_serial_returns_before_the_copy_back_with_pinned_memory() -> None:
    """serial-async-copy-back: fine into pageable h_out (the copy is staged), early into pinned h_out."""
    expected = _work(1000, 16010)
    graded = _grade("09-streams", [
        ("StreamsSerialCorrectness.MatchesCpu/1000", []),
        ("StreamsSerialCorrectness.PinnedReturnsWhenDone/1000", [
            _value_of(f"{STREAMS_AT}:449", 'StreamsIdle({cudaStreamLegacy}, "run_serial")',
                      "run_serial returned while stream 0 still had work (cudaStreamQuery: cudaErrorNotReady): wait for "
                      "every stream you used before returning, so h_out holds the result"),
            _output(expected, [NAN] * 1000, 16010, "read right after run_serial returned, with pinned h_out", 450)]),
    ])
    t = graded["StreamsSerialCorrectness.PinnedReturnsWhenDone/1000"]
    assert t.category is Category.CUDA_ERROR and t.task == "serial"
    assert "A cudaMemcpyAsync into pageable memory is staged" in t.hint and "compute-sanitizer" not in t.hint


def test_09_serial_copies_n_bytes() -> None:
    """serial-copies-n-bytes: a quarter of the floats go in and come back."""
    graded = {}
    for n in (1000, (1 << 20) + 3):
        expected = _work(n, 9009 + n)
        actual = expected[:n // 4] + [NAN] * (n - n // 4)
        graded.update(_grade("09-streams", [(f"StreamsSerialCorrectness.MatchesCpu/{n}",
                                             [_output(expected, actual, 9009 + n, line=438)])]))
    for t in graded.values():
        assert t.category is Category.WRONG_ANSWER and "each direction must move n * sizeof(float)" in t.hint


def test_09_streams_reserved_not_created() -> None:
    """streams-reserve-not-resize (the skeleton too): an empty vector."""
    t = _hint("09-streams", "StreamsCreateCorrectness.NonBlocking/4", [
        _equal(f"{STREAMS_AT}:473", "streams.size()", "0", "static_cast<std::size_t>(count)", "4", "create_streams(4)")])
    assert t.task == "streams" and "reserve(count) only sets aside capacity" in t.hint


def test_09_pipeline_that_uses_stream_0() -> None:
    """pipe-blocking-h2d-copy, pipe-device-synchronize, pipe-kernel-on-default-stream."""
    t = _hint("09-streams", "StreamsLegacyCorrectness.PipelineIgnoresLegacyStream", _legacy("run_pipelined", 3.00184))
    assert t.category is Category.CUDA_ERROR and t.task == "pipelined"
    assert "look for default arguments" in t.hint and "launch_work(..., nullptr)" in t.hint


def test_09_pipeline_that_waits_for_one_stream_only() -> None:
    """pipe-waits-first-stream-only: chunks on streams 1 and 2 still in flight."""
    expected = _work(1000, 9009 + 2007)
    actual = expected[:142] + [NAN] * 143 + expected[285:]
    t = _hint("09-streams", "StreamsPipelineCorrectness.MatchesCpu/n1000_s3_c7", [
        _idle("run_pipelined", 1, 513),
        _output(expected, actual, 9009 + 2007, "3 streams, 7 chunks (NaN: never copied back, or computed on input that "
                "had not arrived)")])
    assert t.category is Category.CUDA_ERROR and "call cudaStreamSynchronize on every stream of the vector" in t.hint


def test_09_pipeline_with_equal_chunk_sizes() -> None:
    """pipe-equal-chunk-sizes: 7 chunks of 142 leave the last 6 of 1000 elements out."""
    expected = _work(1000, 9009 + 2007)
    t = _hint("09-streams", "StreamsPipelineCorrectness.MatchesCpu/n1000_s3_c7", [
        _output(expected, expected[:994] + [NAN] * 6, 9009 + 2007,
                "3 streams, 7 chunks (NaN: never copied back, or computed on input that had not arrived)")])
    assert "chunk_begin(n, num_chunks, c + 1)" in t.hint and "ceil-div" not in t.hint


def test_09_pipeline_kernel_input_not_offset() -> None:
    """pipe-kernel-input-not-offset: every chunk computes on chunk 0's input."""
    expected = _work(1000, 9009 + 2007)
    begins = [1000 * c // 7 for c in range(8)]
    actual = [expected[i - max(b for b in begins[:7] if b <= i)] for i in range(1000)]
    t = _hint("09-streams", "StreamsPipelineCorrectness.MatchesCpu/n1000_s3_c7", [
        _output(expected, actual, 9009 + 2007,
                "3 streams, 7 chunks (NaN: never copied back, or computed on input that had not arrived)")])
    assert "d_in + begin and d_out + begin for the kernel" in t.hint


def test_09_pipeline_stream_per_chunk_index() -> None:
    """pipe-stream-per-chunk-index: streams[c] read past the vector for 8 chunks on 2 streams."""
    t = _hint("09-streams", "StreamsPipelineCorrectness.MatchesCpu/n5_s2_c8", [_cuda_error(
        "cudaErrorInvalidResourceHandle", "invalid resource handle",
        "cudaMemcpyAsync(d_in + begin, h_in + begin, bytes, cudaMemcpyHostToDevice, stream)",
        "/home/s/labs/09-streams/streams.cu:64")])
    assert "chunk c goes to streams[c % streams.size()]" in t.hint


def test_09_three_stages_without_their_waits() -> None:
    """events-kernel-does-not-wait, events-copied-recorded-on-compute: kernels run on the poison (-nan)."""
    n = (1 << 22) + 5
    expected = _work(64, 9050)
    t = _hint("09-streams", "StreamsEventsCorrectness.KernelWaitsForItsCopyIn", [_value_of(
        f"{STREAMS_AT}:702", "p.output_matches()",
        _compare(expected + [0.0] * (n - 64), [NEG_NAN] * 64 + [0.0] * (n - 64), 9050),
        "with the H2D stream held back for 100 ms, the kernels did not wait for their input: make s_compute wait "
        "(cudaStreamWaitEvent) for an event recorded on s_h2d after the chunk's copy")])
    assert t.category is Category.WRONG_ANSWER and t.task == "events"
    assert "The wait uses the most recent record at the time of the call" in t.hint


def test_09_three_stages_that_wait_for_the_wrong_stream() -> None:
    """events-waits-for-compute-stream."""
    what = "run_three_stage (with one stage held back for 100 ms)"
    t = _hint("09-streams", "StreamsEventsCorrectness.ReturnsWhenCopiesBackAreDone", [_idle(what, 2, 701)])
    assert t.category is Category.CUDA_ERROR and "wait for s_d2h, the stream of the last stage" in t.hint


def test_09_three_stages_on_stream_0_and_leaking_events() -> None:
    graded = _grade("09-streams", [
        ("StreamsEventsCorrectness.ThreeStageIgnoresLegacyStream", _legacy("run_three_stage", 3.00211)),
        ("StreamsResourcesCorrectness.ThreeStage", [_value_of(
            f"{STREAMS_AT}:739", 'ReleasesResources("run_three_stage with 1024 chunks", kCalls, [&] { ... })',
            "16 more calls of run_three_stage with 1024 chunks kept 32768 event(s) (cudaEventDestroy for every event): "
            "something is created and never released")]),
    ])
    legacy = graded["StreamsEventsCorrectness.ThreeStageIgnoresLegacyStream"]
    assert legacy.task == "events" and "the final wait is on s_d2h" in legacy.hint
    leak = graded["StreamsResourcesCorrectness.ThreeStage"]
    assert leak.task == "events" and "Two events re-recorded for every chunk also work" in leak.hint


def _callback_checks(calls: list[int], ready: list[int], wrong_user: int = 0) -> list[str]:
    out = []
    if wrong_user:
        out.append(_equal(f"{STREAMS_AT}:813", "g_wrong_user.load()", str(wrong_user), "0", "0",
                          "on_done was called with a user pointer other than the one given to "
                          "run_pipelined_with_callback: pass each chunk's `user` on unchanged"))
    ones = [1] * len(calls)
    if calls != ones:
        out.append(_value_of(f"{STREAMS_AT}:815", "AllEqual(std::vector<int>(chunks, 1), log.calls, seed)",
                             _compare(ones, calls, 14016),
                             "calls of on_done per chunk (index = chunk): each chunk's callback must run exactly once, "
                             "before run_pipelined_with_callback returns"))
    if ready != ones:
        out.append(_value_of(f"{STREAMS_AT}:818", "AllEqual(std::vector<int>(chunks, 1), log.ready, seed)",
                             _compare(ones, ready, 14016),
                             "1 = the chunk's results were in h_out when its callback ran; 0 = the callback ran before "
                             "its D2H copy was done: enqueue it after the copy, in the same stream"))
    return out


def test_09_callback_gets_its_args_as_user() -> None:
    """cb-passes-args-as-user: every call is refused by the test's on_done, so none is counted."""
    t = _hint("09-streams", "StreamsCallbackCorrectness.OncePerChunkAfterItsCopy/n1000_s3_c7",
              _callback_checks([0] * 7, [0] * 7, wrong_user=7))
    assert "receives a pointer to its chunk's ChunkDoneArgs" in t.hint


def test_09_callbacks_share_one_args_slot() -> None:
    """cb-one-args-slot: the slot holds a later chunk by the time most callbacks run."""
    t = _hint("09-streams", "StreamsCallbackCorrectness.OncePerChunkAfterItsCopy/n65531_s4_c16",
              _callback_checks([1, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0, 6], [1] * 16))
    assert "A single shared slot is overwritten" in t.hint


def test_09_callback_on_stream_0() -> None:
    """cb-on-legacy-stream."""
    t = _hint("09-streams", "StreamsLegacyCorrectness.CallbackPipelineIgnoresLegacyStream",
              _legacy("run_pipelined_with_callback", 3.0017) + _callback_checks([1] * 8, [1, 0, 1, 1, 0, 1, 1, 0]))
    assert t.task == "callback" and "cudaLaunchHostFunc takes the stream as its first argument" in t.hint
    assert "launch_work(..., nullptr)" not in t.hint


def test_09_callback_returns_early_and_callback_that_hangs() -> None:
    name = "StreamsCallbackCorrectness.OncePerChunkAfterItsCopy/n4194305_s8_c33"
    graded = _grade("09-streams", [
        ("StreamsCallbackCorrectness.OncePerChunkAfterItsCopy/n1000_s3_c7",
         [_idle("run_pipelined_with_callback", 2, 833)])],
        extra=[_stopped(name, Category.TIMEOUT, "the test did not finish within 300 s and was stopped")])
    early = graded["StreamsCallbackCorrectness.OncePerChunkAfterItsCopy/n1000_s3_c7"]
    assert early.category is Category.CUDA_ERROR and "that wait is what keeps it alive long enough" in early.hint
    assert "must not call the CUDA API" in graded[name].hint


def test_09_trace_never_recorded() -> None:
    """Task 6 not done yet: the events are created by the test and never recorded."""
    t = _hint("09-streams", "StreamsTraceCorrectness.EventsBracketEachStage", [
        f"{STREAMS_AT}:967\nValue of: t.empty()\n  Actual: true\nExpected: false\ntrace[0] gives no time "
        "(cudaErrorInvalidResourceHandle): was it recorded, after trace[0]?"])
    assert t.category is Category.CUDA_ERROR and t.task == "trace"
    assert "A trace event was never recorded" in t.hint


def test_09_trace_that_does_not_bracket_the_copies() -> None:
    """trace-recorded-on-default-stream, trace-start-after-copy."""
    t = _hint("09-streams", "StreamsTraceCorrectness.EventsBracketEachStage", [
        f"{STREAMS_AT}:973\nExpected: (m[1] - m[0]) >= (0.5 * h2d_ms), actual: 0.00307 vs 1.28934\nchunk 0: trace[4c] "
        "and trace[4c + 1] do not bracket its H2D copy (alone, that copy takes 2.57868 ms)"])
    assert "cudaEventRecord(e) without a stream argument records on stream 0" in t.hint


def test_09_trace_in_the_wrong_layout() -> None:
    """trace-stage-major-layout."""
    t = _hint("09-streams", "StreamsTraceCorrectness.EventsBracketEachStage", [
        f"{STREAMS_AT}:970\nValue of: m[0] <= m[1] && m[1] <= m[2] && m[2] <= m[3]\n  Actual: false\nExpected: true\n"
        "chunk 0: trace times 0, 5.21, 2.6, 7.9 ms are out of order (before H2D, after H2D, after kernel, after D2H)"])
    assert "chunk c's events are trace[4c] to trace[4c + 3]" in t.hint


def test_09_hints_stay_with_their_task() -> None:
    # The three-stage pipeline's NaN is not the one-stream pipeline's, nor the other way round.
    expected = _work(1000, 9009 + 3007)
    pipe = _hint("09-streams", "StreamsPipelineCorrectness.MatchesCpu/n1000_s3_c7",
                 [_output(expected, [NEG_NAN] * 1000, 9009 + 3007, "3 streams, 7 chunks")])
    assert "cudaStreamWaitEvent" not in pipe.hint and "every element is wrong" in pipe.hint.lower()
    three = _hint("09-streams", "StreamsThreeStageCorrectness.MatchesCpu/n1000_c7",
                  [_output(expected, expected[:994] + [NAN] * 6, 9009 + 3007, "7 chunks", line=672)])
    assert "chunk_begin" not in three.hint
    # A pipeline that hangs is not told about callbacks.
    name = "StreamsPipelineCorrectness.MatchesCpu/n1000_s3_c7"
    hung = _grade("09-streams", [], extra=[_stopped(name, Category.TIMEOUT,
                                                     "the test did not finish within 300 s and was stopped")])[name]
    assert hung.task == "pipelined" and "cudaLaunchHostFunc" not in hung.hint
    # The callback pipeline on stream 0 is not sent to launch_work's stream argument.
    legacy = _hint("09-streams", "StreamsLegacyCorrectness.PipelineIgnoresLegacyStream", _legacy("run_pipelined", 3.0))
    assert "cudaLaunchHostFunc" not in legacy.hint
