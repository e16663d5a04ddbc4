"""grader/course.py: the course file, each late policy rule, the time sources, and hidden tests shown
after the course's due date."""

from __future__ import annotations

import os
import subprocess
import zipfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from grader.course import (
    CourseError,
    SubmittedAt,
    apply_course,
    explain,
    git_commit_time,
    load_course,
    submission_time,
    submission_times,
)
from grader.errors import Exit
from grader.hidden import redact
from grader.labs import discover
from grader.results import LabResult, Results, RunInfo, Status
from grader import results as model

from .conftest import write_lab

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
