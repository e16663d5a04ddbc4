"""Labs 09-11's answers files: each lab's answers.md (shipped blank) against the instructor's
solutions/NN-slug/answers.toml, and against its chapter's questions (README.md, "## Questions").

test_answers_files.py checks the files' shape for every lab. Labs 09 (streams)
and 10 (cooperative groups) ask only for explanations and for measurements on the student's own GPU, so
they have no ids at all (lab 11's two values are derived in test_answers_values.py); every question
of the three asks why, how or what."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from grader.tests.test_answers_files import _question_count

ROOT = Path(__file__).resolve().parents[2]
LABS = ["09-streams", "10-cooperative-groups", "11-quicksort"]


@pytest.fixture(params=LABS)
def lab(request: pytest.FixtureRequest) -> str:
    return request.param


def test_every_question_asks_why_here(lab: str) -> None:
    """Every question of these chapters asks why, how or what: each heading has its "Why:"."""
    answers = (ROOT / "labs" / lab / "answers.md").read_text(encoding="utf-8")
    readme = (ROOT / "labs" / lab / "README.md").read_text(encoding="utf-8")
    bodies = re.split(r"^##\s+\d+\.", answers, flags=re.MULTILINE)[1:]
    assert len(bodies) == _question_count(readme)
    assert all(re.search(r"^Why:$", b, flags=re.MULTILINE) for b in bodies)
