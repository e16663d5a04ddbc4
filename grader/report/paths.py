"""Absolute paths of the grading machine (its checkout, build and staging folders) mean nothing to a
student or an LMS, and say where the instructor keeps things: every export but results.json shows them
relative to the checkout ("/srv/cudalab/labs/03-vector-add/x.cu" becomes "labs/03-vector-add/x.cu").
results.json, the instructor's record, keeps them as they were."""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable
from pathlib import Path

from grader.model.results import Results

CHECKOUT = Path(__file__).resolve().parents[2]  # the checkout this grader runs from


def roots_of(*roots: Path | str | None) -> tuple[str, ...]:
    """The spellings of each root to remove, longest first (a resolved path and the one given), always
    with the grader's own checkout."""
    found: set[str] = set()
    for root in (*roots, CHECKOUT):
        if root is None or str(root) in ("", "/"):
            continue
        found.add(str(Path(root)).rstrip("/"))
        try:
            found.add(str(Path(root).resolve()).rstrip("/"))
        except OSError:
            pass
    return tuple(sorted((r for r in found if r not in ("", "/")), key=len, reverse=True))


def relative_paths(text: str, roots: Iterable[str]) -> str:
    """text with each root's "ROOT/" removed and a bare ROOT written "."; a path that only starts like
    ROOT (ROOT2/...) is left alone."""
    for root in roots:
        if not root or root not in text:
            continue
        pattern = re.compile(re.escape(root) + r"(/|(?![\w.+-]))")
        text = pattern.sub(lambda m: "" if m.group(1) == "/" else ".", text)
    return text


def portable(results: Results, roots: tuple[str, ...]) -> Results:
    """A copy of results whose texts (build logs and messages, test messages and hints, lab messages,
    task notes, run notes) hold no absolute path under roots."""
    out = copy.deepcopy(results)

    def rel(text: str) -> str:
        return relative_paths(text, roots) if text else text

    out.run.notes = [rel(n) for n in out.run.notes]
    for lab in out.labs:
        lab.messages = [rel(m) for m in lab.messages]
        for b in lab.builds:
            b.log, b.message = rel(b.log), rel(b.message)
        for t in lab.tests:
            t.message, t.hint = rel(t.message), rel(t.hint)
            if "skip_reason" in t.properties:
                t.properties["skip_reason"] = rel(t.properties["skip_reason"])
        for task in lab.tasks:
            task.notes = [rel(n) for n in task.notes]
    return out


__all__ = ["CHECKOUT", "portable", "relative_paths", "roots_of"]
