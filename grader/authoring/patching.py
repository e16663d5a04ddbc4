"""Unified diffs applied the strict way: the adversarial cases and the mutants store only their
planted change, as a patch against a lab's file, and each must land exactly where it was written."""

from __future__ import annotations

import re

_HUNK = re.compile(r"^@@ -(\d+)(?:,\d+)? \+\d+(?:,\d+)? @@")


class PatchError(ValueError):
    """A patch that no longer applies to the lab's file: update the patch with the lab."""


def apply_patch(base: str, patch: str, name: str) -> str:
    """Apply a unified diff (`diff -u`) to base, as `patch` would: each hunk's old lines must occur in
    the file after the previous hunk; of several places, the one nearest the hunk's line number wins.
    Lines before the first hunk (a header, the ---/+++ names) are ignored. A patch that no longer fits
    fails loudly instead of planting its change somewhere else."""
    lines = base.splitlines(keepends=True)
    hunks: list[tuple[int, list[str], list[str]]] = []
    for raw in patch.splitlines(keepends=True):
        if raw.startswith(("---", "+++")) and not hunks:
            continue
        header = _HUNK.match(raw)
        if header:
            hunks.append((int(header.group(1)) - 1, [], []))
            continue
        if not hunks or raw.startswith("\\"):
            continue
        _, old, new = hunks[-1]
        tag, text = raw[:1], raw[1:]
        if tag in (" ", "-"):
            old.append(text)
        if tag in (" ", "+"):
            new.append(text)
    if not hunks:
        raise PatchError(f"{name}: no hunk (is it a unified diff made with diff -u?)")
    start, shift = 0, 0  # where the next hunk may begin; how far earlier hunks moved the lines
    for number, (line, old, new) in enumerate(hunks, start=1):
        at = [i for i in range(start, len(lines) - len(old) + 1) if lines[i : i + len(old)] == old]
        if not at:
            raise PatchError(f"{name}: hunk {number} no longer matches the lab's file")
        where = min(at, key=lambda i: abs(i - (line + shift)))
        lines[where : where + len(old)] = new
        start, shift = where + len(new), shift + len(new) - len(old)
    return "".join(lines)
