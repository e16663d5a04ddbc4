"""grader/course/policy.py: the course file, each late policy rule, the time sources, and hidden tests shown
after the course's due date."""

from __future__ import annotations

import json
import os
import subprocess
import zipfile
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from grader.course.policy import (
    CourseError,
    SubmittedAt,
    apply_course,
    git_commit_time,
    load_course,
    submission_time,
    submission_times,
)
from grader.model.errors import Exit
from grader.report.late import explain
from grader.model.hidden import redact
from grader.course.late_ledger import Ledger, LedgerError
from grader.model.labs import discover
from grader.model.results import LabResult, Results, RunInfo, Status
from grader.model import results as model

from grader.tests.conftest import write_lab

DUE = datetime(2025, 9, 26, 23, 59, tzinfo=timezone(timedelta(hours=-4)))


def course(lab_root: Path, policy: str = "", extra: str = "", due: str = '"01" = "2025-09-26T23:59:00-04:00"'):
    (lab_root / "course.toml").write_text(f"[policy]\n{policy}\n[due]\n{due}\n{extra}")
    return load_course(lab_root / "course.toml", discover(lab_root))


def results(score: float = 80.0) -> Results:
    lab = LabResult(1, "01-add", "Add", 100.0, score=score)
    return Results(RunInfo(started="2025-09-27T00:00:00+00:00"), [lab])


def late_by(hours: float) -> dict[str, SubmittedAt]:
    return {"": SubmittedAt(DUE + timedelta(hours=hours), "archive mtime")}


def assess(c, hours: float, score: float = 80.0, student: str = "ada") -> Results:
    r = results(score)
    apply_course(c, student, r, late_by(hours))
    return r


def test_on_time_and_grace(lab_root: Path) -> None:
    c = course(lab_root, "grace_minutes = 30\npenalty_percent = 10")
    r = assess(c, -1)
    assert r.labs[0].score == 80 and r.labs[0].late.penalty == 0 and r.labs[0].late.source == "archive mtime"
    r = assess(c, 0.4)  # 24 minutes: within the grace period
    assert r.labs[0].score == 80 and r.labs[0].late.late_seconds == 0
    assert "grace period" in explain(r.labs[0].late, 100)
    r = assess(c, 0.6)  # past the grace period: late from the due date, one day started
    assert r.labs[0].late.penalty == 8 and r.labs[0].score == 72


def test_per_day_per_hour_and_cap(lab_root: Path) -> None:
    c = course(lab_root, "penalty_percent = 10\nmax_penalty_percent = 25")
    assert assess(c, 25).labs[0].late.penalty_percent == 20  # 2 days started
    assert assess(c, 24 * 5).labs[0].late.penalty_percent == 25  # capped
    c = course(lab_root, 'penalty_per = "hour"\npenalty_percent = 2')
    r = assess(c, 2.5)
    assert r.labs[0].late.charged == 3 and r.labs[0].late.penalty_percent == 6 and r.labs[0].score == 75.2
    text = explain(r.labs[0].late, 100)
    assert "3 hours cost 2 % each" in text and "75.2 / 100" in text


def test_assessing_again_is_idempotent(lab_root: Path) -> None:
    c = course(lab_root, "penalty_percent = 10")
    r = assess(c, 25)
    assert not apply_course(c, "ada", r, late_by(25)) and r.labs[0].score == 64
    assert apply_course(c, "ada", r, late_by(-1)) and r.labs[0].score == 80  # the raw score is kept


def test_late_days_across_labs_in_lab_order(lab_root: Path) -> None:
    write_lab(lab_root, "02-mul")
    c = course(lab_root, "penalty_percent = 10\nlate_days = 2",
               due='"01" = "2025-09-26T23:59:00-04:00"\n"02" = "2025-10-03T23:59:00-04:00"')
    r = results()
    r.labs.insert(0, LabResult(2, "02-mul", "Mul", 100.0, score=50.0))  # out of order on purpose
    times = {"01-add": SubmittedAt(DUE + timedelta(hours=30), "git commit"),
             "02-mul": SubmittedAt(datetime(2025, 10, 5, 4, 0, tzinfo=timezone.utc), "git commit")}
    apply_course(c, "ada", r, times)
    first, second = r.labs[1].late, r.labs[0].late
    assert (first.late_days_used, first.penalty, first.late_days_left) == (2, 0, 0)  # lab 01 spends both
    assert (second.late_days_used, second.charged, second.penalty) == (0, 2, 10)
    assert "2 late days of your course allowance" in explain(first, 100)


