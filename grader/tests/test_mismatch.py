"""The pattern analysis of wrong answers (grader/score/mismatch.py) on synthetic compare.hpp messages:
each pattern, and the outputs that must not read as it."""

from __future__ import annotations

import pytest

from grader.score.mismatch import analyse, diagnosis, read

SCAN = {"scan tile": 4096, "warp": 32}
BLOCKS = {"block": 256, "warp": 32}


def message(bad: int, total: int, first: int, last: int, samples: list[tuple[int, str, str]], rule: str = "exact") -> str:
    lines = ["Value of: cudalab::DeviceAllEqual(reference_scan(in), out, seed)",
             f"  Actual: false ({bad} of {total} elements differ (seed 42, {rule}); mismatches span indices "
             f"{first}..{last}"]
    lines += [f"  [{i}] expected {e}, actual {a}" for i, e, a in samples]
    return "\n".join(lines) + "\n)\nExpected: true"


def ids(text: str, geometry=None) -> list[str]:
    _, found = diagnosis(text, geometry)
    return [p.id for p in found]


def test_read_takes_the_counts_span_and_samples() -> None:
    m = read(message(3, 257, 254, 256, [(254, "1", "0"), (255, "2", "0"), (256, "3", "0")]))
    assert (m.bad, m.total, m.first, m.last, m.seed, m.rule) == (3, 257, 254, 256, "42", "exact")
    assert [s.index for s in m.samples] == [254, 255, 256] and m.samples[1].expected == "2"
    assert m.headline() == "first wrong at [254]: expected 1, got 0 (3 of 257 differ)"
    assert read("Value of: x\n  Actual: false\nExpected: true") is None


def test_the_lab_07_tile_offset_bug_is_only_the_first_tile_right_not_a_tail() -> None:
    """Issue 25: 16,773,120 of 16,777,216 wrong from index 4096 on was called a tail."""
    text = message(16773120, 16777216, 4096, 16777215, [(4096, "16221", "16719"), (4097, "16229", "16727")])
    found = diagnosis(text, SCAN)[1]
    assert found[0].id == "only-first-tiles-right"
    assert "from index 4,096 on" in found[0].text and "first 1 scan tile of 4,096" in found[0].text
    assert "tail" not in ids(text, SCAN) and "last-partial-block" not in ids(text, SCAN)
    assert found[1].id == "constant-offset" and "+498" in found[1].text


@pytest.mark.parametrize("bad", [int(0.99 * 1_000_000), 600_000, 33])
def test_a_large_run_to_the_end_is_never_a_tail(bad: int) -> None:
    total = 1_000_000
    assert "tail" not in ids(message(bad, total, total - bad, total - 1, []), {})


def test_the_last_partial_block() -> None:
    text = message(4, 1028, 1024, 1027, [(1024, "1", "-1515870811"), (1025, "2", "-1515870811")])
    assert ids(text, BLOCKS) == ["last-partial-block", "never-written"]
    found = diagnosis(text, BLOCKS)[1][0]
    assert "partial block past the last full block of 256" in found.text
    # n below one scan tile: no full tile before it, so the run is not "past the last full tile".
    assert "last-partial-block" not in ids(message(24, 1024, 1000, 1023, []), SCAN)
    # The same run where n is a multiple of the block: not a partial block.
    assert "last-partial-block" not in ids(message(4, 1024, 1020, 1023, []), BLOCKS)


def test_a_short_tail_without_geometry() -> None:
    assert ids(message(1, 257, 256, 256, [(256, "13.4582453", "0")]), {}) == ["tail", "zero"]


def test_every_32nd_element_is_one_per_warp() -> None:
    samples = [(31 + 32 * k, str(k), str(k + 5)) for k in range(8)]
    text = message(512, 16384, 31, 16383, samples)
    found = diagnosis(text, BLOCKS)[1]
    assert found[0].id == "strided" and "every 32nd element (one per warp)" in found[0].text
    assert found[1].id == "constant-offset"


def test_a_run_from_a_tile_boundary_that_stops_before_the_end() -> None:
    text = message(100, 16384, 4096, 4195, [(4096, "5", "7"), (4097, "9", "1")])
    found = diagnosis(text, SCAN)[1]
    assert found[0].id == "tile-boundary" and "first element of scan tile 1" in found[0].text


