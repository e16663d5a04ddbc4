"""Every lab's answers file (labs/NN-slug/answers.md, shipped blank) against the instructor's
solutions/NN-slug/answers.toml and against its chapter's questions (README.md, "## Questions"): the same
ids in the same order, each `qN.name` under its own question's `## N.` heading, one heading per question,
every reference explained, no value in the shipped file. The values themselves are derived again in
test_answers_values.py."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from grader.authoring.rubric import lab_answers_problems
from grader.score.answers import load_reference, read_answers

ROOT = Path(__file__).resolve().parents[2]
LABS = sorted(p.parent.name for p in (ROOT / "labs").glob("*/answers.md"))
ID = re.compile(r"^q\d+\.[a-z0-9_]+$")


def test_every_lab_has_an_answers_file() -> None:
    assert len(LABS) == len(list((ROOT / "labs").glob("*/lab.toml"))) == 11


def _question_count(readme: str) -> int:
    """How many numbered questions the chapter's "## Questions" section holds."""
    section = readme.split("\n## Questions", 1)[1]
    section = re.split(r"^## ", section, flags=re.MULTILINE)[0]
    numbers = [int(n) for n in re.findall(r"^(\d+)\.\s", section, flags=re.MULTILINE)]
    assert numbers == list(range(1, len(numbers) + 1)), numbers
    return len(numbers)


@pytest.fixture(params=LABS)
def lab(request: pytest.FixtureRequest) -> str:
    return request.param


def _texts(lab: str) -> tuple[str, str, Path]:
    answers = (ROOT / "labs" / lab / "answers.md").read_text(encoding="utf-8")
    readme = (ROOT / "labs" / lab / "README.md").read_text(encoding="utf-8")
    return answers, readme, ROOT / "solutions" / lab / "answers.toml"


def test_answers_md_names_the_reference_ids_in_order(lab: str) -> None:
    answers, _, reference = _texts(lab)
    given = read_answers(answers)
    refs = load_reference(reference)
    assert list(given) == [r.id for r in refs]
    assert len(set(given)) == len(re.findall(r"^\s*[-*]\s*q\d+\.", answers, flags=re.MULTILINE)), "an id twice"
    assert lab_answers_problems(ROOT / "labs" / lab, ROOT) == []


def test_every_id_is_a_question_number_and_a_name(lab: str) -> None:
    answers, readme, reference = _texts(lab)
    questions = _question_count(readme)
    for r in load_reference(reference):
        assert ID.match(r.id), r.id
        assert 1 <= int(r.id[1:r.id.index(".")]) <= questions, r.id
        assert math.isfinite(r.value) and r.tolerance >= 0 and r.rel_tolerance >= 0, r
        assert r.why.strip(), f"{r.id} has no derivation"
    for i in read_answers(answers):
        assert ID.match(i), i


def test_one_heading_per_question_in_order(lab: str) -> None:
    answers, readme, _ = _texts(lab)
    assert answers.startswith(f"# Lab {lab[:2]} answers\n")
    assert f"`make grade LAB={lab[:2]}`" in answers
    headings = [int(n) for n in re.findall(r"^##\s+(\d+)\.\s+\S", answers, flags=re.MULTILINE)]
    assert headings == list(range(1, _question_count(readme) + 1))
    # Each id sits under its own question's heading.
    current = 0
    for line in answers.splitlines():
        if m := re.match(r"^##\s+(\d+)\.", line):
            current = int(m.group(1))
        elif m := re.match(r"^\s*[-*]\s*q(\d+)\.", line):
            assert int(m.group(1)) == current, line


def test_the_file_ships_blank(lab: str) -> None:
    answers, _, _ = _texts(lab)
    assert all(v == "" for v in read_answers(answers).values())
    for line in answers.splitlines():
        if re.match(r"^\s*[-*]\s*q\d+\.", line):
            assert line.rstrip().endswith(":"), line
        if line.startswith("Why:"):
            assert line.rstrip() == "Why:", line


