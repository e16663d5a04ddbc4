"""lab.toml as a student release holds it: without the [hidden] table, the hidden tasks and their [[perf]]
and [[technique]] entries (grader/authoring/release.py copies each lab.toml through strip_hidden)."""

from __future__ import annotations

import re

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

from grader.model.errors import Exit, GraderError

# A lab.toml header line: [name] or [[name]], with an optional trailing comment.
_HEADER = re.compile(r"^\s*(\[\[?)\s*([A-Za-z0-9_.\-]+)\s*\]\]?\s*(#.*)?$")


class ReleaseError(GraderError):
    """The release could not be made, or its verification failed."""

    def __init__(self, message: str, code: Exit = Exit.TEST_FAILURES) -> None:
        super().__init__(message, code)


# ------------------------------------------------------------------------------------------------


def _blocks(text: str) -> list[list[str]]:
    """The lines of a TOML file cut at each table header; comment lines right above a header go with it."""
    blocks: list[list[str]] = [[]]
    for line in text.splitlines(keepends=True):
        if _HEADER.match(line):
            prev = blocks[-1]
            k = len(prev)
            while k > 0 and prev[k - 1].lstrip().startswith("#"):
                k -= 1
            moved = prev[k:]
            del prev[k:]
            blocks.append(moved + [line])
        else:
            blocks[-1].append(line)
    return blocks


def strip_hidden(text: str, where: str = "lab.toml") -> str:
    """lab.toml without what describes hidden tests: [hidden], hidden tasks and their perf/technique
    entries. Raises ReleaseError when the result still mentions them (e.g. an inline table)."""
    blocks = _blocks(text)
    parsed: list[tuple[str, dict]] = []
    for block in blocks[1:]:
        header = next(line for line in block if _HEADER.match(line))
        name = _HEADER.match(header).group(2)  # type: ignore[union-attr]
        try:
            data = tomllib.loads("".join(block))
        except tomllib.TOMLDecodeError as err:
            raise ReleaseError(f"{where}: cannot read the [{name}] table: {err}", Exit.USAGE) from None
        entry = data
        for part in name.split("."):
            entry = entry.get(part, {}) if isinstance(entry, dict) else {}
        if isinstance(entry, list):
            entry = entry[0] if entry else {}
        parsed.append((name, entry))
    hidden_tasks = {e.get("id") for n, e in parsed if n == "task" and e.get("hidden")}
    kept = [blocks[0]]
    for block, (name, entry) in zip(blocks[1:], parsed, strict=True):
        drop = (
            name == "hidden" or name.startswith("hidden.")
            or (name == "task" and bool(entry.get("hidden")))
            or (name in ("perf", "technique") and entry.get("task") in hidden_tasks)
        )
        if not drop:
            kept.append(block)
    out = re.sub(r"\n{3,}", "\n\n", "".join("".join(b) for b in kept))
    problems = hidden_keys(out)
    if problems:
        raise ReleaseError(f"{where}: after stripping, still {'; '.join(problems)}")
    return out


def hidden_keys(text: str) -> list[str]:
    """What in a lab.toml text still describes hidden tests ([] when nothing does)."""
    data = tomllib.loads(text)
    problems = []
    if "hidden" in data:
        problems.append("has a [hidden] table")
    problems += [f"has hidden task '{t.get('id')}'" for t in data.get("task", []) if t.get("hidden")]
    problems += [f"a test glob names hidden tests ({g})" for t in data.get("task", []) for g in t.get("tests", [])
                 if "hidden" in g.lower()]
    return problems
