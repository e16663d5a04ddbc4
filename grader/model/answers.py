"""A lab's answers to its chapter's questions (labs/NN-slug/answers.md): each number checked against the
instructor's reference (solutions/NN-slug/answers.toml) with its tolerance, each explanation kept for the
instructor. No points: the report shows them, and the reference values never leave the grader."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

ANSWERS_FILE = "answers.md"
REFERENCE_FILE = "answers.toml"


@dataclass
class AnswerCheck:
    id: str  # "q3.blocks"
    given: str  # what the student wrote after the colon ("" when blank)
    status: str  # "right", "wrong", "blank", "unreadable" (not a number), "unchecked" (no reference here)


@dataclass
class LabAnswers:
    file: str  # labs/NN-slug/answers.md
    checked: bool  # the reference answers were there (the instructor's tree)
    answers: list[AnswerCheck] = field(default_factory=list)
    explanations: dict[str, str] = field(default_factory=dict)  # question number -> the text under "Why:"
    problems: list[str] = field(default_factory=list)  # ids the file lacks, or has twice

    @property
    def right(self) -> int:
        return sum(a.status == "right" for a in self.answers)

    @property
    def written(self) -> int:
        return sum(a.status != "blank" for a in self.answers)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LabAnswers:
        data = dict(data)
        data["answers"] = [AnswerCheck(**a) for a in data.get("answers", [])]
        return cls(**data)
