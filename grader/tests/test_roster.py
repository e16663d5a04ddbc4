"""grader/course/roster.py: the roster CSV, its validation, and matching submissions by id and alias."""

from __future__ import annotations

from pathlib import Path

import pytest

from grader.model.errors import Exit
from grader.course.roster import RosterError, match, read_roster_csv

ROSTER = (
    "Student ID,Name,Email,Aliases,alias\n"
    "ada,Ada Lovelace,ada@uni.edu,ada-gh;AdaL.zip,\n"
    "bob,Bob B,bob@uni.edu,,bobby\n"
    "cyd,Cyd C,cyd@uni.edu,shared,\n"
    "dan,Dan D,dan@uni.edu,shared,\n"
)


def roster(tmp_path: Path, text: str = ROSTER):
    (tmp_path / "roster.csv").write_text(text, encoding="utf-8")
    return read_roster_csv(tmp_path / "roster.csv")


def test_reads_ids_names_and_aliases(tmp_path: Path) -> None:
    r = roster(tmp_path, "\ufeff" + ROSTER)
    assert [s.id for s in r.students] == ["ada", "bob", "cyd", "dan"]
    assert r.students[0].aliases == ("ada-gh", "AdaL.zip") and r.students[1].aliases == ("bobby",)
    assert r.students[0].name == "Ada Lovelace" and r.students[0].email == "ada@uni.edu"


def test_matching_by_id_alias_missing_unmatched_ambiguous(tmp_path: Path) -> None:
    m = match(roster(tmp_path), ["ADA-GH", "adal", "Bobby", "eve", "shared"])
    assert m.matched == {"ADA-GH": "ada", "adal": "ada", "Bobby": "bob"}
    assert m.shared() == {"ada": ["ADA-GH", "adal"]}  # two submissions for one student
    assert [s.id for s in m.missing] == ["cyd", "dan"]
    assert m.unmatched == ["eve"] and m.ambiguous == {"shared": ["cyd", "dan"]}
    problems = dict(m.problems())
    assert "matches no student" in problems["eve"] and "not graded" in problems["eve"]
    assert "cyd, dan" in problems["shared"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("name,email\nAda,a@x\n", "no student id column"),
        ("id,student_id,name,email\n", "more than one student id column"),
        ("id,email\nada,a@x\n", "no 'name' column"),
        ("id,name,email\n,Ada,a@x\n", ":2: id: empty"),
        ("id,name,email\nada,A,a\nADA,B,b\n", "already the id of line 2"),
        ("id,name,email\n../x,A,a\n", "cannot name a report folder"),
        ("id,name,email,submitted_at\nada,A,a,2025-09-26T23:59:00\n", "has no timezone"),
        ("id,name,email,submitted_at\nada,A,a,yesterday\n", "not an ISO 8601"),
        ("id,name,email\n", "no students"),
        ("", "empty"),
    ],
)
def test_header_and_cell_errors_are_usage_errors(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(RosterError, match=message) as err:
        roster(tmp_path, text)
    assert err.value.code is Exit.USAGE and "roster.csv" in str(err.value)


def test_submitted_at_columns(tmp_path: Path) -> None:
    r = roster(tmp_path, "id,name,email,submitted_at,submitted_at:01\nada,A,a,2025-09-26T23:59:00Z,\n"
                         "bob,B,b,,2025-09-27T10:00:00+02:00\n")
    assert r.students[0].submitted_at[0][0] == "" and r.students[1].submitted_at[0][0] == "01"