def test_every_element_wrong() -> None:
    assert ids(message(64, 64, 0, 63, [(0, "1", "nan"), (1, "2", "-nan")]), BLOCKS) == ["all-wrong", "nan"]
    # One element: "the only element", not "every one of the 1 elements" (read in lab 11's skeleton report).
    assert diagnosis(message(1, 1, 0, 0, [(0, "7", "9")]), BLOCKS)[1][0].text == "the only element is wrong"


@pytest.mark.parametrize(("samples", "pattern"), [
    ([(10, "1", "165"), (11, "2", "165")], "never-written"),
    ([(10, "1.5", "nan"), (11, "2", "nan")], "nan"),
    ([(10, "1", "0"), (11, "2", "0")], "zero"),
    ([(10, "3", "6"), (11, "-4", "-8"), (12, "5", "10")], "doubled"),
    ([(10, "1", "3"), (11, "3", "6"), (12, "6", "10")], "shifted"),   # got[i] == expected[i + 1]
    ([(10, "3", "1"), (11, "6", "3"), (12, "10", "6")], "shifted"),   # got[i] == expected[i - 1]
    ([(10, "1", "2"), (12, "7", "8")], "constant-offset"),
])
def test_what_the_wrong_values_hold(samples, pattern: str) -> None:
    assert pattern in ids(message(len(samples), 1000, samples[0][0], samples[-1][0], samples), {})


@pytest.mark.parametrize("samples", [
    [(10, "1", "2"), (11, "2", "7")],          # no common offset
    [(10, "1", "0"), (11, "2", "5")],          # one zero is not "zero"
    [(10, "0", "0.5")],                        # one sample says nothing of an offset
    [(10, "1", "2"), (11, "4", "9")],          # doubled in one, not the other
])
def test_mixed_values_name_no_value_pattern(samples) -> None:
    found = ids(message(len(samples), 1000, samples[0][0], samples[-1][0], samples), {})
    assert not set(found) & {"never-written", "nan", "zero", "doubled", "shifted", "constant-offset"}


def test_two_dimensional_samples() -> None:
    text = ("3 of 1023 elements differ (seed 1, exact); mismatches span indices 31..95\n"
            "  [row 0, col 31] expected 1, actual 0\n  [row 1, col 31] expected 2, actual 0\n")
    m = read(text)
    assert m.samples[0].row == 0 and m.samples[0].col == 31 and m.samples[0].index == 31
    assert m.headline().startswith("first wrong at [row 0, col 31]: expected 1, got 0")
    assert "zero" in [p.id for p in analyse(m, {})]


def test_sizes_of_parameterized_tests() -> None:
    from grader.score.mismatch import size_of

    assert size_of("ScanCorrectness.Random/4096") == 4096 and size_of("MatmulCorrectness.Square/r31_c33") is None
    assert size_of("HelloCorrectness.Facts") is None


@pytest.mark.parametrize(("outcomes", "pattern", "fragment"), [
    ([(1, True), (4096, True), (4097, False), (16777216, False)], "only-above-size", "above one scan tile (4,096)"),
    ([(32, True), (64, True), (33, False), (1000, False)], "not-multiple", "not a multiple of 32"),
    ([(4096, True), (1 << 20, True), ((1 << 32) + 12345, False)], "only-huge", "past 2^31"),
])
def test_which_sizes_fail(outcomes, pattern: str, fragment: str) -> None:
    from grader.score.mismatch import across_sizes

    found = across_sizes(outcomes, SCAN)
    assert found is not None and found.id == pattern and fragment in found.text


@pytest.mark.parametrize("outcomes", [
    [(1, False), (4096, True), (8191, True), (4097, False)],  # a small size fails too
    [(32, True), (96, True), (33, False), (64, False)],      # a multiple of 32 fails too
    [(32, True), (33, False), (64, False)],                  # one passing size is no split
    [(1, False), (2, False)],                        # nothing passes: no contrast
    [(1, True), (2, True)],                          # nothing fails
])
def test_no_size_pattern_without_a_clean_split(outcomes) -> None:
    from grader.score.mismatch import across_sizes

    assert across_sizes(outcomes, SCAN) is None


