"""The answers files of labs 05 (tiled matmul), 06 (reduce), 07 (scan) and 08 (histogram): each lab's
answers.md (shipped blank, one `## N.` heading per question of its README) against the instructor's
solutions/NN-slug/answers.toml (the same ids, in the same order)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from grader.score.answers import load_reference, read_answers

ROOT = Path(__file__).resolve().parents[2]
LABS = ["05-tiled-matmul", "06-reduce", "07-scan", "08-histogram"]
ID = re.compile(r"^q\d+\.[a-z0-9_]+$")
HEADING = re.compile(r"^##\s+(\d+)\.\s+\S", re.MULTILINE)
ID_LINE = re.compile(r"^\s*[-*]\s*(q\d+\.[a-z0-9_]+)\s*:", re.MULTILINE)


def _answers(lab: str) -> str:
    return (ROOT / "labs" / lab / "answers.md").read_text(encoding="utf-8")


def _questions(lab: str) -> int:
    """How many numbered questions the README's final "## Questions" section has."""
    readme = (ROOT / "labs" / lab / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## Questions\n", 1)[1]
    section = re.split(r"^## ", section, maxsplit=1, flags=re.MULTILINE)[0]
    numbers = [int(n) for n in re.findall(r"^(\d+)\.\s", section, flags=re.MULTILINE)]
    assert numbers == list(range(1, len(numbers) + 1)), f"{lab}: README questions numbered {numbers}"
    return len(numbers)


@pytest.mark.parametrize("lab", LABS)
def test_answers_md_has_the_ids_of_answers_toml_in_order(lab: str) -> None:
    given = read_answers(_answers(lab))
    refs = load_reference(ROOT / "solutions" / lab / "answers.toml")
    assert list(given) == [r.id for r in refs]
    assert len(set(given)) == len(ID_LINE.findall(_answers(lab))), "an id appears twice in answers.md"
    assert len({r.id for r in refs}) == len(refs), "an id appears twice in answers.toml"


@pytest.mark.parametrize("lab", LABS)
def test_ids_are_well_formed_and_reference_values_explained(lab: str) -> None:
    for ref in load_reference(ROOT / "solutions" / lab / "answers.toml"):
        assert ID.match(ref.id), ref.id
        assert ref.why.strip(), f"{ref.id} has no why"
        assert ref.tolerance >= 0 and ref.rel_tolerance >= 0, ref.id


@pytest.mark.parametrize("lab", LABS)
def test_one_heading_per_readme_question_in_order(lab: str) -> None:
    text = _answers(lab)
    assert text.startswith(f"# Lab {lab[:2]} answers\n")
    headings = [int(n) for n in HEADING.findall(text)]
    assert headings == list(range(1, _questions(lab) + 1))


@pytest.mark.parametrize("lab", LABS)
def test_each_id_sits_under_its_own_question(lab: str) -> None:
    text = _answers(lab)
    heads = list(HEADING.finditer(text))
    for i, head in enumerate(heads):
        body = text[head.end():heads[i + 1].start() if i + 1 < len(heads) else len(text)]
        for qid in ID_LINE.findall(body):
            assert qid.split(".")[0] == f"q{head.group(1)}", f"{qid} under question {head.group(1)}"


@pytest.mark.parametrize("lab", LABS)
def test_the_shipped_file_is_blank(lab: str) -> None:
    given = read_answers(_answers(lab))
    assert given, f"{lab}: no ids"
    assert {i: v for i, v in given.items() if v} == {}
    for line in _answers(lab).splitlines():
        if line.strip() == "Why:" or line.startswith("Why:"):
            assert line.strip() == "Why:", line
