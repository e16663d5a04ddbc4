"""The LMS gradebooks (grader/report/lms.py) against their documented formats (grader/report/schemas/
lms.py): Canvas's gradebook CSV (Student, ID, SIS User ID, SIS Login ID, Section, a column per lab, the
Points Possible row) and Moodle's grade import CSV (an identifier column, a column per grade item);
header, row shape, quoting, encodings; and the checkers reject what the LMS would."""

from __future__ import annotations

import csv
import io
from collections.abc import Callable
from pathlib import Path

import pytest

from grader.report import StudentOutcome, write_batch_reports
from grader.report.lms import CANVAS_FILE, MOODLE_FILE, lab_label, render_canvas_csv, render_moodle_csv
from grader.report.outcomes import LabColumn
from grader.report.sample import _reduce_lab, _run, _vector_add_lab, no_gpu_results, sample_results
from grader.report.schemas import validate_canvas_csv, validate_moodle_csv
from grader.model.results import Results


def _with(o: StudentOutcome, **fields: object) -> StudentOutcome:
    for key, value in fields.items():  # roster fields (grader/course/roster.py), where the outcome has them
        setattr(o, key, value)
    return o


def _class() -> list[StudentOutcome]:
    return [
        _with(StudentOutcome("ada", sample_results()), name="Lovelace, Ada", email="ada@example.edu"),
        _with(StudentOutcome("björn", Results(run=_run(gpu=True), labs=[_reduce_lab()])), name='Björn "B" Ø'),
        StudentOutcome("=cmd|' /C calc'!A0", Results(run=_run(gpu=True), labs=[_vector_add_lab()])),
        StudentOutcome("cy", None, error="cy.zip is not a readable zip archive"),
        StudentOutcome("dee", no_gpu_results()),
        _with(StudentOutcome("eve", None), name="Eve", email="eve@example.edu", missing=True),
    ]


def rows(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text, newline="")))


def by_first(table: list[list[str]], column: int) -> dict[str, list[str]]:
    return {r[column]: r for r in table}


# --- Canvas ---------------------------------------------------------------------------------------


def test_canvas_layout() -> None:
    text = render_canvas_csv(_class())
    assert validate_canvas_csv(text) == []
    table = rows(text)
    head, points = table[0], table[1]
    assert head[:5] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
    labs = head[5:]
    assert labs and all(name.startswith("Lab ") for name in labs)
    assert labs == sorted(labs) and len(set(labs)) == len(labs)  # one column per lab, in lab order
    assert points[0] == "Points Possible" and points[1:5] == ["", "", "", ""]
    assert all(float(p) > 0 for p in points[5:])
    assert len(table) == 2 + 6 and all(len(r) == len(head) for r in table)
    students = by_first(table[2:], 2)  # SIS User ID: the student id without a roster's own
    ada = students["ada"]
    assert ada[0] == "Lovelace, Ada" and ada[3] == "ada@example.edu" and ada[1] == ""
    assert students["björn"][0] == 'Björn "B" Ø'
    assert students["cy"][5:] == [""] * len(labs)  # broken: no grade, never a zero
    assert students["dee"][5:] == [""] * len(labs)  # not graded without a GPU: no grade either
    assert students["eve"][5:] == ["0"] * len(labs)  # missing: the roster says 0
    assert students["cy"][0] == "cy"  # no roster name: the id, so Canvas can show whom it could not match


def test_canvas_scores_are_the_labs_scores() -> None:
    results = sample_results()
    table = rows(render_canvas_csv([StudentOutcome("ada", results)]))
    head, row = table[0], table[2]
    for lab in results.labs:
        label = next(h for h in head if h.startswith(f"Lab {lab.number:02d}"))
        assert float(row[head.index(label)]) == pytest.approx(lab.score, abs=1e-4)
        assert float(table[1][head.index(label)]) == pytest.approx(lab.max_score)


def test_canvas_quoting_and_encoding(tmp_path: Path) -> None:
    paths = write_batch_reports(_class(), tmp_path)
    data = paths["canvas"].read_bytes()
    assert paths["canvas"] == tmp_path / CANVAS_FILE and paths["moodle"] == tmp_path / MOODLE_FILE
    assert not data.startswith(b"\xef\xbb\xbf")
    text = data.decode("utf-8")  # strict: every byte is UTF-8
    assert "\r\n" in text and "\n" not in text.replace("\r\n", "")  # CRLF rows, no bare LF
    assert '"Lovelace, Ada"' in text and '"Björn ""B"" Ø"' in text  # RFC 4180 quoting
    assert "'=cmd" in text and validate_canvas_csv(data) == []  # a formula stays text
    assert paths["csv"].is_file() and paths["html"].is_file()  # beside gradebook.csv and the summary


def test_canvas_assignment_ids_and_labels() -> None:
    col = LabColumn(3, "03-vector-add", "Vector add: the whole host flow", 100.0)
    assert lab_label(col) == "Lab 03: Vector add: the whole host flow"
    assert lab_label(col, {"03-vector-add": 1234}) == "Lab 03: Vector add: the whole host flow (1234)"
    odd = LabColumn(7, "07-x", "Scan (2024)", 100.0)
    assert lab_label(odd) == "Lab 07: Scan [2024]"  # never read as a Canvas assignment id
    text = render_canvas_csv([StudentOutcome("ada", sample_results())], {"03-vector-add": "88"})
    assert any(h.endswith("(88)") for h in rows(text)[0]) and validate_canvas_csv(text) == []


