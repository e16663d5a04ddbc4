"""A lab's failures grouped by failure mode, for the console and the HTML report: one entry per mode
(the same test at other sizes failing the same way is one mode), sanitizer findings first since they
name a kernel and a source line, then the modes whose message says where the output is wrong, then the
rest, each by task and the smallest input first; each mode shown by its smallest failing input, with
"also fails at" collapsed. Each entry's line says what is wrong ("first wrong at [4096]: expected 16221,
got 16719"), not the gtest expression that found it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from grader.model.results import Category, LabResult, Status, TestResult
from grader.report._format import category_label, clean_text, first_line, labelled
from grader.score import mismatch


@dataclass
class FailureGroup:
    test: TestResult  # the smallest failing input of this mode
    also: list[str] = field(default_factory=list)  # the other sizes (or tests) that fail the same way
    same: list[str] = field(default_factory=list)  # other tests of the task failing alike, with the same advice

    @property
    def also_text(self) -> str:
        """ "also fails at 2, 31, …; the same way: Sorted, Reversed" (empty when nothing else fails)."""
        parts = []
        if self.also:
            parts.append(f"also fails at {', '.join(self.also[:6])}{', …' if len(self.also) > 6 else ''}")
        if self.same:
            parts.append(f"the same way: {', '.join(self.same[:6])}{', …' if len(self.same) > 6 else ''}")
        return "; ".join(parts)

    @property
    def what(self) -> str:
        """One line: the category and what is wrong."""
        found = mismatch.read(self.test.message)
        lines = [ln.strip() for ln in clean_text(self.test.message).splitlines() if ln.strip()]
        if found is not None:
            text = found.headline()
        elif self.test.category is Category.SANITIZER and len(lines) > 1:  # the first finding, not the count
            text = first_line(lines[1], 280)  # with where its first access went and by which thread
        else:
            text = first_line(said_by_the_test(clean_text(self.test.message)), 100)
        return labelled(category_label(self.test.category) or "failed", text)


# GoogleTest's own lines of a failed assertion ("Expected equality of these values:", "  errors[0]",
# "    Which is: 1712", "Value of: ...", "  Actual: false", "Expected: true"), before what the test says.
_GTEST_LINE = re.compile(r"^(?:\s|Expected equality of these values:|Value of:|Expected:|Actual:|Which is:|"
                         r"The difference between|Expected: \(|  Actual:)")


def said_by_the_test(message: str) -> str:
    """The message from the test's own words on ("inclusive scan of n = 4294979641 ...: 1712 item(s)
    wrong"), GoogleTest's expression and values before it left out; the whole message when it has
    nothing else."""
    lines = message.splitlines()
    if not lines or not _GTEST_LINE.match(lines[0]):
        return message
    rest = [ln for ln in lines[1:] if ln.strip() and not _GTEST_LINE.match(ln) and not ln.startswith("(at ")]
    if rest:
        return "\n".join(rest)
    # "  Actual: false (out-of-bounds write: ...)": the check's own explanation, in GoogleTest's parentheses.
    said = next((m.group(1) for ln in lines if (m := re.match(r"\s*Actual: false \((.+)\)\s*$", ln))), None)
    return said or message


def _mode(t: TestResult) -> tuple[str, str]:
    """What makes two failures one mode: the same test at another size, failing in the same category.
    (The pattern of one size cannot tell: a tile bug is "the last element" at n = tile + 1 and "all but
    the first tile" at 2^24; the smallest size is the one to fix first either way.)"""
    # The same test at another size or shape (Tiled/m17_n33_k65 too); each technique check is its own mode.
    grouped = "/" in t.name and t.category not in (Category.TECHNIQUE_MISSING, Category.SANITIZER)
    family = t.name.rpartition("/")[0] if grouped else t.name
    return family, t.category.value if t.category else ""


# "n = 50,001", or a sum of powers as a huge test writes it: "n = 2^32 + 2^20 + 3".
_TERM = r"\d[\d,]*(?:\^\d+)?"
_INPUT_SIZE = re.compile(rf"\bn = ({_TERM}(?:\s*\+\s*{_TERM})*)")


def _said_size(words: str) -> int:
    """The n of _INPUT_SIZE's match: each term a number or a power (2^32), summed."""
    total = 0
    for term in re.split(r"\s*\+\s*", words):
        base, _, power = term.replace(",", "").partition("^")
        total += int(base) ** int(power) if power else int(base)
    return total


def _size(t: TestResult) -> float:
    """How big the failing input was: the size in the test's name, else the elements its mismatch counted;
    where that is one element (a reduction's sum, whatever its input), the n its own words name ("call 1
    of 3 on the same workspace, n = 50001")."""
    n = mismatch.size_of(t.name)
    if n is None and (found := mismatch.read(t.message)) is not None:
        n = found.total
        if n == 1 and (said := _INPUT_SIZE.search(t.message)) is not None:
            n = _said_size(said.group(1))
    return float("inf") if n is None else n


def _also(t: TestResult) -> str:
    n = mismatch.size_of(t.name)
    return f"{n:,}" if n is not None else t.name.rpartition("/")[2] or t.name


def _advice(t: TestResult) -> tuple[str | None, str, str] | None:
    """What makes two test families one mode: one task, one category, the same hint but for its numbers
    (lab 11's BlockSortCorrectness.Random, .Sorted, .Reversed ... all never written). None: never merged."""
    if not t.hint or t.category in (Category.SANITIZER, Category.TECHNIQUE_MISSING):
        return None
    return t.task, t.category.value if t.category else "", re.sub(r"[\d][\d,.]*", "#", t.hint)


def _short(name: str, like: str) -> str:
    """A family's name, without the suite when it is the same as like's."""
    family = name.rpartition("/")[0] if "/" in name else name
    suite, _, rest = family.partition(".")
    return rest if rest and suite == like.partition(".")[0] else family


def _names_a_line(t: TestResult) -> bool:
    """A sanitizer finding that names a kernel or a source line (the stage records both): what the report
    puts first. A finding of neither (a leak at exit, say) points nowhere and goes with the rest."""
    return t.category is Category.SANITIZER and bool(t.properties.get("sanitizer_kernel")
                                                     or t.properties.get("sanitizer_location"))


def group_failures(lab: LabResult) -> list[FailureGroup]:
    failing = [t for t in lab.tests if t.status is Status.FAILED]
    groups: dict[tuple[str, str], list[TestResult]] = {}
    for t in failing:
        groups.setdefault(_mode(t), []).append(t)
    out = []
    for tests in groups.values():
        tests.sort(key=lambda t: (_size(t), t.name))
        out.append(FailureGroup(tests[0], [_also(t) for t in tests[1:]]))
    order = {id(t): i for i, t in enumerate(failing)}
    # Tasks in the rubric's order (the chapter's): a binary runs its plain TESTs before its TEST_Ps, so in
    # test order lab 11's block-sort bug led with a quicksort test of the last task. Tasks the rubric does
    # not list follow in test order.
    task_rank: dict[str | None, int] = {task.id: i for i, task in enumerate(lab.tasks)}
    for t in failing:
        task_rank.setdefault(t.task, len(task_rank))
    # Sanitizer findings that name a line first, then task by task in that order (a later step builds on
    # the earlier ones: lab 11's quicksort on its partition, whose wrong counts must lead, although the
    # quicksort's wrong keys say where they are); within a task, the failures that say where the output is
    # wrong (a mismatch read) before the rest (an expression, a huge input's single check), and the
    # smallest failing input first (a plain TEST on 262,155 elements, declared before the TEST_Ps, comes
    # after the same task's n = 1).
    out.sort(key=lambda g: (not _names_a_line(g.test),
                            task_rank[g.test.task] if g.test.task else order[id(g.test)] + len(failing),
                            mismatch.read(g.test.message) is None,
                            _size(g.test) if g.test.category not in (Category.TECHNIQUE_MISSING, Category.SANITIZER)
                            else 0, order[id(g.test)]))
    merged: list[FailureGroup] = []
    first_of: dict[tuple[str | None, str, str], FailureGroup] = {}
    for g in out:
        key = _advice(g.test)
        if key is not None and key in first_of:
            first_of[key].same.append(_short(g.test.name, first_of[key].test.name))
            continue
        if key is not None:
            first_of[key] = g
        merged.append(g)
    return merged
