"""`batch --roster --course` and `batch merge --roster roster.csv`, with the fakes of test_batch.py:
matching by id and alias, missing and unmatched rows, the late policy in the gradebook, the class
summary and the student's report."""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from pathlib import Path

from grader.course.batch.merge import load_roster, merge
from grader.model.errors import Exit
from grader.course.late_ledger import FORMAT
from grader.report.schemas import validate_class_gradebook
from grader.model.results import Results

import pytest

from grader.model.errors import GraderError

from grader.tests.test_batch import batch, class_dir, fakes, gradebook  # noqa: F401 - fakes is a fixture

ROSTER = ("id,name,email,aliases,submitted_at\n"
          "ada.lovelace,Ada Lovelace,ada@uni.edu,ada,\n"
          "bob,Bob B,bob@uni.edu,,2025-09-27T05:00:00Z\n"
          "dan,Dan D,dan@uni.edu,,\n"
          "zed,Zed Z,zed@uni.edu,,\n")
COURSE = ('[policy]\npenalty_percent = 10\nmax_penalty_percent = 50\nlate_days = 0\n'
          '[due]\n"01" = "2025-09-26T23:59:00-04:00"\n')


def test_batch_with_roster_and_course(lab_root: Path, tmp_path: Path, fakes: dict) -> None:
    d = class_dir(tmp_path)
    (d / "eve.zip").unlink()
    late = datetime(2025, 9, 28, 12, 0, tzinfo=timezone.utc).timestamp()  # bob.zip: 1.5 days late, but
    os.utime(d / "bob.zip", (late, late))  # the roster's submitted_at (1 h late) wins
    (tmp_path / "roster.csv").write_text(ROSTER)
    (tmp_path / "course.toml").write_text(COURSE)
    code, stdout, _ = batch(lab_root, fakes, tmp_path, "1", roster=tmp_path / "roster.csv",
                            course=tmp_path / "course.toml")
    assert code is Exit.OK
    out = tmp_path / "out"
    text = (out / "gradebook.csv").read_text()
    assert validate_class_gradebook(text) == []
    book = gradebook(out)
    # ada matched by her alias and graded under her roster id; cat.tar.gz matches nobody
    assert book["ada.lovelace"]["status"] == "graded" and book["ada.lovelace"]["name"] == "Ada Lovelace"
    assert (out / "ada.lovelace" / "report.html").is_file()
    assert book["zed"]["status"] == "missing" and book["zed"]["total"] == "0" and book["zed"]["01-add"] == "0"
    bob = book["bob"]
    assert bob["01-add time source"] == "submitted_at column" and bob["01-add late days"] == "0"
    assert float(bob["01-add penalty"]) > 0
    assert float(bob["01-add"]) == round(float(bob["01-add raw"]) - float(bob["01-add penalty"]), 4)
    assert book["ada.lovelace"]["01-add time source"] == "unknown"  # a folder with an empty .git
    saved = Results.load(out / "bob" / "results.json")
    assert saved.labs[0].late is not None and saved.labs[0].late.penalty_percent == 10
    assert "Due date." in (out / "bob" / "report.html").read_text()
    assert "roster: 4 student(s), 1 missing" in stdout and "not graded: cat.tar.gz" in stdout
    summary = (out / "class-summary.html").read_text()
    assert "handed in nothing" in summary and "Late policy." in summary
    assert not list(tmp_path.glob("*.json")) and not list(tmp_path.glob("*.lock"))  # no ledger key: no ledger


def test_batch_roster_unmatched_ambiguous_and_shared(lab_root: Path, tmp_path: Path, fakes: dict) -> None:
    d = class_dir(tmp_path)
    (d / "eve.zip").unlink()
    (tmp_path / "roster.csv").write_text("id,name,email,aliases\nada,A,a,x\nbob,B,b,x\ncat,C,c,dan\n")
    with pytest.raises(GraderError, match="are all student 'cat'") as err:  # cat.tar.gz and dan/
        batch(lab_root, fakes, tmp_path, "1", roster=tmp_path / "roster.csv")
    assert err.value.code is Exit.USAGE
    (tmp_path / "roster.csv").write_text("id,name,email,aliases\nada,A,a,x\nbob,B,b,\ncyd,C,c,x;cat\n")
    code, stdout, _ = batch(lab_root, fakes, tmp_path, "1", roster=tmp_path / "roster.csv")
    assert code is Exit.OK
    book = gradebook(tmp_path / "out")
    assert set(book) == {"ada", "bob", "cyd"} and "dan" not in book  # dan matches nobody: not graded
    assert "not graded: dan: matches no student" in stdout
    summary = (tmp_path / "out" / "class-summary.html").read_text()
    assert "matched no single student" in summary and "dan" in summary


