"""Hints come from grader/score/hints.toml, picked by category, message and derived signatures."""

from __future__ import annotations

from pathlib import Path

import pytest

from grader.model.labs import discover
from grader.score import hints
from grader.model.results import Category, LabResult, Status
from grader.model.results import TestResult as TResult


@pytest.mark.parametrize(
    ("category", "message", "expected"),
    [
        (Category.CUDA_ERROR, 'C++ exception with description "CUDA error cudaErrorIllegalAddress (an illegal ...)"', "bounds guard"),
        (Category.CUDA_ERROR, "CUDA error cudaErrorInvalidConfiguration (invalid configuration argument)", "1024"),
        (Category.CUDA_ERROR, "CUDA error cudaErrorNotYetImplemented", "compute-sanitizer"),
        # CUDA 13 reports a launch of 0 blocks as an invalid value (seen on an H200)
        (Category.CUDA_ERROR, 'C++ exception with description "CUDA error cudaErrorInvalidValue (invalid argument) from `kernel launch` at x.cu:30"', "grid of 0 blocks"),
        (Category.CUDA_ERROR, "CUDA error cudaErrorInvalidValue (invalid argument) from `cudaMemcpy(...)`", "byte count"),
        (Category.CUDA_ERROR, "CUDA error cudaErrorInvalidAddressSpace (operation not supported)", "bounds guard"),
        (Category.TIMEOUT, "the test did not finish within 300 s", "__syncthreads() inside a branch"),
        (Category.WRONG_ANSWER, "Actual: false (2 of 257 elements differ (seed 1, exact); mismatches span indices 255..256", "ceil-div"),
        (Category.WRONG_ANSWER, "Actual: false (257 of 257 elements differ (seed 1, exact); mismatches span indices 0..256", "poison"),
        (Category.WRONG_ANSWER, "Actual: false (3 of 257 elements differ (seed 1, exact); mismatches span indices 3..200", "indexing"),
        (Category.WRONG_ANSWER, "Expected: (h) != (nullptr)", "mismatches and the seed"),
        # cudalab/guarded_buffer.cuh, even beside a mismatch: the guard zone is the sharper clue
        (Category.WRONG_ANSWER, "Value of: c.guards_intact(\"c\")\nActual: false (out-of-bounds write: a kernel changed "
                                "memory outside c (257 element(s) of 4 bytes): 4 byte(s) past its end (the first at byte 0 "
                                "past the end). ...)\n2 of 257 elements differ (seed 1, exact); mismatches span indices 255..256",
         "i < n, not i <= n"),
        (Category.CRASH, "the test process was killed by SIGSEGV", "segmentation fault"),
        (Category.LINK_ERROR, "undefined reference to `vector_add(float const*, ...)'", "signature"),
        (Category.NO_GPU, "no CUDA device (no NVIDIA driver)", "no usable NVIDIA GPU"),
    ],
)
def test_hint_for(category, message, expected) -> None:
    assert expected in hints.hint_for(category, message)


def test_no_category_no_hint() -> None:
    assert hints.hint_for(None, "anything") == ""


def test_signatures() -> None:
    assert hints.signatures("1 of 1 elements differ (seed 3004, exact); mismatches span indices 0..0") == {
        "mismatch:all", "pattern:all-wrong"}
    assert hints.signatures("1 of 257 elements differ (seed 1, exact); mismatches span indices 256..256") == {
        "mismatch:tail", "pattern:tail"}
    assert hints.signatures("3 of 257 elements differ (seed 1, exact); mismatches span indices 250..256") == {
        "mismatch:some"}
    # At most 1 % wrong is "few" (what a race leaves); so 2 of 257, and never anything of fewer than 100.
    assert hints.signatures("2 of 257 elements differ (seed 1, exact); mismatches span indices 250..256") == {
        "mismatch:some", "mismatch:few"}
    assert "mismatch:few" not in hints.signatures("1 of 99 elements differ (seed 1, exact); mismatches span indices 5..5")
    assert "mismatch:few" in hints.signatures("100 of 10000 elements differ (seed 1, exact); mismatches span indices "
                                              "5..9000")
    assert hints.signatures("nothing to see") == set()
    # One element that holds a wrong value was written: "is the kernel launched?" would mislead.
    one = "1 of 1 elements differ (seed 7009, exact); mismatches span indices 0..0\n  [0] expected 0, actual {}\n"
    assert "mismatch:one-written" in hints.signatures(one.format(7))
    assert "mismatch:one-written" not in hints.signatures(one.format("2779096485"))
    one_input = {"input:one"}  # annotate() adds it for a test whose size parameter is 1
    assert hints.hint_for(Category.WRONG_ANSWER, one.format(7), extra=one_input).startswith(
        "The only element was written")
    # One result of many inputs (a sum of 50,001 values) is no "one element" case: which way it is off.
    assert not hints.hint_for(Category.WRONG_ANSWER, one.format(7)).startswith("The only element was written")
    assert hints.hint_for(Category.WRONG_ANSWER, one.format("2779096485")).startswith("Every element is wrong")