# --- Moodle ---------------------------------------------------------------------------------------


def test_moodle_layout() -> None:
    text = render_moodle_csv(_class())
    assert validate_moodle_csv(text) == []
    table = rows(text)
    head = table[0]
    assert head[:3] == ["ID number", "Email address", "Full name"]
    labs = head[3:]
    assert labs == rows(render_canvas_csv(_class()))[0][5:]  # the same grade items as Canvas
    assert len(table) == 1 + 6 and all(len(r) == len(head) for r in table)  # no points row in Moodle's
    students = by_first(table[1:], 0)
    assert students["ada"][1:3] == ["ada@example.edu", "Lovelace, Ada"]
    assert students["cy"][1:] == ["", ""] + [""] * len(labs)
    assert students["eve"][3:] == ["0"] * len(labs)
    assert all(v == "" or float(v) >= 0 for r in table[1:] for v in r[3:])


def test_moodle_encoding(tmp_path: Path) -> None:
    data = write_batch_reports(_class(), tmp_path)["moodle"].read_bytes()
    assert not data.startswith(b"\xef\xbb\xbf") and data.endswith(b"\r\n")
    assert "Björn" in data.decode("utf-8") and validate_moodle_csv(data) == []


def test_an_empty_or_broken_class_still_writes_valid_files() -> None:
    broken = [StudentOutcome("cy", None, error="x")]
    # no lab graded at all: the header has no lab column, which the checkers call out
    assert any("no assignment column" in e for e in validate_canvas_csv(render_canvas_csv(broken)))
    assert any("no assignment column" in e for e in validate_moodle_csv(render_moodle_csv(broken)))
    mixed = [*broken, StudentOutcome("ada", sample_results())]
    assert validate_canvas_csv(render_canvas_csv(mixed)) == []
    assert validate_moodle_csv(render_moodle_csv(mixed)) == []


# --- the checkers reject what the LMS rejects -----------------------------------------------------

GOOD_CANVAS = (
    "Student,ID,SIS User ID,SIS Login ID,Section,Lab 01: Add,Lab 02: Mul (77)\r\n"
    "Points Possible,,,,,100,100\r\n"
    '"Lovelace, Ada",,ada,ada@example.edu,,92.5,100\r\n'
    "bob,,bob,,,,\r\n"
)
GOOD_MOODLE = (
    "ID number,Email address,Full name,Lab 01: Add,Lab 02: Mul\r\n"
    '"ada",ada@example.edu,"Lovelace, Ada",92.5,100\r\n'
    "bob,,,,\r\n"
)


@pytest.mark.parametrize(
    ("patch", "problem"),
    [
        (lambda t: t.replace("Student,ID", "Name,ID"), "header"),
        (lambda t: t.replace("Points Possible,,,,,100,100\r\n", ""), "Points Possible row"),
        (lambda t: t.replace("Points Possible,,,", "Points Possible,x,,"), "identity cells"),
        (lambda t: t.replace(",,,,,100,100", ",,,,,hundred,100"), "points possible 'hundred'"),
        (lambda t: t.replace(",92.5,", ",A+,"), "not a number"),
        (lambda t: t.replace("bob,,bob,,,,", ",,,,,,"), "no Student, ID or SIS User ID"),
        (lambda t: t.replace("bob,,bob,,,,", "bob,,bob,,,"), "cells, the header has"),
        (lambda t: t.replace("Lab 02: Mul (77)", "Lab 01: Add"), "duplicate"),
        (lambda t: t.replace("Lab 02: Mul (77)", "Total"), "is not 'Lab NN"),
        (lambda t: t.replace("\r\n", "\n"), "CRLF"),
        (lambda t: "\ufeff" + t, "byte order mark"),
        (lambda t: t.replace("bob,,bob", "@bob,,bob"), "starts like a formula"),
        (lambda t: t.replace('"Lovelace, Ada"', '"Lovelace, Ada'), "RFC 4180"),
        (lambda t: t.encode("utf-8").replace(b"Lovelace", b"Lovel\xe6ce"), "not UTF-8"),
    ],
)
def test_canvas_checker_rejects(patch: Callable[[str], str | bytes], problem: str) -> None:
    assert validate_canvas_csv(GOOD_CANVAS) == []
    errors = validate_canvas_csv(patch(GOOD_CANVAS))
    assert errors and any(problem in e for e in errors), errors


@pytest.mark.parametrize(
    ("patch", "problem"),
    [
        (lambda t: t.replace("ID number,", "Student,"), "header"),
        (lambda t: t.replace("bob,,,,", ",,,,"), "no ID number or email"),
        (lambda t: t.replace("ada@example.edu", "ada.example.edu"), "has no @"),
        (lambda t: t.replace(",92.5,", ",-3,"), "starts like a formula"),
        (lambda t: t.replace(",92.5,", ",9 2,"), "not a number"),
        (lambda t: t.replace("bob,,,,", "bob,,,"), "cells, the header has"),
        (lambda t: t.replace("\r\n", "\n"), "CRLF"),
        (lambda t: "\ufeff" + t, "byte order mark"),
    ],
)
def test_moodle_checker_rejects(patch: Callable[[str], str | bytes], problem: str) -> None:
    assert validate_moodle_csv(GOOD_MOODLE) == []
    errors = validate_moodle_csv(patch(GOOD_MOODLE))
    assert errors and any(problem in e for e in errors), errors
