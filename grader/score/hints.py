"""Hints for failures. The texts live in hints.toml (data, not code); this module only derives a few
facts from a failure message (its "signatures") and picks the first entry that fits."""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path

from grader.model.results import Category, LabResult, Status
from grader.score import mismatch

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

HINTS_FILE = Path(__file__).with_name("hints.toml")



LAB_HINTS = "hints.toml"  # a lab's own hints, beside its lab.toml: tried before the grader's


@dataclass(frozen=True)
class Hint:
    category: Category
    text: str
    match: re.Pattern[str] | None = None
    signature: tuple[str, ...] = ()  # facts that must all hold (signatures()); none: any message
    test: str | None = None  # a glob over the test's name (a lab's own hints)
    tasks: tuple[str, ...] = ()  # the tasks the test may belong to (a lab's own hints); none: any
    causes: tuple[str, ...] = ()  # what it explains (grader/score/causes.py): the diagnosis table's key

    def fits(self, category: Category, message: str, signatures: set[str], test: str = "",
             task: str | None = None) -> bool:
        if category is not self.category:
            return False
        if self.test is not None and not fnmatch.fnmatchcase(test, self.test):
            return False
        if self.tasks and task not in self.tasks:
            return False
        if self.match is not None and not self.match.search(message):
            return False
        return all(part in signatures for part in self.signature)


class HintsError(ValueError):
    """hints.toml is malformed."""


def parse_hints(text: str, source: str = "hints.toml") -> list[Hint]:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise HintsError(f"{source}: not valid TOML: {err}") from None
    hints = []
    for i, entry in enumerate(data.get("hint", []), start=1):
        try:
            category = Category(entry["category"])
            hints.append(
                Hint(
                    category=category,
                    text=str(entry["text"]),
                    match=re.compile(entry["match"]) if "match" in entry else None,
                    signature=_signature(entry.get("signature")),
                    test=entry.get("test"),
                    tasks=_tasks(entry.get("task")),
                    causes=_causes(entry.get("causes", [])),
                )
            )
        except (KeyError, ValueError, re.error) as err:
            raise HintsError(f"{source}: hint #{i}: {err}") from None
    return hints


def _tasks(value: object) -> tuple[str, ...]:
    """task = "id" or ["id", "id"]: a finding in a kernel two tasks share (lab 11's partition_tile)."""
    if value is None:
        return ()
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items or not all(isinstance(t, str) and t for t in items):
        raise ValueError(f"task must be a task id or a list of them, not {value!r}")
    return tuple(items)


def _signature(value: object) -> tuple[str, ...]:
    """One signature, or a list of them that must all hold."""
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise ValueError("signature must be a string or a list of strings")


def _causes(value: object) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) and re.match(r"^[a-z0-9][a-z0-9-]*$", v)
                                              for v in value):
        raise ValueError("causes must be a list of ids (lower-case letters, digits and dashes)")
    return tuple(value)


@lru_cache(maxsize=None)
def load_hints(path: Path = HINTS_FILE) -> tuple[Hint, ...]:
    return tuple(parse_hints(path.read_text(), str(path)))


def hints_for_lab(lab_dir: Path) -> tuple[Hint, ...]:
    """The lab's own hints (labs/NN-slug/hints.toml, written by its author, keyed on test, task and
    pattern) first, then the grader's."""
    own = Path(lab_dir) / LAB_HINTS
    return (load_hints(own) if own.is_file() else ()) + load_hints()


MOST_WRONG = 0.9  # "mismatch:most": this share of the output wrong, or more
FEW_WRONG = 0.01  # "mismatch:few": this share or less (so never below 100 elements): a race's scattered few

