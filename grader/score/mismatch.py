"""What a wrong answer looks like, in the lab's own geometry. A failure message of cudalab/compare.hpp
says how many elements differ, the span of their indices and the first few (index, expected, actual);
this module reads it and names the pattern: every element wrong, only the first tile right, the last
partial block, every 32nd element, values never written (still the poison), NaN, zero, off by a
constant, shifted by one element, doubled. The lab declares its block, tile and warp sizes in lab.toml
([geometry]), and a pattern is said against them ("index 4096 is the first element of tile 1, tiles of
4096"). Hints (grader/score/hints.py) fire on these patterns, not on where the array ends.

    found = read("Value of: ...(16773120 of 16777216 elements differ ...")
    analyse(found, {"scan tile": 4096, "warp": 32})   # -> [Pattern("only-first-tiles-right", ...), ...]
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass

_HEAD = re.compile(r"(\d+) of (\d+) elements differ \(seed (\S+?), ([^)]*)\); mismatches span indices (\d+)\.\.(\d+)")
_SAMPLE = re.compile(r"^\s*\[(?:(\d+)|row (\d+), col (\d+))\] expected (\S+), actual (\S+?)\s*$", re.M)
TAIL_MAX = 32  # a run this short at the very end is a tail whatever the lab's sizes

# What cudalab::poison leaves in an output the code never wrote: 0xFF bytes (a NaN) in floats, 0xA5
# bytes in integers, read as each integer width and signedness prints them.
POISON_INTEGERS = {"165", "-91", "42405", "-23131", "2779096485", "-1515870811", "11936128518282651045",
                   "-6510615555426900571"}


@dataclass(frozen=True)
class Sample:
    index: int  # flat index (row * cols + col for a 2-D output, when the shape is known)
    expected: str
    actual: str
    row: int | None = None
    col: int | None = None


@dataclass(frozen=True)
class Mismatch:
    bad: int
    total: int
    first: int
    last: int
    seed: str
    rule: str  # "exact", or the tolerance
    samples: tuple[Sample, ...] = ()

    @property
    def fraction(self) -> float:
        return self.bad / self.total if self.total else 0.0

    @property
    def contiguous(self) -> bool:
        return self.bad == self.last - self.first + 1

    def headline(self) -> str:
        """"first wrong at [4096]: expected 16221, got 16719 (16,773,120 of 16,777,216 differ)"."""
        if not self.samples:
            return f"{self.bad:,} of {self.total:,} elements differ, indices {self.first:,}..{self.last:,}"
        s = self.samples[0]
        where = f"[row {s.row}, col {s.col}]" if s.row is not None else f"[{s.index}]"
        return f"first wrong at {where}: expected {s.expected}, got {s.actual} ({self.bad:,} of {self.total:,} differ)"


@dataclass(frozen=True)
class Pattern:
    id: str  # "all-wrong", "only-first-tiles-right", "last-partial-block", "tail", "tile-boundary",
    #          "strided", "never-written", "nan", "zero", "constant-offset", "shifted", "doubled"
    text: str  # what the student reads: where the first wrong element sits, what the values are
    offset: float | None = None  # constant-offset: by how much every wrong element is off (its sign says which way)


def read(message: str) -> Mismatch | None:
    """The first mismatch report in a failure message, or None."""
    m = _HEAD.search(message)
    if m is None:
        return None
    bad, total = int(m.group(1)), int(m.group(2))
    first, last = int(m.group(5)), int(m.group(6))
    block = message[m.end():]
    nxt = _HEAD.search(block)  # only this report's sample lines
    block = block[:nxt.start()] if nxt else block
    samples = []
    for s in _SAMPLE.finditer(block):
        if s.group(1) is not None:
            samples.append(Sample(int(s.group(1)), s.group(4), s.group(5).rstrip(",")))
        else:
            row, col = int(s.group(2)), int(s.group(3))
            samples.append(Sample(-1, s.group(4), s.group(5).rstrip(","), row, col))
    if samples and samples[0].row is not None and samples[0].index < 0:  # 2-D: flat index from the span
        samples[0] = Sample(first, samples[0].expected, samples[0].actual, samples[0].row, samples[0].col)
    return Mismatch(bad, total, first, last, m.group(3), m.group(4), tuple(samples))


def number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value


def _is_nan(text: str) -> bool:
    return text.lower().lstrip("-+") == "nan"


def _sizes(geometry: Mapping[str, int]) -> list[tuple[str, int]]:
    """The declared sizes, largest first (a boundary of the largest one that fits is the telling one)."""
    return sorted(((k, int(v)) for k, v in geometry.items() if int(v) > 1), key=lambda kv: (-kv[1], kv[0]))


def _boundary(index: int, geometry: Mapping[str, int]) -> tuple[str, int] | None:
    """The largest declared size whose multiple index is (index > 0)."""
    if index <= 0:
        return None
    return next(((name, size) for name, size in _sizes(geometry) if index % size == 0), None)


def _where(geometry: Mapping[str, int], index: int) -> str:
    hit = _boundary(index, geometry)
    if hit is None:
        return ""
    name, size = hit
    return f"index {index:,} is the first element of {name} {index // size:,} ({name}s of {size:,})"


def _ordinal(k: int) -> str:
    """32 -> "32nd", 11 -> "11th", 4096 -> "4,096th"."""
    suffix = "th" if 10 <= k % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(k % 10, "th")
    return f"{k:,}{suffix}"


def _last(bad: int) -> str:
    return "only the last element is wrong" if bad == 1 else f"only the last {bad:,} elements are wrong"


def _positions(m: Mismatch, geometry: Mapping[str, int]) -> list[Pattern]:
    out: list[Pattern] = []
    if m.total and m.bad >= m.total:
        return [Pattern("all-wrong", "the only element is wrong" if m.total == 1
                        else f"every one of the {m.total:,} elements is wrong")]
    at_end = m.last == m.total - 1 and m.contiguous
    if at_end and m.first > 0:
        partial = [(name, size) for name, size in _sizes(geometry)
                   if m.total > size and m.total % size and m.first >= m.total - m.total % size]
        hit = _boundary(m.first, geometry)
        if partial and m.bad <= min(size for _, size in partial):
            whole = [p for p in partial if m.bad == m.total % p[1]]  # the whole partial one wrong: the telling size
            name, size = max(whole, key=lambda p: p[1]) if whole else min(partial, key=lambda p: p[1])
            out.append(Pattern("last-partial-block", f"{_last(m.bad)}: the partial {name} past the last full "
                                                      f"{name} of {size:,} (n = {m.total:,})"))
        elif m.bad <= TAIL_MAX and m.fraction < 0.5:
            out.append(Pattern("tail", _last(m.bad)))
        elif hit is not None:
            name, size = hit
            right = m.first // size
            out.append(Pattern("only-first-tiles-right",
                               f"everything from index {m.first:,} on is wrong: only the first {right:,} "
                               f"{name}{'s' if right > 1 else ''} of {size:,} came out right"))
        else:
            out.append(Pattern("from-index-on", f"everything from index {m.first:,} to the end is wrong"))
        return out
    indices = [s.index for s in m.samples if s.index >= 0]
    strides = {b - a for a, b in zip(indices, indices[1:])}
    if len(indices) >= 3 and len(strides) == 1 and (stride := strides.pop()) > 1:
        named = next((name for name, size in _sizes(geometry) if size == stride), "")
        every = f"every {_ordinal(stride)} element" + (f" (one per {named})" if named else "")
        out.append(Pattern("strided", f"{every} is wrong, from index {indices[0]:,} on"))
    where = _where(geometry, m.first)
    if where and not out:
        out.append(Pattern("tile-boundary", f"the first wrong element starts a tile: {where}"))
    return out


# One result of many inputs (a sum, a count): below it by at most this share of itself is "inputs lost",
# above it by at most this factor "inputs counted twice"; further off, junk got in (a float of 4e-44
# for 15.2 is a value whose bytes were never all written).
FEW_LOST = 1e-3
MANY_TWICE = 4.0
MANY_TIMES = 1000.0  # up to this many times the right sum: inputs counted over and over, or junk


def _values(m: Mismatch) -> list[Pattern]:
    samples = [s for s in m.samples]
    if not samples:
        return []
    actual = [s.actual for s in samples]
    if all(a in POISON_INTEGERS for a in actual):
        return [Pattern("never-written", "the wrong elements still hold the poison the test filled the output with: "
                                         "they were never written")]
    if all(_is_nan(a) for a in actual):
        return [Pattern("nan", "the wrong elements are NaN: never written (the test fills float outputs with "
                               "NaN) or computed from a slot that was never written")]
    got = [number(a) for a in actual]
    want = [number(s.expected) for s in samples]
    if any(v is None for v in got + want):
        return []
    if all(g == 0 for g in got):
        return [Pattern("zero", "the wrong elements are 0")]
    if all(w != 0 and math.isclose(g, 2 * w, rel_tol=1e-6) for g, w in zip(got, want)):
        return [Pattern("doubled", "each wrong element is twice what it should be: counted or added twice")]
    by_index = {s.index: (number(s.expected), number(s.actual)) for s in samples if s.index >= 0}
    pairs = [(i, i + 1) for i in sorted(by_index) if i + 1 in by_index]
    if len(pairs) >= 2:
        if all(by_index[i][1] == by_index[j][0] for i, j in pairs):
            return [Pattern("shifted", "each wrong element holds the value its right-hand neighbour should: "
                                       "shifted by one element")]
        if all(by_index[j][1] == by_index[i][0] for i, j in pairs):
            return [Pattern("shifted", "each wrong element holds the value its left-hand neighbour should: "
                                       "shifted by one element")]
    offsets = {g - w for g, w in zip(got, want)}  # type: ignore[operator]
    if len(samples) >= 2 and len(offsets) == 1 and (off := offsets.pop()) != 0:
        return [Pattern("constant-offset", f"each wrong element is off by {off:+g}", offset=off)]
    belongs = {w: s.index for s, w in zip(samples, want) if w not in (0, None)}
    for s, g in zip(samples, got):  # a distinctive value (not 0) that the output needs at another index
        j = belongs.get(g)
        if j is not None and j != s.index and s.actual not in POISON_INTEGERS:
            return [Pattern("misplaced", f"[{s.index}] holds the value that belongs at [{j}]: a result written at "
                                         "the wrong index (an offset missing or counted twice?)")]
    # Whole numbers (counts, keys) off both ways moved between places; floats are off both ways anyway.
    if _whole(got + want) and len(samples) >= 2 and any(g > w for g, w in zip(got, want)) and any(g < w for g, w in zip(got, want)):
        return [Pattern("mixed", "some wrong elements are too large and others too small")]
    if m.total == 1 and len(samples) == 1:  # one result (a sum, a count): which way it is off says a lot
        g, w = got[0], want[0]
        assert g is not None and w is not None
        if not math.isfinite(g - w) or w <= 0:  # sums of signed values: no side means anything
            return []
        was = f"({samples[0].actual} instead of {samples[0].expected})"
        ratio = g / w
        if 0 <= ratio < 1 and (ratio >= FEW_LOST or g == int(g)):  # part of the inputs are missing
            return [Pattern("result-low", f"the result is {_amount(w - g)} below what it should be {was}")]
        if 1 < ratio <= MANY_TWICE:  # part of the inputs counted again
            return [Pattern("result-high", f"the result is {_amount(g - w)} above what it should be {was}")]
        if MANY_TWICE < ratio <= MANY_TIMES:  # every block walking the whole input, say; or junk
            return [Pattern("result-many", f"the result is about {ratio:,.0f} times what it should be {was}: far more "
                                           "than a few inputs counted twice")]
        return [Pattern("result-far", f"the result is nowhere near what it should be {was}: not a few inputs lost "
                                      "or counted twice, but values that are no input at all")]
    return []


def _whole(values: list[float | None]) -> bool:
    """Every value a finite whole number: counts, sums of integers, keys (not floats, not junk)."""
    return all(v is not None and math.isfinite(v) and v == int(v) for v in values)


def counts_off(m: Mismatch) -> str:
    """Which way whole-number outputs (counts, sums, keys; none still the poison) are off: "high" when every
    wrong element shown is too large (counted extra: junk, a bin not zeroed, an item added twice), "low"
    when every one is too small (lost), "conserved" when every wrong element is shown and they hold the
    right total between them (counted into the wrong places); "" otherwise."""
    if not m.samples or any(s.actual in POISON_INTEGERS for s in m.samples):
        return ""
    got, want = [number(s.actual) for s in m.samples], [number(s.expected) for s in m.samples]
    if not _whole(got + want):
        return ""
    pairs = list(zip(got, want))
    if all(g > w for g, w in pairs):  # type: ignore[operator]
        return "high"
    if all(g < w for g, w in pairs):  # type: ignore[operator]
        return "low"
    if len(m.samples) == m.bad and sum(got) == sum(want):  # type: ignore[arg-type]
        return "conserved"
    return ""


def _amount(x: float) -> str:
    return f"{int(x):,}" if x == int(x) and abs(x) < 2**63 else f"{x:.6g}"


def analyse(m: Mismatch, geometry: Mapping[str, int] | None = None) -> list[Pattern]:
    """Where the wrong elements are (at most one pattern), then what they hold (at most one)."""
    geometry = geometry or {}
    return _positions(m, geometry) + _values(m)


def diagnosis(message: str, geometry: Mapping[str, int] | None = None) -> tuple[Mismatch | None, list[Pattern]]:
    found = read(message)
    return (found, analyse(found, geometry)) if found is not None else (None, [])


def size_of(test_name: str) -> int | None:
    """The size a parameterized test ran at: "ScanCorrectness.Random/4096" -> 4096 (None when its
    parameter is not a plain number)."""
    _, _, param = test_name.rpartition("/")
    return int(param) if param.isdigit() else None


def across_sizes(outcomes: list[tuple[int, bool]], geometry: Mapping[str, int] | None = None) -> Pattern | None:
    """Which sizes of one test fail, said against the lab's sizes: only those above a tile, only those
    that are not a multiple of a warp, only those past 2^31. outcomes: (n, passed) per size."""
    failing = sorted(n for n, ok in outcomes if not ok)
    passing = sorted(n for n, ok in outcomes if ok)
    if not failing or len(passing) < 2:
        return None
    if failing[0] >= 2**31 > passing[-1]:
        return Pattern("only-huge", f"only sizes past 2^31 fail (n = {failing[0]:,}): an index or a size held in 32 "
                                    "bits")
    if len(failing) < 2:  # one failing size is no split
        return None
    for name, size in _sizes(geometry or {}):
        if failing[0] > size >= passing[-1]:
            return Pattern("only-above-size", f"sizes up to {passing[-1]:,} pass and every size above one {name} "
                                              f"({size:,}) fails, from n = {failing[0]:,}: what joins {name}s "
                                              f"together is wrong, not the work inside one")
    for name, size in _sizes(geometry or {}):
        if all(n % size for n in failing) and all(n % size == 0 for n in passing):
            return Pattern("not-multiple", f"only sizes that are not a multiple of {size:,} fail (n = {failing[0]:,} "
                                           f"first): the partial {name} at the end")
    return None
