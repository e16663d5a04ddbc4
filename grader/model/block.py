"""Why a lab or one of its binaries does not run, and what each of its tests then says."""

from __future__ import annotations

from dataclasses import dataclass

from grader.model.results import BuildResult, Category, Status, TestResult, test_kind


@dataclass(frozen=True)
class Block:
    """A refusal (intake, inspection), the grade's global time limit or a GPU that stopped working."""

    category: Category
    message: str  # a lab message
    test_message: str  # each test's message
    label: str = "student"
    target: str = ""

    def tests(self, names: list[str]) -> list[TestResult]:
        return [TestResult(name=n, status=Status.NOT_RUN, kind=test_kind(n), binary=self.label,
                           category=self.category, message=self.test_message) for n in names]

    @property
    def build(self) -> BuildResult:
        """A stand-in for a build that was never attempted."""
        return BuildResult(target=self.target, ok=False, category=self.category, message=self.test_message)
