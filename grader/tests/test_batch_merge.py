"""`grader batch merge`: one class summary and gradebook from many batches' folders; a student whose
results are missing or corrupt gets a broken row with the reason, never a hole."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from grader.course.batch.merge import merge, read_attempt, read_roster
from grader.course.batch.students import LOG_FILE, STATE_FILE, write_state
from grader.cli.args import main
from grader.report import write_reports
from grader.report.sample import sample_results


def finished(out: Path, student: str, when: float = 100.0, compile_only: bool = False) -> Path:
    """What `batch` leaves for a finished grade: the reports, then .batch.json."""
    folder = out / student
    write_reports(sample_results(), folder)
    (folder / LOG_FILE).write_text("grading ...\n")
    write_state(folder, {"student": student, "compile_only": compile_only, "seconds": 12.5, "note": "",
                         "finished_unix": when})
    return folder


def rows(path: Path) -> dict[str, dict[str, str]]:
    with open(path, newline="") as f:
        return {r["student"]: r for r in csv.DictReader(f)}


def test_merges_tasks_into_one_gradebook(tmp_path: Path) -> None:
    t0, t1 = tmp_path / "tasks" / "0", tmp_path / "tasks" / "1"
    finished(t0, "ada")
    finished(t1, "bob")
    m = merge([t0, t1], tmp_path)
    book = rows(m.paths["csv"])
    assert set(book) == {"ada", "bob"}
    assert book["ada"]["status"] == "graded" and book["ada"]["total"]
    assert m.broken == [] and m.missing == []
    assert (tmp_path / "class-summary.html").is_file()
    assert 'href="tasks/0/ada/report.html"' in (tmp_path / "class-summary.html").read_text()


def test_missing_and_corrupt_results_are_broken_rows(tmp_path: Path) -> None:
    out = tmp_path / "t"
    finished(out, "ada")
    corrupt = finished(out, "bob")
    (corrupt / "results.json").write_text("{not json")
    killed = out / "cyd"  # the batch was killed during the grade: a log, no state
    killed.mkdir()
    (killed / LOG_FILE).write_text("2026-01-01 grading subs/cyd (slot 0)\n")
    interrupted = out / "dan"
    interrupted.mkdir()
    (interrupted / LOG_FILE).write_text("x grading\nx interrupted: nothing of this grade is kept\n")
    unreadable = out / "eve"
    unreadable.mkdir()
    (unreadable / LOG_FILE).write_text("x subs/eve.zip: error: eve.zip is not a readable zip archive\n")
    bad_state = finished(out, "fay")
    (bad_state / STATE_FILE).write_text("[]")
    roster = tmp_path / "roster.txt"
    roster.write_text("# the class\nada\nbob\ncyd\ndan\neve\nfay\ngus\n\n")
    m = merge([out], tmp_path / "merged", read_roster(roster))
    book = rows(m.paths["csv"])
    assert list(book) == ["ada", "bob", "cyd", "dan", "eve", "fay", "gus"]  # every student a row
    assert book["ada"]["status"] == "graded"
    for s in ("bob", "cyd", "dan", "eve", "fay", "gus"):
        assert book[s]["status"] == "broken" and book[s]["total"] == ""
    assert "results.json is corrupt" in book["bob"]["notes"]
    assert "did not finish" in book["cyd"]["notes"]
    assert "interrupted" in book["dan"]["notes"]
    assert "not a readable zip archive" in book["eve"]["notes"]
    assert ".batch.json is corrupt" in book["fay"]["notes"]
    assert "no batch graded this student" in book["gus"]["notes"]
    assert m.missing == ["gus"]


def test_a_finished_grade_wins_over_a_later_failed_attempt_and_the_newest_wins(tmp_path: Path) -> None:
    a, b, c = (tmp_path / n for n in ("a", "b", "c"))
    finished(a, "ada", when=100.0)
    (b / "ada").mkdir(parents=True)
    (b / "ada" / LOG_FILE).write_text("x interrupted: ...\n")
    finished(c, "bob", when=100.0)
    finished(a, "bob", when=200.0, compile_only=True)
    m = merge([a, b, c], tmp_path / "m")
    by = {o.student: o for o in m.outcomes}
    assert by["ada"].results is not None and by["ada"].report_dir == "../a/ada"
    assert by["bob"].compile_only and by["bob"].report_dir == "../a/bob"


def test_reason_from_the_batch_gradebook(tmp_path: Path) -> None:
    out = tmp_path / "t"
    (out / "bob").mkdir(parents=True)
    (out / "bob" / LOG_FILE).write_text("nothing useful\n")
    (out / "gradebook.csv").write_text("student,total,max_total,status,notes\nbob,,,broken,the archive is unsafe\n")
    assert read_attempt(out / "bob", {"bob": "the archive is unsafe"}).error == "the archive is unsafe"
    assert rows(merge([out], tmp_path / "m").paths["csv"])["bob"]["notes"] == "the archive is unsafe"


def test_roster_from_a_submissions_folder(tmp_path: Path) -> None:
    subs = tmp_path / "subs"
    (subs / "ada").mkdir(parents=True)
    (subs / "bob.zip").write_bytes(b"")
    (subs / "notes.txt").write_text("")
    assert read_roster(subs) == ["ada", "bob"]


def test_cli_batch_merge(tmp_path: Path, capsys) -> None:
    t0 = tmp_path / "tasks" / "0"
    finished(t0, "ada")
    (tmp_path / "roster.txt").write_text("ada\nbob\n")
    code = main(["batch", "merge", str(t0), "--out", str(tmp_path), "--roster", str(tmp_path / "roster.txt")])
    out = capsys.readouterr().out
    assert code == 1  # a broken row
    assert "2 student(s), 1 with results, 1 broken (1 never graded)" in out and "broken: bob" in out
    assert rows(tmp_path / "gradebook.csv")["bob"]["status"] == "broken"
    assert "LMS gradebooks: " in out and (tmp_path / "gradebook-canvas.csv").is_file()  # named, and written
    assert main(["batch", "merge", str(t0), "--out", str(tmp_path / "x")]) == 0


def test_cli_batch_merge_of_a_missing_folder_is_usage(tmp_path: Path, capsys) -> None:
    assert main(["batch", "merge", str(tmp_path / "nope"), "--out", str(tmp_path)]) == 2
    assert "no such directory" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["--root", "/x", "batch", "merge", "a"], ["batch", "merge", "a"]])
def test_batch_merge_alias(argv: list[str]) -> None:
    from grader.cli.args import _verb_alias

    alias = _verb_alias(argv)
    assert "batch-merge" in alias and "merge" not in alias[alias.index("batch-merge") + 1 :][:0]
    assert json.dumps(_verb_alias(["batch", "subs", "--out", "o"])) == json.dumps(["batch", "subs", "--out", "o"])


def test_a_roster_csv_with_expected_ids_and_unmatched_submissions(tmp_path: Path) -> None:
    """Slurm's merge: roster.csv, the ids sharded (--expect) and the submissions matched to nobody."""
    t0 = tmp_path / "tasks" / "0"
    finished(t0, "ada")
    (tmp_path / "roster.csv").write_text("id,name,email\nada,Ada,a@u\nbob,Bob,b@u\ncyd,Cyd,c@u\n")
    (tmp_path / "roster.txt").write_text("ada\nbob\n")  # bob's task died before his grade began
    (tmp_path / "unmatched.tsv").write_text("# submission\twhy\nzoe.zip\tmatches no student of the roster\n")
    code = main(["batch", "merge", str(t0), "--out", str(tmp_path / "m"), "--roster", str(tmp_path / "roster.csv"),
                 "--expect", str(tmp_path / "roster.txt"), "--unmatched", str(tmp_path / "unmatched.tsv")])
    assert code == 1
    book = rows(tmp_path / "m" / "gradebook.csv")
    assert [book[s]["status"] for s in ("ada", "bob", "cyd")] == ["graded", "broken", "missing"]
    assert "no batch graded this student" in book["bob"]["notes"] and book["cyd"]["total"] == "0"
    assert "zoe.zip" in (tmp_path / "m" / "class-summary.html").read_text()