def test_extensions_per_lab_and_all_labs(lab_root: Path) -> None:
    c = course(lab_root, "penalty_percent = 10", extra=(
        '[[extension]]\nstudent = "Ada"\nlab = "01"\ndays = 2\n'
        '[[extension]]\nstudent = "bob"\nuntil = "2025-09-30T00:00:00Z"\n'))
    assert assess(c, 40, student="ada").labs[0].late.penalty == 0
    assert assess(c, 60, student="ada").labs[0].late.penalty == 8
    r = assess(c, 60, student="bob")
    assert r.labs[0].late.penalty == 0 and "extension until" in r.labs[0].late.extension
    assert assess(c, 2, student="cyd").labs[0].late.penalty == 8


def test_no_due_date_and_unknown_time(lab_root: Path) -> None:
    c = course(lab_root, "penalty_percent = 10", due="")
    r = assess(c, 100)
    assert r.labs[0].late.due == "" and r.labs[0].score == 80 and "no due date" in explain(r.labs[0].late, 100)
    c = course(lab_root, "penalty_percent = 10")
    r = results()
    apply_course(c, "ada", r, {"": SubmittedAt(None, "")})
    assert r.labs[0].score == 80 and "No trustworthy submission time" in explain(r.labs[0].late, 100)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[policy]\npenalty_per = "week"\n', "policy.penalty_per"),
        ("[policy]\npenalty_percent = 120\n", "policy.penalty_percent"),
        ("[policy]\nlate_days = 1.5\n", "policy.late_days: expected a whole number"),
        ("[policy]\ngrace = 3\n", "policy.grace: unknown key"),
        ('[due]\n"01" = "2025-09-26T23:59:00"\n', "due.01: .*no timezone"),
        ('[due]\n"99" = "2025-09-26T23:59:00Z"\n', "due.99"),
        ('[due]\n"01" = "soon"\n', "not an ISO 8601"),
        ('[[extension]]\nstudent = "ada"\n', r"extension\[0\]: give exactly one"),
        ('[[extension]]\nstudent = "ada"\ndays = -1\n', r"extension\[0\].days"),
        ("[policy\n", "not valid TOML"),
    ],
)
def test_course_errors_name_file_and_key(lab_root: Path, text: str, message: str) -> None:
    (lab_root / "course.toml").write_text(text)
    with pytest.raises(CourseError, match=message) as err:
        load_course(lab_root / "course.toml", discover(lab_root))
    assert err.value.code is Exit.USAGE and "course.toml" in str(err.value)


# --- time sources --------------------------------------------------------------------------------------


def git(repo: Path, *args: str, date: str = "2025-09-27T10:00:00+02:00") -> None:
    env = {**os.environ, "GIT_COMMITTER_DATE": date, "GIT_AUTHOR_DATE": "2020-01-01T00:00:00Z",
           "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null"}
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@x", *args], cwd=repo, env=env, check=True,
                   capture_output=True)


@pytest.mark.skipif(subprocess.run(["which", "git"], capture_output=True).returncode != 0, reason="no git")
def test_git_checkout_time_is_the_committer_date_and_runs_nothing(tmp_path: Path) -> None:
    repo = tmp_path / "ada"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "add.cu").write_text("x")
    git(repo, "add", "add.cu")
    git(repo, "commit", "-q", "-m", "lab 01")
    # The submission's own config and hooks must not run (a pager, a signature program, a hook).
    marker = tmp_path / "ran"
    (repo / ".git" / "config").write_text((repo / ".git" / "config").read_text()
                                          + f"[core]\n\tpager = touch {marker}\n[log]\n\tshowSignature = true\n"
                                          f"[gpg]\n\tprogram = touch {marker}\n")
    when = git_commit_time(repo)
    assert when == datetime(2025, 9, 27, 10, 0, tzinfo=timezone(timedelta(hours=2)))
    assert not marker.exists()
    assert submission_time(repo) == SubmittedAt(when, "git commit")
    (repo / "submitted_at.txt").write_text("2000-01-01T00:00:00Z")  # a file inside counts for nothing
    assert submission_time(repo).when == when
    assert submission_time(tmp_path).when is None  # a plain folder: unknown


