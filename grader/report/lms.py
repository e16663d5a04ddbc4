"""The class gradebook for an LMS: a Canvas-importable CSV and a Moodle-importable CSV, one column per lab.

`grader batch` and `grader batch merge` write both beside gradebook.csv (write_batch_reports,
grader/report/batch.py): gradebook-canvas.csv and gradebook-moodle.csv. Both are UTF-8 without a byte
order mark, comma-separated, CRLF line ends, quoted where a cell needs it (RFC 4180, Python's csv
module), and no text cell starts like a spreadsheet formula (gradebook._cell).

Canvas (Grades > Import): the layout of Canvas's own gradebook export (Grades > Export), which its
importer reads back. Header: `Student, ID, SIS User ID, SIS Login ID, Section`, then one column per
assignment; the second row is the "Points Possible" row, as in Canvas's export (its first cell says
so, the identity cells are empty, each assignment cell holds the lab's points). A row needs one of
Student (the name), ID (Canvas's user id) or SIS User ID, then SIS Login ID and Section; each further
column is an assignment, and a column Canvas does not know becomes a new assignment; an assignment
column whose name ends in the Canvas assignment id in parentheses ("Lab 03: Vector add (1234)") is that
assignment. Sources, found with the docs search: Ohio State's "Import CSV File for Carmen Grades"
(https://teaching.resources.osu.edu/toolsets/carmencanvas/guides/calculating-final-grades/import-csv-file-carmen-grades:
"Student Name (last name, first name) OR Student ID OR Student SIS User ID ... SIS Login ID ...
Section ... Assignment Name"; "New assignment columns in the Gradebook generate new assignments") and
VCU's "Gradebook Action Menu" (https://ts.vcu.edu/askit/teaching-and-learning/canvas/faculty/grading-faculty/gradebook-action-menu-faculty/:
the export's read-only columns are ignored on re-upload), both summarizing Canvas's instructor guides
"How do I export grades in the Gradebook?" and "How do I import grades in the Gradebook?".

Moodle (Grades > Import > CSV file): Moodle's grade import reads a CSV with a header row; at the
preview you pick which column identifies the user ("Map from") and which user field it is ("Map to":
useridnumber, useremail, username or userid), and map each other column to a grade item or to a new
one. Columns: `ID number, Email address, Full name`, then one per lab. MoodleDocs "Grade import"
(https://docs.moodle.org/311/en/Grade_import, https://docs.moodle.org/27/en/Grade_import): "The
import file format is the same as the corresponding export format"; "Change both dropdowns to: 'Email
Address' to 'useremail', or to 'Id Number' to 'useridnumber'"; the import form's Encoding ("The
standard encoding is UTF-8") and Separator ("Normally this is a comma") are Totara's (a Moodle fork)
"Import grades" page's words (https://help.totaralearning.com/display/TH13/Import+grades).

Who a row is: the batch's student id, and, when a roster gave them (another part of the batch adds
one), the student's name, email, SIS/login ids and section, read from the outcome if it has them and
left empty otherwise (identity()). What a lab cell holds: the lab's score for a graded row (the final,
late-policy score where the outcome carries one), 0 for a `missing` row (a roster student who handed in
nothing), and empty where there is no grade (broken, not graded without a GPU, a compile check):
empty is no grade, never a zero.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grader.report._format import clean_text
from grader.report.gradebook import _cell, _num
from grader.report.outcomes import LabColumn, StudentOutcome, batch_labs, by_name, roster_order
from grader.report.standing import GRADED

CANVAS_FILE = "gradebook-canvas.csv"
MOODLE_FILE = "gradebook-moodle.csv"
CANVAS_HEAD = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")
CANVAS_POINTS = "Points Possible"  # the first cell of Canvas's second row
MOODLE_HEAD = ("ID number", "Email address", "Full name")
MISSING = "missing"  # a roster student without a submission (score 0)
LINE_END = "\r\n"  # RFC 4180; both importers read it (and LF)


@dataclass(frozen=True)
class Identity:
    """Who a gradebook row is, as far as the batch knows: the student id always, the rest when a roster
    said so."""

    student: str  # the batch's student id (a roster id, or the submission's name)
    name: str = ""
    email: str = ""
    sis_user_id: str = ""
    login: str = ""
    section: str = ""
    canvas_id: str = ""


def _field(o: object, *names: str) -> str:
    """The first non-empty of these attributes (or keys) of the outcome, or of a roster record it
    carries (attribute `roster`, `person` or `info`, an object or a mapping)."""
    sources: list[Any] = [o]
    for holder in ("roster", "person", "info", "identity"):
        extra = getattr(o, holder, None)
        if extra is not None:
            sources.append(extra)
    for source in sources:
        for name in names:
            value = source.get(name) if isinstance(source, Mapping) else getattr(source, name, None)
            if isinstance(value, (str, int)) and not isinstance(value, bool) and str(value).strip():
                return clean_text(value).strip()
    return ""


def identity(o: StudentOutcome) -> Identity:
    return Identity(
        student=clean_text(o.student),
        name=_field(o, "name", "full_name", "display_name"),
        email=_field(o, "email", "mail"),
        sis_user_id=_field(o, "sis_user_id", "sis_id", "idnumber", "id_number"),
        login=_field(o, "sis_login_id", "login", "username"),
        section=_field(o, "section"),
        canvas_id=_field(o, "canvas_id", "canvas_user_id"),
    )


def lab_label(col: LabColumn, assignment_ids: Mapping[str, str | int] | None = None) -> str:
    """'Lab 03: Vector add: the whole host flow', with ' (1234)' when the LMS's assignment id is known.
    A title that already ends like '(123)' gets brackets instead, so Canvas does not read it as an id."""
    title = " ".join(clean_text(col.title).split())
    label = f"Lab {col.number:02d}: {title}" if title else f"Lab {col.number:02d}"
    if label.endswith(")") and "(" in label and label.rsplit("(", 1)[1][:-1].strip().isdigit():
        head, _, tail = label.rpartition("(")
        label = f"{head}[{tail[:-1]}]"
    known = (assignment_ids or {}).get(col.name)
    return f"{label} ({known})" if known not in (None, "") else label


def final_score(o: StudentOutcome, lab: str) -> float | None:
    """A lab's score for the LMS: the late policy's final score where the outcome carries one (a
    mapping lab -> score under `final_scores`), else the graded score; None when the row has none."""
    finals = getattr(o, "final_scores", None)
    if isinstance(finals, Mapping) and isinstance(finals.get(lab), (int, float)):
        return float(finals[lab])
    result = by_name(o.results).get(lab)
    return result.score if result is not None else None


def lab_cells(o: StudentOutcome, labs: list[LabColumn]) -> list[str]:
    """One cell per lab: a number, 0 for a missing submission, or empty (no grade)."""
    status = o.status
    if status == MISSING:
        return ["0"] * len(labs)
    if status != GRADED or o.results is None:
        return [""] * len(labs)
    cells = []
    for col in labs:
        score = final_score(o, col.name)
        cells.append("" if score is None else _num(round(score, 4)))
    return cells


def _csv(rows: list[list[str]]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator=LINE_END, quoting=csv.QUOTE_MINIMAL)
    writer.writerows(rows)
    return out.getvalue()


def render_canvas_csv(
    outcomes: list[StudentOutcome], assignment_ids: Mapping[str, str | int] | None = None
) -> str:
    """Canvas's gradebook CSV: identity columns, one column per lab, the Points Possible row second.
    Student is the name where a roster gave one, else the student id; SIS User ID the roster's SIS
    id, else the student id (what Canvas can match on); SIS Login ID the login, else the email."""
    labs = batch_labs(outcomes)
    rows = [
        [*CANVAS_HEAD, *(_cell(lab_label(c, assignment_ids)) for c in labs)],
        [CANVAS_POINTS, "", "", "", "", *(_num(round(c.max_score, 4)) for c in labs)],
    ]
    for o in roster_order(outcomes):
        who = identity(o)
        rows.append(
            [
                _cell(who.name or who.student),
                _cell(who.canvas_id),
                _cell(who.sis_user_id or who.student),
                _cell(who.login or who.email),
                _cell(who.section),
                *lab_cells(o, labs),
            ]
        )
    return _csv(rows)


def render_moodle_csv(outcomes: list[StudentOutcome]) -> str:
    """Moodle's grade import CSV: ID number (the roster's id number, else the student id), Email
    address (empty without a roster), Full name, then one column per lab."""
    labs = batch_labs(outcomes)
    rows = [[*MOODLE_HEAD, *(_cell(lab_label(c)) for c in labs)]]
    for o in roster_order(outcomes):
        who = identity(o)
        rows.append(
            [_cell(who.sis_user_id or who.student), _cell(who.email), _cell(who.name), *lab_cells(o, labs)]
        )
    return _csv(rows)


def write_lms_exports(outcomes: list[StudentOutcome], out_dir: Path) -> dict[str, Path]:
    """Write gradebook-canvas.csv and gradebook-moodle.csv into out_dir; returns {"canvas", "moodle"}."""
    out_dir = Path(out_dir)
    paths = {"canvas": out_dir / CANVAS_FILE, "moodle": out_dir / MOODLE_FILE}
    for key, text in (("canvas", render_canvas_csv(outcomes)), ("moodle", render_moodle_csv(outcomes))):
        tmp = paths[key].with_name(paths[key].name + ".tmp")
        with open(tmp, "w", encoding="utf-8", newline="") as f:  # newline="": the CRLF stays CRLF
            f.write(text)
        tmp.replace(paths[key])
    return paths


__all__ = [
    "CANVAS_FILE",
    "CANVAS_HEAD",
    "CANVAS_POINTS",
    "MOODLE_FILE",
    "MOODLE_HEAD",
    "Identity",
    "identity",
    "lab_cells",
    "lab_label",
    "render_canvas_csv",
    "render_moodle_csv",
    "write_lms_exports",
]