def test_merge_with_a_roster_csv(lab_root: Path, tmp_path: Path, fakes: dict) -> None:
    d = class_dir(tmp_path)
    (d / "eve.zip").unlink()
    batch(lab_root, fakes, tmp_path, "1")
    (tmp_path / "roster.csv").write_text("id,name,email,aliases\nada.l,Ada,a,ADA\nbob,B,b,\nzed,Z,z,\n"
                                         "shared1,S,s,dan\nshared2,T,t,dan\n")
    m = merge([tmp_path / "out"], tmp_path / "merged", load_roster(tmp_path / "roster.csv"))
    book = gradebook(tmp_path / "merged")
    assert book["ada.l"]["status"] == "graded" and book["zed"]["status"] == "missing"
    assert dict(m.unmatched).keys() == {"cat", "dan"} and "more than one" in dict(m.unmatched)["dan"]
    assert validate_class_gradebook((tmp_path / "merged" / "gradebook.csv").read_text()) == []


def test_batch_late_days_through_the_ledger(lab_root: Path, tmp_path: Path, fakes: dict) -> None:
    d = class_dir(tmp_path)
    (d / "eve.zip").unlink()
    (tmp_path / "roster.csv").write_text(ROSTER)  # bob: 1 h late, one late day started
    (tmp_path / "course").mkdir()
    course = tmp_path / "course" / "course.toml"
    course.write_text(COURSE.replace("late_days = 0", 'late_days = 2\nledger = "books/late-days.json"'))
    ledger = tmp_path / "course" / "books" / "late-days.json"  # relative to the course file
    ledger.parent.mkdir()
    # an earlier batch (lab 02, graded on its own) spent one of bob's two late days
    ledger.write_text(json.dumps({"format": FORMAT, "version": 1, "students": {"bob": {"02-mul": {
        "days": 1, "written": "2025-10-05T00:00:00+00:00", "batch": "/grades/02"}}}}))
    run = dict(roster=tmp_path / "roster.csv", course=course)
    for force in (False, True, False):  # graded, regraded, kept: the late day is spent once
        code, _, _ = batch(lab_root, fakes, tmp_path, "1", force=force, **run)
        assert code is Exit.OK
        bob = gradebook(tmp_path / "out")["bob"]
        assert bob["01-add late days"] == "1" and float(bob["01-add penalty"]) == 0
        students = json.loads(ledger.read_text())["students"]
        assert students["bob"]["01-add"] == {**students["bob"]["01-add"], "days": 1,
                                             "batch": str((tmp_path / "out").resolve())}
        assert students["bob"]["02-mul"]["days"] == 1
    report = (tmp_path / "out" / "bob" / "report.html").read_text()
    assert "1 late day of your course allowance covered it (0 left)" in report
    # lab 02 regraded elsewhere spends both: the kept lab 01 is reassessed, and now pays a penalty
    students["bob"]["02-mul"]["days"] = 2
    ledger.write_text(json.dumps({"format": FORMAT, "version": 1, "students": students}))
    batch(lab_root, fakes, tmp_path, "1", **run)
    bob = gradebook(tmp_path / "out")["bob"]
    assert bob["01-add late days"] == "0" and float(bob["01-add penalty"]) > 0
    assert json.loads(ledger.read_text())["students"]["bob"]["01-add"]["days"] == 0
    # a corrupt ledger stops the batch before anything is graded
    ledger.write_text("{ half a file")
    with pytest.raises(GraderError, match=r"late-days.json: not valid JSON") as err:
        batch(lab_root, fakes, tmp_path, "1", force=True, **run)
    assert err.value.code is Exit.USAGE
