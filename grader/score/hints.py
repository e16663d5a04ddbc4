"""Hints for failures. The texts live in hints.toml (data, not code); this module only derives a few
facts from a failure message (its "signatures") and picks the first entry that fits."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from grader.model.results import Category, LabResult, Status

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

HINTS_FILE = Path(__file__).with_name("hints.toml")

# cudalab/compare.hpp: "<bad> of <total> elements differ (...); mismatches span indices <first>..<last>"
_MISMATCH = re.compile(r"(\d+) of (\d+) elements differ.*?mismatches span indices (\d+)\.\.(\d+)", re.S)


@dataclass(frozen=True)
class Hint:
    category: Category
    text: str
    match: re.Pattern[str] | None = None
    signature: str | None = None

    def fits(self, category: Category, message: str, signatures: set[str]) -> bool:
        if category is not self.category:
            return False
        if self.match is not None and not self.match.search(message):
            return False
        return self.signature is None or self.signature in signatures


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
                    signature=entry.get("signature"),
                )
            )
        except (KeyError, ValueError, re.error) as err:
            raise HintsError(f"{source}: hint #{i}: {err}") from None
    return hints


@lru_cache(maxsize=None)
def load_hints(path: Path = HINTS_FILE) -> tuple[Hint, ...]:
    return tuple(parse_hints(path.read_text(), str(path)))


def signatures(message: str) -> set[str]:
    """Facts about a failure that a regular expression alone cannot state."""
    found: set[str] = set()
    for m in _MISMATCH.finditer(message):
        bad, total, first, last = (int(g) for g in m.groups())
        if total > 0 and bad >= total:
            found.add("mismatch:all")
        elif last == total - 1 and first > 0 and bad == last - first + 1:
            found.add("mismatch:tail")
        else:
            found.add("mismatch:some")
    return found


def hint_for(category: Category | None, message: str, hints: tuple[Hint, ...] | None = None) -> str:
    if category is None:
        return ""
    hints = load_hints() if hints is None else hints
    sigs = signatures(message)
    return next((h.text for h in hints if h.fits(category, message, sigs)), "")


def annotate(lab: LabResult, hints: tuple[Hint, ...] | None = None) -> None:
    """Give every test of the lab that did not pass and has a category (failed, not run, no GPU) its hint."""
    for test in lab.tests:
        if test.status is not Status.PASSED and test.category is not None and not test.hint:
            test.hint = hint_for(test.category, test.message, hints)
