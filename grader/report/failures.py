"""A lab's failures grouped by failure mode, for the console and the HTML report: one entry per mode
(the same test at other sizes failing the same way is one mode), sanitizer findings first since they
name a kernel and a source line, then each mode by its smallest failing input, with "also fails at"
collapsed. Each entry's line says what is wrong ("first wrong at [4096]: expected 16221, got 16719"),
not the gtest expression that found it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from grader.model.results import Category, LabResult, Status, TestResult
from grader.report._format import category_label, clean_text, first_line, labelled
from grader.score import mismatch


@dataclass
class FailureGroup:
    test: TestResult  # the smallest failing input of this mode
    also: list[str] = field(default_factory=list)  # the other sizes (or tests) that fail the same way

    @property
    def what(self) -> str:
        """One line: the category and what is wrong."""
        found = mismatch.read(self.test.message)
        lines = [ln.strip() for ln in clean_text(self.test.message).splitlines() if ln.strip()]
        if found is not None:
            text = found.headline()
        elif self.test.category is Category.SANITIZER and len(lines) > 1:  # the first finding, not the count
            text = first_line(lines[1], 160)
        else:
            text = first_line(clean_text(self.test.message), 100)
        return labelled(category_label(self.test.category) or "failed", text)


def _mode(t: TestResult) -> tuple[str, str]:
    """What makes two failures one mode: the same test at another size, failing in the same category.
    (The pattern of one size cannot tell: a tile bug is "the last element" at n = tile + 1 and "all but
    the first tile" at 2^24; the smallest size is the one to fix first either way.)"""
    family = t.name.rpartition("/")[0] if mismatch.size_of(t.name) is not None else t.name
    return family, t.category.value if t.category else ""


def group_failures(lab: LabResult) -> list[FailureGroup]:
    failing = [t for t in lab.tests if t.status is Status.FAILED]
    groups: dict[tuple[str, str], list[TestResult]] = {}
    for t in failing:
        groups.setdefault(_mode(t), []).append(t)
    out = []
    for tests in groups.values():
        tests.sort(key=lambda t: (mismatch.size_of(t.name) is None, mismatch.size_of(t.name) or 0, t.name))
        first, rest = tests[0], tests[1:]
        also = [f"{mismatch.size_of(t.name):,}" if mismatch.size_of(t.name) is not None else t.name for t in rest]
        out.append(FailureGroup(first, also))
    order = {id(t): i for i, t in enumerate(failing)}
    out.sort(key=lambda g: (g.test.category is not Category.SANITIZER, order[id(g.test)]))
    return out