@pytest.mark.parametrize(("expected", "actual", "pattern", "words"), [
    ("2511648", "2511644", "result-low", "the result is 4 below what it should be (2511644 instead of 2511648)"),
    ("76680.3763", "75366.1484", "result-low", "1314.23 below"),
    ("2511648", "2511697", "result-high", "the result is 49 above"),
    ("109", "112", "result-high", "3 above"),
    ("2511648", "62576561", "result-many", "about 25 times what it should be"),  # every block walks the array
    ("76680.3763", "1921338.25", "result-many", "about 25 times"),
    ("2511648", "3000000000", "result-far", "nowhere near"),              # over a thousand times: no count does that
    ("49.1956165", "1.9667484e+18", "result-far", "nowhere near"),       # junk from shared memory
    ("15.2136526", "4.34402524e-44", "result-far", "nowhere near"),      # a float only partly copied
    ("2511648", "-1727294907", "result-far", "nowhere near"),
])
def test_one_result_of_many_inputs_says_which_way_it_is_off(expected, actual, pattern, words) -> None:
    found = diagnosis(message(1, 1, 0, 0, [(0, expected, actual)]), {})[1]
    assert pattern in [p.id for p in found]
    assert words in next(p.text for p in found if p.id == pattern)


@pytest.mark.parametrize(("total", "samples"), [
    (1, [(0, "-1048576", "-3145728")]),       # a sum of signed values: no side means anything
    (1, [(0, "0", "7")]),                     # nothing expected: no share to compare with
    (1, [(0, "1.5", "nan")]),                 # NaN is its own pattern
    (1, [(0, "2", "inf")]),
    (9, [(0, "16280", "831")]),               # one wrong element of nine is not one result
])
def test_no_side_for_signed_sums_non_numbers_or_arrays(total, samples) -> None:
    found = ids(message(len(samples), total, samples[0][0], samples[-1][0], samples), {})
    assert not set(found) & {"result-low", "result-high", "result-many", "result-far"}


def test_a_value_that_belongs_elsewhere_is_misplaced() -> None:
    """Lab 10's tile sums without the block's offset, n = 257 (H200): block 1's tile 8 wrote slot 0."""
    found = diagnosis(message(2, 9, 0, 8, [(0, "16280", "831"), (8, "831", "-1515870811")]), {})[1]
    assert "misplaced" in [p.id for p in found]
    assert "[0] holds the value that belongs at [8]" in next(p.text for p in found if p.id == "misplaced")
    # 0 is nobody's distinctive value, and the poison is never a value that belongs anywhere.
    assert "misplaced" not in ids(message(2, 9, 0, 8, [(0, "5", "0"), (8, "0", "7")]), {})
    assert "misplaced" not in ids(message(2, 9, 0, 8, [(0, "-1515870811", "3"), (8, "4", "-1515870811")]), {})


def test_some_too_large_some_too_small_is_mixed() -> None:
    """Lab 08's byte shift in bits: counts move between bins."""
    assert "mixed" in ids(message(3, 256, 183, 246, [(183, "255", "75"), (219, "0", "60"), (246, "0", "60")]), {})
    assert "mixed" not in ids(message(2, 256, 1, 2, [(1, "5", "7"), (2, "4", "9")]), {})  # all too large


def test_floats_off_both_ways_are_not_mixed() -> None:
    """A filter's wrong pixels are off both ways as a matter of course: saying so adds nothing."""
    assert "mixed" not in ids(message(2, 3157, 0, 1, [(0, "9.18345423", "5.35963774"), (1, "9.12515547", "9.5")]), {})


def test_which_way_a_constant_offset_goes() -> None:
    """Too large by one amount everywhere is +1 (with positive inputs, something added twice), too small -1;
    offsets that differ, a single sample or NaN say nothing."""
    def sign(samples: list[tuple[int, str, str]]) -> int:
        m = read(message(len(samples), 100, samples[0][0], samples[-1][0], samples))
        assert m is not None
        off = next((p.offset for p in analyse(m) if p.id == "constant-offset"), None)
        return 0 if not off else (1 if off > 0 else -1)

    assert sign([(10, "1", "9"), (11, "4", "12")]) == 1
    assert sign([(10, "9", "1"), (11, "12", "4")]) == -1
    assert sign([(10, "1", "9"), (11, "4", "5")]) == 0
    assert sign([(10, "1", "9")]) == 0
    assert sign([(10, "1", "nan"), (11, "4", "nan")]) == 0