def test_archive_mtime_and_the_roster_column_wins(tmp_path: Path) -> None:
    archive = tmp_path / "ada.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("add.cu", "x")
    stamp = datetime(2025, 9, 27, 3, 4, 5, tzinfo=timezone.utc).timestamp()
    os.utime(archive, (stamp, stamp))
    assert submission_time(archive) == SubmittedAt(datetime.fromtimestamp(stamp, timezone.utc), "archive mtime")
    given = {"": DUE}
    times = submission_times(archive, given)
    assert times[""] == SubmittedAt(DUE, "submitted_at column")
    times = submission_times(archive, {"01-add": DUE})
    assert times["01-add"].source == "submitted_at column" and times[""].source == "archive mtime"


# --- hidden tests after the due date -------------------------------------------------------------------


def test_after_due_date_hidden_tests_show_once_the_course_date_passed(lab_root: Path) -> None:
    c = course(lab_root, extra='[[extension]]\nstudent = "bob"\nlab = "01"\ndays = 3\n')
    r = results()
    r.labs[0].tests = [model.TestResult("AddHidden.Big", Status.FAILED, binary="hidden", task="t",
                                  visibility="after_due_date", message="secret input")]
    apply_course(c, "ada", r, late_by(-1))
    assert r.labs[0].late.reveal_hidden_after == (DUE + timedelta(days=3)).isoformat()  # the latest extension
    before = redact(r, now=DUE + timedelta(days=1))
    assert before.labs[0].tests[0].name.startswith("HiddenTests.") and "secret" not in before.labs[0].tests[0].message
    after = redact(r, now=DUE + timedelta(days=4))
    assert after.labs[0].tests[0].name == "AddHidden.Big"
    r.labs[0].tests[0].visibility = "hidden"
    assert redact(r, now=DUE + timedelta(days=4)).labs[0].tests[0].name.startswith("HiddenTests.")


def test_results_json_round_trip_keeps_the_late_record(lab_root: Path) -> None:
    c = course(lab_root, "penalty_percent = 10")
    r = assess(c, 25)
    back = Results.from_dict(r.to_dict())
    assert back.labs[0].late == r.labs[0].late and back.labs[0].score == 64
    assert "late" not in results().to_dict()["labs"][0]  # no course: as schema 1 wrote it
    old = results().to_dict()
    old["schema_version"] = 1
    assert Results.from_dict(old).labs[0].late is None


# --- the late-day ledger -------------------------------------------------------------------------------


def two_labs(lab_root: Path, ledger: str = 'ledger = "late-days.json"'):
    write_lab(lab_root, "02-mul")
    return course(lab_root, f"penalty_percent = 10\nlate_days = 3\n{ledger}",
                  due='"01" = "2025-09-26T23:59:00-04:00"\n"02" = "2025-10-03T23:59:00-04:00"')


def lab02(hours: float) -> tuple[Results, dict[str, SubmittedAt]]:
    lab = LabResult(2, "02-mul", "Mul", 100.0, score=50.0)
    r = Results(RunInfo(started="2025-10-05T00:00:00+00:00"), [lab])
    return r, {"": SubmittedAt(DUE + timedelta(days=7, hours=hours), "git commit")}


def test_ledger_shares_late_days_between_batches_of_different_labs(lab_root: Path) -> None:
    c = two_labs(lab_root)
    assert c.ledger == (lab_root / "late-days.json").resolve() and not c.ledger.exists()
    first = Ledger(c.ledger, "/grades/01")
    r = results()
    apply_course(c, "Ada", r, late_by(30), first)  # batch 1, lab 01: 2 days started, 2 spent (1 left)
    assert (r.labs[0].late.late_days_used, r.labs[0].late.late_days_left, r.labs[0].score) == (2, 1, 80)
    data = json.loads(c.ledger.read_text())
    entry = data["students"]["ada"]["01-add"]
    assert entry["days"] == 2 and entry["batch"] == "/grades/01" and entry["written"]
    r2, times = lab02(40)  # batch 2 a week later, lab 02: 2 days started, only 1 left
    apply_course(c, "ada", r2, times, Ledger(c.ledger, "/grades/02"))
    late = r2.labs[0].late
    assert (late.late_days_used, late.late_days_left, late.charged, late.penalty) == (1, 0, 1, 5)
    assert "1 late day of your course allowance covered part of it (0 left)" in explain(late, 100)
    students = json.loads(c.ledger.read_text())["students"]
    assert {lab: e["days"] for lab, e in students["ada"].items()} == {"01-add": 2, "02-mul": 1}
    assert students["ada"]["02-mul"]["batch"] == "/grades/02"
    r3, times = lab02(40)
    apply_course(c, "bob", r3, times, Ledger(c.ledger, "/grades/02"))  # bob spent nothing yet: no penalty
    assert r3.labs[0].late.late_days_used == 2 and r3.labs[0].late.penalty == 0