def test_the_first_quarter_right_is_its_own_signature() -> None:
    """n bytes copied for n floats: exactly the first quarter comes back (n // 4, or one more where the last
    float was cut); a run from any other index is not that."""
    span = "{bad} of {n} elements differ (seed 1, exact); mismatches span indices {first}..{last}"
    for n, first in ((1000, 250), (1025, 256), (1025, 257)):
        sigs = hints.signatures(span.format(bad=n - first, n=n, first=first, last=n - 1))
        assert {"mismatch:some", "mismatch:from-a-quarter"} <= sigs, (n, first)
    for n, first, last in ((1000, 268, 999), (1000, 250, 998), (1000, 500, 999)):
        sigs = hints.signatures(span.format(bad=last - first + 1, n=n, first=first, last=last))
        assert "mismatch:from-a-quarter" not in sigs, (n, first, last)


TILE_BUG = ("Value of: cudalab::DeviceAllEqual(reference_scan(in), out, seed)\n  Actual: false (16773120 of 16777216 "
            "elements differ (seed 42, exact); mismatches span indices 4096..16777215\n"
            "  [4096] expected 16221, actual 16719\n  [4097] expected 16229, actual 16727\n)\nExpected: true")


def test_a_run_to_the_end_from_a_tile_boundary_is_not_called_a_tail() -> None:
    """Issue 25: lab 07's tile-offset bug got the ceil-div grid hint."""
    sigs = hints.signatures(TILE_BUG, {"scan tile": 4096, "warp": 32})
    assert "mismatch:tail" not in sigs and "pattern:only-first-tiles-right" in sigs
    text = hints.hint_for(Category.WRONG_ANSWER, TILE_BUG, geometry={"scan tile": 4096})
    assert "ceil-div" not in text and "what carries from one tile to the next" in text


def test_annotate_says_the_pattern_the_sizes_and_then_the_advice() -> None:
    lab = LabResult(number=7, name="07-scan", title="Scan", max_score=100)
    for n, ok in ((1, True), (4096, True), (4097, False), (16777216, False)):
        lab.tests.append(TResult(name=f"ScanCorrectness.Random/{n}", status=Status.PASSED if ok else Status.FAILED,
                                    category=None if ok else Category.WRONG_ANSWER, message="" if ok else TILE_BUG))
    hints.annotate(lab, geometry={"scan tile": 4096, "warp": 32})
    hint = lab.tests[-1].hint
    assert hint.startswith("Everything from index 4,096 on is wrong: only the first 1 scan tile of 4,096 came out right")
    assert "every size above one scan tile (4,096) fails, from n = 4,097" in hint
    assert "ceil-div" not in hint
    assert lab.tests[0].hint == ""  # a passed test gets none


def test_every_category_with_failures_has_a_default() -> None:
    loaded = hints.load_hints()
    for category in Category:
        if category is Category.SANITIZER:
            continue
        assert any(h.category is category and h.match is None and not h.signature for h in loaded), category


def test_parse_errors() -> None:
    with pytest.raises(hints.HintsError):
        hints.parse_hints('[[hint]]\ncategory = "nope"\ntext = "x"\n')
    with pytest.raises(hints.HintsError):
        hints.parse_hints('[[hint]]\ncategory = "crash"\nmatch = "("\ntext = "x"\n')
    with pytest.raises(hints.HintsError):
        hints.parse_hints("not toml [")


def test_annotate_skips_passed_tests() -> None:
    lab = LabResult(1, "01-x", "X", 100, tests=[
        TResult("A.B", Status.PASSED),
        TResult("A.C", Status.FAILED, category=Category.TIMEOUT, message="timeout"),
    ])
    hints.annotate(lab)
    assert lab.tests[0].hint == "" and "infinite loop" in lab.tests[1].hint


