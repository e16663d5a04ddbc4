"""answers.md (grader/score/answers.py): the numbers of a chapter's questions read, checked against the
instructor's reference with its tolerance, carried through results.json into the report, and staged from
a submission as text only."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from grader.intake.staging import stage_submission
from grader.model.labs import discover
from grader.model.results import LabResult, Results
from grader.report import render_html
from grader.report.console import render_console
from grader.report.sample import sample_results
from grader.score import answers
from grader.tests.conftest import write_lab

ANSWERS = """# Lab 01 answers

## 1. Threads and idle threads

- q1.threads: 2,048
- q1.idle: 40

## 2. Occupancy

- q2.occupancy_pct: 62.5 %
- q2.blocks: about four

Why:
Registers cap it.

## 3. Blank

- q3.sectors:
"""
REFERENCE = """
[[answer]]
id = "q1.threads"
value = 2048
why = "4 blocks of 512"

[[answer]]
id = "q1.idle"
value = 48

[[answer]]
id = "q2.occupancy_pct"
value = 62.0
tolerance = 1.0

[[answer]]
id = "q2.blocks"
value = 4

[[answer]]
id = "q3.sectors"
value = 32

[[answer]]
id = "q4.ways"
value = 32
rel_tolerance = 0.1
"""


def _lab(tmp_path: Path, reference: bool = True):
    write_lab(tmp_path)
    (tmp_path / "labs" / "01-add" / "answers.md").write_text(ANSWERS.replace("2,048", "").replace("40", "")
                                                                   .replace("62.5 %", "").replace("about four", ""))
    if reference:
        (tmp_path / "solutions" / "01-add" / "answers.toml").write_text(REFERENCE)
    return discover(tmp_path)[0]


def test_numbers_are_read_and_checked_with_their_tolerance(tmp_path: Path) -> None:
    lab = _lab(tmp_path)
    got = answers.check(lab, ANSWERS)
    assert got is not None and got.checked and got.file == "labs/01-add/answers.md"
    assert {a.id: a.status for a in got.answers} == {
        "q1.threads": "right", "q1.idle": "wrong", "q2.occupancy_pct": "right", "q2.blocks": "unreadable",
        "q3.sectors": "blank", "q4.ways": "blank"}
    assert got.right == 2 and got.written == 4
    assert got.problems == ["q4.ways is not in the file (keep every `- q4.ways:` line)"]
    assert got.explanations == {"2": "Registers cap it."}


@pytest.mark.parametrize("text, value", [("2048", 2048.0), ("2,048", 2048.0), ("62.5 %", 62.5), ("32-way", 32.0),
                                         ("0.625", 0.625), ("1e6", 1e6), (".5", 0.5), ("-3", -3.0)])
def test_a_number_in_a_students_words(text: str, value: float) -> None:
    assert answers.number(text) == value


def test_not_numbers() -> None:
    assert answers.number("about four") is None and answers.number("") is None


def test_a_release_has_no_reference_so_nothing_is_judged(tmp_path: Path) -> None:
    lab = _lab(tmp_path, reference=False)
    got = answers.check(lab, ANSWERS)
    assert got is not None and not got.checked
    assert {a.status for a in got.answers} == {"unchecked", "blank"}
    assert answers.check(lab, None) is None


def test_the_report_shows_verdicts_never_the_reference(tmp_path: Path) -> None:
    lab = _lab(tmp_path)
    results = sample_results()
    result = results.labs[0]
    result.answers = answers.check(lab, ANSWERS)
    html = render_html(results)
    assert "Questions (answers.md)" in html and "2 of 6 numbers right" in html and "✗ not what we get" in html
    assert ">48<" not in html.split("Questions (answers.md)")[1].split("</table>")[0]  # the reference stays out
    again = Results.from_dict(results.to_dict())
    assert again.labs[0].answers == result.answers
    out = io.StringIO()
    render_console(results, out)
    assert "answers.md: 2 of 6 numbers right; check q1.idle, q2.blocks; 2 blank" in out.getvalue()
    assert Results.from_dict(Results(results.run, [LabResult(1, "01-add", "A", 100)]).to_dict()).labs[0].answers is None


def test_a_submissions_answers_are_staged_as_text(tmp_path: Path) -> None:
    lab = _lab(tmp_path / "tree")
    sub = tmp_path / "sub" / "labs" / "01-add"
    sub.mkdir(parents=True)
    (sub / "add.cu").write_text("int add(int a, int b) { return a + b; }\n")
    (sub / "answers.md").write_text(ANSWERS)
    staged = stage_submission([lab], tmp_path / "sub", tmp_path / "stage")
    mine = staged.lab("01-add")
    assert mine.answers and mine.files == ["add.cu"] and not mine.ignored
    assert answers.answers_text(staged.path_of(lab, "answers.md")) == ANSWERS
    (sub / "answers.md").unlink()
    (sub / "answers.md").symlink_to("/etc/passwd")
    again = stage_submission([lab], tmp_path / "sub", tmp_path / "stage2").lab("01-add")
    assert not again.answers and "answers.md not read" in " ".join(again.notes())
    assert again.files == ["add.cu"]  # the lab itself still grades


def test_grader_check_compares_the_file_with_the_reference(tmp_path: Path) -> None:
    from grader.authoring.rubric import lab_answers_problems

    lab = _lab(tmp_path)
    lab_dir = tmp_path / "labs" / "01-add"
    problems = [str(p) for p in lab_answers_problems(lab_dir, tmp_path)]
    assert problems == ["labs/01-add/answers.md: ids: differ from answers.toml's (same ids, same order): ['q4.ways']"]
    (lab_dir / "answers.md").write_text((lab_dir / "answers.md").read_text() + "\n## 4. Ways\n\n- q4.ways: 32\n")
    assert [str(p) for p in lab_answers_problems(lab_dir, tmp_path)] == [
        "labs/01-add/answers.md: q4.ways: holds a value ('32'): the student's file ships blank"]
    (lab_dir / "answers.md").unlink()
    assert "no answers.md beside the lab" in str(lab_answers_problems(lab_dir, tmp_path)[0])
    assert lab.name == "01-add"