def test_ledger_regrading_a_lab_never_spends_twice(lab_root: Path) -> None:
    c = two_labs(lab_root)
    ledger = Ledger(c.ledger, "/grades/01")
    for _ in range(3):  # the same lab graded again (a rerun, --force, a kept grade reassessed)
        r = results()
        apply_course(c, "ada", r, late_by(30), ledger)
        assert r.labs[0].late.late_days_used == 2 and r.labs[0].late.late_days_left == 1
    written = c.ledger.read_text()
    assert json.loads(written)["students"]["ada"]["01-add"]["days"] == 2
    apply_course(c, "ada", results(), late_by(30), Ledger(c.ledger, "/elsewhere"))
    assert c.ledger.read_text() == written  # nothing changed: the entry (and its batch) stand
    r2, times = lab02(40)
    apply_course(c, "ada", r2, times, ledger)
    assert r2.labs[0].late.late_days_used == 1
    r = results()
    apply_course(c, "ada", r, late_by(-1), ledger)  # lab 01 regraded on time: its 2 days come back
    assert r.labs[0].late.late_days_used == 0 and r.labs[0].late.late_days_left == 2
    assert json.loads(c.ledger.read_text())["students"]["ada"]["01-add"]["days"] == 0
    c.ledger.unlink()  # deleting the ledger starts the count again
    r2, times = lab02(40)
    apply_course(c, "ada", r2, times, ledger)
    assert r2.labs[0].late.late_days_used == 2


def test_no_ledger_key_counts_within_one_batch(lab_root: Path) -> None:
    c = two_labs(lab_root, ledger="")
    assert c.ledger is None
    for _ in range(2):
        r = results()
        apply_course(c, "ada", r, late_by(30))
        assert r.labs[0].late.late_days_used == 2 and r.labs[0].late.late_days_left == 1
    assert not list(lab_root.glob("*.json"))


def test_ledger_path_is_relative_to_the_course_file(lab_root: Path, tmp_path: Path, monkeypatch) -> None:
    (lab_root / "course").mkdir()
    (lab_root / "course" / "course.toml").write_text('[policy]\nlate_days = 2\nledger = "books/late.json"\n')
    monkeypatch.chdir(tmp_path.parent)
    c = load_course(lab_root / "course" / "course.toml", discover(lab_root))
    assert c.ledger == (lab_root / "course" / "books" / "late.json").resolve()
    (lab_root / "course.toml").write_text('[policy]\nledger = ""\n')
    with pytest.raises(CourseError, match="policy.ledger"):
        load_course(lab_root / "course.toml", discover(lab_root))


@pytest.mark.parametrize("text", ["{not json", '{"format": "cudalab late-day ledger", "version": 1}', "[]",
                                  '{"format": "cudalab late-day ledger", "version": 1, '
                                  '"students": {"ada": {"01-add": {"days": -1}}}}'])
def test_corrupt_ledger_is_a_usage_error_naming_the_file(lab_root: Path, text: str) -> None:
    c = two_labs(lab_root)
    c.ledger.write_text(text)
    with pytest.raises(LedgerError, match="late-days.json") as err:
        apply_course(c, "ada", results(), late_by(30), Ledger(c.ledger))
    assert err.value.code is Exit.USAGE and c.ledger.read_text() == text  # left as it was


def test_ledger_loses_no_entry_when_batches_write_at_once(lab_root: Path) -> None:
    c = two_labs(lab_root)

    def grade(i: int) -> None:
        apply_course(c, f"s{i}", results(), late_by(30), Ledger(c.ledger, f"/grades/{i % 2}"))

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(grade, range(40)))
    students = json.loads(c.ledger.read_text())["students"]
    assert len(students) == 40 and all(s["01-add"]["days"] == 2 for s in students.values())
    assert not [p for p in lab_root.iterdir() if p.name.endswith(".tmp")]
