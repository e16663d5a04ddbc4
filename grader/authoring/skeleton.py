"""Derive each lab's student skeleton from its reference solution.

The solution file is the single source of truth. In it:
  - lines from ``// BEGIN SOLUTION`` to ``// END SOLUTION`` (inclusive) exist only in the solution;
  - a line ``// STUB: <code>`` becomes ``<code>`` (same indentation) in the skeleton, and is a
    comment in the solution (typically a placeholder ``return``).
Everything else is shared. ``check`` reports skeletons that differ from what the solution implies.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from pathlib import Path

from grader.model.labs import Lab

BEGIN = re.compile(r"^\s*//\s*BEGIN SOLUTION\s*$")
END = re.compile(r"^\s*//\s*END SOLUTION\s*$")
STUB = re.compile(r"^(\s*)//\s*STUB:\s?(.*)$")


class MarkerError(ValueError):
    """The solution's markers are unbalanced or nested."""


def make_skeleton(solution_text: str, source: str = "<solution>") -> str:
    out: list[str] = []
    inside = False
    begin_line = 0
    for number, line in enumerate(solution_text.splitlines(keepends=True), start=1):
        if BEGIN.match(line):
            if inside:
                raise MarkerError(f"{source}:{number}: BEGIN SOLUTION inside another (opened at line {begin_line})")
            inside, begin_line = True, number
            continue
        if END.match(line):
            if not inside:
                raise MarkerError(f"{source}:{number}: END SOLUTION without BEGIN SOLUTION")
            inside = False
            continue
        if inside:
            continue
        stub = STUB.match(line)
        if stub:
            newline = "\n" if line.endswith("\n") else ""
            out.append(f"{stub.group(1)}{stub.group(2).rstrip()}{newline}")
        else:
            out.append(line)
    if inside:
        raise MarkerError(f"{source}:{begin_line}: BEGIN SOLUTION is never closed")
    text = "".join(out)
    return text.replace(
        "// Reference solution. Regions between BEGIN/END SOLUTION are removed from the student's copy, and\n"
        "// \"STUB:\" lines become code there (python3 -m grader skeleton --write).\n",
        "",
    )


@dataclass
class SkeletonDiff:
    lab: Lab
    path: Path
    diff: str  # empty when the skeleton is up to date

    @property
    def ok(self) -> bool:
        return not self.diff


def pairs(lab: Lab) -> list[tuple[Path, Path]]:
    """(solution file, skeleton file) for each student file that has a solution."""
    result = []
    for name in lab.student_files:
        solution = lab.solution_dir / name
        if solution.is_file():
            result.append((solution, lab.path / name))
    return result


def check(lab: Lab) -> list[SkeletonDiff]:
    diffs = []
    for solution, skeleton in pairs(lab):
        expected = make_skeleton(solution.read_text(), str(solution))
        actual = skeleton.read_text() if skeleton.exists() else ""
        diff = "".join(
            difflib.unified_diff(
                actual.splitlines(keepends=True),
                expected.splitlines(keepends=True),
                fromfile=str(skeleton),
                tofile=f"{skeleton} (from {solution.name})",
            )
        )
        diffs.append(SkeletonDiff(lab, skeleton, diff))
    return diffs


def write(lab: Lab) -> list[Path]:
    written = []
    for solution, skeleton in pairs(lab):
        expected = make_skeleton(solution.read_text(), str(solution))
        if not skeleton.exists() or skeleton.read_text() != expected:
            skeleton.write_text(expected)
            written.append(skeleton)
    return written
