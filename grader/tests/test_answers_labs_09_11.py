"""Labs 09-11's answers files: each lab's answers.md (shipped blank) against the instructor's
solutions/NN-slug/answers.toml, and against its chapter's questions (README.md, "## Questions").

answers.md must name the same ids as answers.toml, in the same order, each `qN.name`; it must have one
`## N.` heading per question of the chapter, in order, and no value after any colon. Labs 09 (streams)
and 10 (cooperative groups) ask only for explanations and for measurements on the student's own GPU, so
they have no ids at all; lab 11's per-key byte counts of question 4 are derived here again, independently,
so a slip in answers.toml fails."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from grader.authoring.rubric import lab_answers_problems
from grader.score.answers import load_reference, read_answers

ROOT = Path(__file__).resolve().parents[2]
LABS = ["09-streams", "10-cooperative-groups", "11-quicksort"]
ID = re.compile(r"^q\d+\.[a-z0-9_]+$")
ID_LINE = re.compile(r"^\s*[-*]\s*(q\d+\.[a-z0-9_]+)\s*:", re.MULTILINE)


def _derived() -> dict[str, dict[str, float]]:
    """Every reference value, worked out from the chapter's numbers (not read from answers.toml)."""
    key_bytes = 32 // 8  # 32-bit keys (quicksort.cuh: unsigned)
    # Lab 11, question 4: "each level of the tree reads and writes every key once"; a radix sort makes
    # "about 9 passes of 4n bytes".
    return {
        "09-streams": {},
        "10-cooperative-groups": {},
        "11-quicksort": {
            "q4.quicksort_bytes_per_key_per_level": 2 * key_bytes,
            "q4.radix_bytes_per_key": 9 * key_bytes,
        },
    }


def _question_count(readme: str) -> int:
    """How many numbered questions the chapter's "## Questions" section holds."""
    section = readme.split("\n## Questions\n", 1)[1]
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
    assert reference.is_file(), f"{lab}: no answers.toml (an empty one says the lab has no numbers)"
    given = read_answers(answers)
    refs = load_reference(reference)
    assert list(given) == [r.id for r in refs]
    assert len(given) == len(ID_LINE.findall(answers)), "an id appears twice in answers.md"
    assert len({r.id for r in refs}) == len(refs), "an id appears twice in answers.toml"
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
        if line.lstrip().startswith("Why:"):
            assert line.strip() == "Why:", line


def test_every_question_asks_why_here(lab: str) -> None:
    """Every question of these chapters asks why, how or what: each heading has its "Why:"."""
    answers, readme, _ = _texts(lab)
    bodies = re.split(r"^##\s+\d+\.", answers, flags=re.MULTILINE)[1:]
    assert len(bodies) == _question_count(readme)
    assert all(re.search(r"^Why:$", b, flags=re.MULTILINE) for b in bodies)


def test_reference_values_are_the_derived_ones(lab: str) -> None:
    _, _, reference = _texts(lab)
    derived = _derived()[lab]
    refs = load_reference(reference)
    assert [r.id for r in refs] == list(derived)
    for r in refs:
        assert r.value == pytest.approx(derived[r.id], rel=1e-12, abs=1e-12), r.id
        assert r.tolerance == 0 and r.rel_tolerance == 0, r.id  # exact counts
