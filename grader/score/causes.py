"""Causes: the short names (`missing-barrier`, `tile-offset`) that tie a planted bug to the hints that
name it. A mutant's header says which cause it plants (`# cause: tile-offset`); a hint says which causes
it explains (`causes = ["tile-offset"]`); the diagnosis table (bench/diagnosis_table.py) counts a
caught bug as explained when the report's first hint names the mutant's cause. Each hints.toml declares
the causes it uses in a [causes] table (id = one line saying what goes wrong), the grader's for every
lab, a lab's own for that lab: an id nobody declared is a typo, and `grader mutants --check` says so.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

from grader.score.hints import HINTS_FILE, LAB_HINTS

ID = re.compile(r"^[a-z0-9][a-z0-9-]*$")


class CausesError(ValueError):
    """A [causes] table or a causes list that is malformed."""


def parse_causes(text: str, source: str) -> dict[str, str]:
    """A hints file's [causes] table: {id: what goes wrong}."""
    try:
        table = tomllib.loads(text).get("causes", {})
    except tomllib.TOMLDecodeError as err:
        raise CausesError(f"{source}: not valid TOML: {err}") from None
    if not isinstance(table, dict):
        raise CausesError(f"{source}: [causes] must be a table of id = \"what goes wrong\"")
    for key, value in table.items():
        if not ID.match(key) or not isinstance(value, str) or not value.strip():
            raise CausesError(f"{source}: [causes] {key!r}: an id of lower-case letters, digits and dashes, "
                              "and one line saying what goes wrong")
    return dict(table)


def declared(lab_dir: Path | None = None) -> dict[str, str]:
    """The causes a lab may use: the grader's, then the lab's own (labs/NN-slug/hints.toml)."""
    out = parse_causes(HINTS_FILE.read_text(), str(HINTS_FILE))
    own = Path(lab_dir) / LAB_HINTS if lab_dir is not None else None
    if own is not None and own.is_file():
        out.update(parse_causes(own.read_text(), str(own)))
    return out


def undeclared(ids: Iterable[str], known: dict[str, str]) -> list[str]:
    return sorted({i for i in ids if i not in known})