def signatures(message: str, geometry: Mapping[str, int] | None = None) -> set[str]:
    """Facts about a failure that a regular expression alone cannot state: the mismatch patterns of
    grader/score/mismatch.py ("pattern:only-first-tiles-right"), and the coarse kind of mismatch
    ("mismatch:all", "mismatch:tail" for the last elements only, else "mismatch:some", with
    "mismatch:most" too when at least 90 % are wrong, "mismatch:few" when at most 1 %, and for counts which
    way they are off ("values:high", "values:low", "values:conserved": mismatch.counts_off);
    "mismatch:one-written" beside "mismatch:all" when the output's only element was written with a wrong
    value; "mismatch:tail-written" beside "mismatch:tail"
    when the wrong end was written, not left as the poison; "mismatch:from-a-quarter" beside
    "mismatch:some" when exactly the first quarter is right, as when n bytes of n floats were copied).
    A sanitizer finding's "oob:" signature comes from its result (annotate)."""
    found: set[str] = set()
    m, patterns = mismatch.diagnosis(message, geometry)
    if m is None:
        return found
    ids = {p.id for p in patterns}
    found |= {f"pattern:{i}" for i in ids}
    for p in patterns:  # which way: with positive inputs, too large by a constant is something added twice
        if p.offset:
            found.add("offset:high" if p.offset > 0 else "offset:low")
    if "all-wrong" in ids:
        found.add("mismatch:all")
        found |= _counts_off(m)
        if m.total == 1 and m.samples and not ids & {"never-written", "nan"}:
            found.add("mismatch:one-written")  # written, and wrong: nothing was left out, the value is
    elif m.first > 0 and m.last == m.total - 1 and m.first in (m.total // 4, -(-m.total // 4)):
        # The first quarter right, the rest wrong: n bytes of n 4-byte elements made the trip.
        found |= {"mismatch:some", "mismatch:from-a-quarter"}
    elif ids & {"tail", "last-partial-block"}:
        found.add("mismatch:tail")
        if m.samples and not ids & {"never-written", "nan"}:
            found.add("mismatch:tail-written")  # reached and written, with wrong values: not the grid's size
    else:
        found.add("mismatch:some")
        found |= _counts_off(m)
        if m.fraction >= MOST_WRONG:  # nearly everything: a systematic error, not a race's scattered few
            found.add("mismatch:most")
        elif m.bad <= FEW_WRONG * m.total:  # a handful among thousands: what a race or one bad step leaves
            found.add("mismatch:few")
    return found


def _counts_off(m: mismatch.Mismatch) -> set[str]:
    """"values:high", "values:low" or "values:conserved" (mismatch.counts_off), or nothing."""
    way = mismatch.counts_off(m)
    return {f"values:{way}"} if way else set()


def hint_for(category: Category | None, message: str, hints: tuple[Hint, ...] | None = None,
             geometry: Mapping[str, int] | None = None, extra: set[str] | None = None, test: str = "",
             task: str | None = None) -> str:
    """The advice of the first hint that fits (extra: signatures known from elsewhere, such as which
    sizes of the test fail)."""
    if category is None:
        return ""
    hints = load_hints() if hints is None else hints
    sigs = signatures(message, geometry) | (extra or set())
    return next((h.text for h in hints if h.fits(category, message, sigs, test, task)), "")


def _sentence(parts: list[str]) -> str:
    text = "; ".join(p for p in parts if p)
    return (text[:1].upper() + text[1:] + ".") if text else ""


def _family(name: str) -> str:
    return name.rpartition("/")[0] if "/" in name else name


def _size_patterns(lab: LabResult, geometry: Mapping[str, int] | None) -> dict[str, mismatch.Pattern]:
    """Per test family ("ScanCorrectness.Random"), the pattern of which of its sizes fail."""
    outcomes: dict[str, list[tuple[int, bool]]] = {}
    for t in lab.tests:
        n = mismatch.size_of(t.name)
        if n is None or t.kind == "perf" or t.status not in (Status.PASSED, Status.FAILED):
            continue
        outcomes.setdefault(t.name.rpartition("/")[0], []).append((n, t.status is Status.PASSED))
    found = {}
    for family, sizes in outcomes.items():
        pattern = mismatch.across_sizes(sizes, geometry)
        if pattern is not None:
            found[family] = pattern
    return found


def annotate(lab: LabResult, hints: tuple[Hint, ...] | None = None, geometry: Mapping[str, int] | None = None) -> None:
    """Give every test of the lab that did not pass and has a category (failed, not run, no GPU) its hint:
    for a wrong answer, what its mismatch looks like in the lab's geometry (and which sizes fail), then
    the advice that fits."""
    by_family = _size_patterns(lab, geometry)
    failing_families: dict[str, set[str]] = {}
    for t in lab.tests:
        if t.status is Status.FAILED and t.task and t.kind != "perf":
            failing_families.setdefault(t.task, set()).add(_family(t.name))
    for test in lab.tests:
        if test.status is Status.PASSED or test.category is None or test.hint:
            continue
        sizes = by_family.get(test.name.rpartition("/")[0]) if test.status is Status.FAILED else None
        extra = {f"sizes:{sizes.id}"} if sizes is not None else set()
        if test.status is Status.FAILED and test.task:
            # Alone: the only test of its task that fails (at whatever sizes). A check that only a huge
            # input can make (2^32 items) points at 32-bit indices only when nothing smaller fails.
            extra.add("task:alone" if failing_families.get(test.task) == {_family(test.name)} else "task:with-others")
        if test.properties.get("sanitizer_oob"):  # where its first out-of-bounds access went (the stage's)
            extra.add(f"oob:{test.properties['sanitizer_oob']}")
        if mismatch.size_of(test.name) == 1:
            extra.add("input:one")  # the test's input is one element: no neighbour, warp or tile to blame
        advice = hint_for(test.category, test.message, hints, geometry, extra, test.name, test.task)
        said: list[str] = []
        if test.category is Category.WRONG_ANSWER:
            _, patterns = mismatch.diagnosis(test.message, geometry)
            said = [p.text for p in patterns]
            if sizes is not None:
                said.append(sizes.text)
        test.hint = " ".join(x for x in (_sentence(said), advice) if x)