# --- a lab's own hints (labs/NN-slug/hints.toml) -------------------------------------------------------

ROOT = Path(__file__).resolve().parents[2]


def _lab_hint(lab_name: str, tests: list[tuple[str, str | None, str]]) -> list[str]:
    """Annotate a lab result of these (name, task, message-or-"" for passed) tests with the lab's own
    hints and geometry; the hints of the failed ones."""
    lab = {lab.name: lab for lab in discover(ROOT)}[lab_name]
    result = LabResult(number=lab.number, name=lab.name, title=lab.title, max_score=100)
    for name, task, message in tests:
        result.tests.append(TResult(name=name, task=task, status=Status.FAILED if message else Status.PASSED,
                                    category=Category.WRONG_ANSWER if message else None, message=message))
    hints.annotate(result, hints.hints_for_lab(lab.path), geometry=lab.geometry)
    return [t.hint for t in result.tests if t.status is Status.FAILED]


def _wrong(n: int, first: int, samples: list[tuple[int, str, str]], bad: int | None = None) -> str:
    bad = n - first if bad is None else bad
    last = n - 1 if bad == n - first else samples[-1][0]
    return (f"{bad} of {n} elements differ (seed 7, exact); mismatches span indices {first}..{last}\n"
            + "".join(f"  [{i}] expected {e}, actual {a}\n" for i, e, a in samples))


def test_lab_07_propagate_hint_for_the_tile_offset_bug() -> None:
    found = _lab_hint("07-scan", [("ScanCorrectness.Exclusive/16777216", "any-n",
                                   _wrong(16777216, 4096, [(4096, "16221", "16719")]))])
    assert "the propagate step is wrong" in found[0] and "first element" not in found[0]
    assert found[0].startswith("Everything from index 4,096 on is wrong: only the first 1 scan tile of 4,096")


def test_lab_07_look_back_hint() -> None:
    found = _lab_hint("07-scan", [("ScanDecoupledCorrectness.Random/1048576", "decoupled",
                                   _wrong(1048576, 8192, [(8192, "1", "2")]))])
    assert "the look-back must add every earlier tile" in found[0]
    # dlb-no-wait-for-empty: tiles read while still X count as 0, so some later tiles are short, not all.
    scattered = _wrong(1048576, 20480, [(20480, "81921", "77825"), (20481, "81925", "77829"),
                                        (45056, "180225", "176129")], bad=8192)
    found = _lab_hint("07-scan", [("ScanDecoupledCorrectness.Random/1048576", "decoupled", scattered)])
    assert "Wait (spin, with a short __nanosleep) while a predecessor's status is still X" in found[0], found[0]


def test_lab_07_blelloch_shift_hint() -> None:
    samples = [(1, "3", "6"), (2, "6", "10"), (3, "10", "15")]
    found = _lab_hint("07-scan", [("BlockScanCorrectness.Blelloch/1024", "blelloch",
                                   _wrong(1024, 1, samples, bad=1023))])
    assert "Blelloch's scan is exclusive" in found[0]


def test_lab_11_partition_hint_for_one_wrong_key_above_the_block_sort() -> None:
    """Issue 25: one wrong key at n = 8193 got the generic __syncthreads() hint."""
    one_key = _wrong(8193, 4000, [(4000, "5", "7")], bad=1)
    found = _lab_hint("11-quicksort", [
        ("QuicksortCorrectness.Random/1000", "recursion", ""),
        ("QuicksortCorrectness.Random/8192", "recursion", ""),
        ("QuicksortCorrectness.Random/8193", "recursion", one_key),
        ("QuicksortCorrectness.Random/100000", "recursion", _wrong(100000, 4000, [(4000, "5", "7")], bad=1)),
    ])
    assert all("larger ones are partitioned first" in h for h in found)
    assert all("above one block sort (8,192) fails, from n = 8,193" in h for h in found)
    assert not any("__syncthreads" in h for h in found)


def test_a_lab_hint_does_not_fire_outside_its_task() -> None:
    found = _lab_hint("07-scan", [("BlockScanCorrectness.HillisSteele/1024", "hillis-steele",
                                   _wrong(1024, 1, [(1, "3", "6"), (2, "6", "10"), (3, "10", "15")], bad=1023))])
    assert "Blelloch" not in found[0]


def test_a_list_of_signatures_needs_all_of_them() -> None:
    [both] = hints.parse_hints('[[hint]]\ncategory = "wrong_answer"\nsignature = ["mismatch:all", "input:one"]\n'
                               'text = "x"\n')
    assert both.fits(Category.WRONG_ANSWER, "", {"mismatch:all", "input:one", "pattern:zero"})
    assert not both.fits(Category.WRONG_ANSWER, "", {"mismatch:all"})
    with pytest.raises(hints.HintsError):  # an empty list would hold for any message
        hints.parse_hints('[[hint]]\ncategory = "wrong_answer"\nsignature = []\ntext = "x"\n')
    with pytest.raises(hints.HintsError):
        hints.parse_hints('[[hint]]\ncategory = "wrong_answer"\nsignature = 3\ntext = "x"\n')


def test_one_result_too_low_or_too_high_gets_the_way_it_is_off() -> None:
    """A sum of many values, one output element: lost inputs or inputs counted twice, never "is the kernel
    launched?" nor "work the one-element case by hand"."""
    one = "1 of 1 elements differ (seed 7, exact); mismatches span indices 0..0\n  [0] expected 2511648, actual {}\n"
    low = hints.hint_for(Category.WRONG_ANSWER, one.format(2511644))
    high = hints.hint_for(Category.WRONG_ANSWER, one.format(2511697))
    junk = hints.hint_for(Category.WRONG_ANSWER, one.format("1.9667484e+18"))
    assert low.startswith("Some inputs never reached the result") and "tail" in low
    assert high.startswith("Some inputs were counted more than once")
    assert junk.startswith("Junk got into the result")
    for text in (low, high, junk):
        assert "is the kernel launched" not in text and "The only element was written" not in text


def test_a_wrong_end_that_was_written_is_not_the_grids_size() -> None:
    """Lab 07's scan with a tile offset off by one, n = 4,097: out[4096] is 0 (written: the test poisons the
    output), so the grid reached it and "check the ceil-div grid size" would point the wrong way."""
    tail = ("1 of 4097 elements differ (seed 7, exact); mismatches span indices 4096..4096\n"
            "  [4096] expected 16221, actual {}\n")
    geometry = {"scan tile": 4096, "warp": 32}
    written = hints.hint_for(Category.WRONG_ANSWER, tail.format(0), geometry=geometry)
    missed = hints.hint_for(Category.WRONG_ANSWER, tail.format(2779096485), geometry=geometry)
    assert "mismatch:tail-written" in hints.signatures(tail.format(0), geometry)
    assert written.startswith("The elements at the end were written") and "ceil-div" not in written
    assert "mismatch:tail-written" not in hints.signatures(tail.format(2779096485), geometry)
    assert missed.startswith("No thread wrote those elements")  # the poison: never reached


def test_counts_off_one_way_or_moved_are_signatures() -> None:
    """values:high (every wrong count too large), values:low, values:conserved (every wrong element shown,
    the right total between them); none for floats, for a slot that still holds the poison, or when only
    some of the wrong elements are shown."""
    def msg(pairs: list[tuple[int, str, str]], bad: int | None = None, n: int = 7) -> str:
        bad = len(pairs) if bad is None else bad
        lines = "".join(f"  [{i}] expected {e}, actual {a}\n" for i, e, a in pairs)
        return (f"{bad} of {n} elements differ (seed 1, exact); mismatches span indices {pairs[0][0]}..{pairs[-1][0]}\n"
                + lines)

    assert "values:high" in hints.signatures(msg([(1, "5", "9"), (3, "2", "40")]))
    assert "values:low" in hints.signatures(msg([(1, "5", "4"), (3, "2", "0")]))
    assert "values:conserved" in hints.signatures(msg([(1, "5", "7"), (3, "4", "2")]))
    assert not {"values:high", "values:low", "values:conserved"} & hints.signatures(msg([(1, "5", "7"), (3, "4", "1")]))
    assert "values:conserved" not in hints.signatures(msg([(1, "5", "7"), (3, "4", "2")], bad=5))  # not all shown
    assert "values:high" not in hints.signatures(msg([(1, "5.5", "9.25"), (3, "2", "40")]))  # floats
    assert "values:high" not in hints.signatures(msg([(1, "5", "2779096485"), (3, "2", "40")]))  # the poison
