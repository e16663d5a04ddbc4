"""Every export, validated against its consumer's schema (grader/report/schemas), over varied results:
Gradescope results.json, the GitHub Classroom runner result, JUnit XML and the CSV gradebooks.
The checkers are tested too: each must reject what its consumer rejects."""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import Callable

import pytest

from grader.report import encode_classroom, render_classroom, render_csv, render_gradescope, render_junit
from grader.report.sample import (
    _reduce_lab,
    _run,
    _streams_lab,
    _vector_add_lab,
    no_gpu_results,
    sample_results,
)
from grader.report.schemas import (
    check_exports,
    validate_class_gradebook,
    validate_classroom,
    validate_classroom_encoded,
    validate_csv_cells,
    validate_gradescope,
    validate_junit,
)
from grader.model.results import Results


def _all_passing() -> Results:
    lab = _reduce_lab()
    for task in lab.tasks:
        task.perf_earned = task.perf_points
    for t in lab.tests:
        if t.perf is not None:
            t.perf.earned = t.perf.points
    lab.score = sum(t.earned + t.perf_earned for t in lab.tasks)
    return Results(run=_run(gpu=True), labs=[lab])


def _solution_mode() -> Results:
    r = sample_results()
    r.run.mode = "solution"
    return r


def _no_gpu_no_perf() -> Results:
    r = no_gpu_results()
    r.run.gpu = {}
    r.run.started = r.run.finished = ""
    return r


VARIANTS: dict[str, Callable[[], Results]] = {
    "sample": sample_results,
    "no_gpu": no_gpu_results,
    "no_gpu_no_dates": _no_gpu_no_perf,
    "build_failure": lambda: Results(run=_run(gpu=True), labs=[_vector_add_lab()]),
    "all_passing": _all_passing,
    "wrong_answers": lambda: Results(run=_run(gpu=True), labs=[_streams_lab()]),
    "empty": lambda: Results(run=_run(gpu=True), labs=[]),
    "solution_mode": _solution_mode,
    "round_trip": lambda: Results.from_dict(json.loads(json.dumps(sample_results().to_dict()))),
}


@pytest.fixture(params=list(VARIANTS), ids=list(VARIANTS))
def results(request: pytest.FixtureRequest) -> Results:
    return VARIANTS[request.param]()


# --- every export of every variant is valid ----------------------------------------------------------


def test_gradescope_valid(results: Results) -> None:
    data = render_gradescope(results)
    assert validate_gradescope(data) == []
    json.dumps(data, allow_nan=False)
    scored = [t["score"] for t in data["tests"] if "score" in t]
    assert sum(scored) == pytest.approx(data["score"], abs=1e-3)  # the entries add up to the total


def test_classroom_valid(results: Results) -> None:
    data = render_classroom(results)
    assert validate_classroom(data) == []
    assert validate_classroom_encoded(encode_classroom(results)) == []
    # what the reporter does: sum tests[].score against max_score
    assert sum(t["score"] for t in data["tests"]) == pytest.approx(results.score, abs=1e-3)
    assert data["max_score"] == pytest.approx(results.max_score)


def test_junit_valid(results: Results) -> None:
    assert validate_junit(render_junit(results)) == []


def test_csv_valid(results: Results) -> None:
    assert validate_csv_cells(render_csv(results)) == []


def test_check_exports(results: Results) -> None:
    assert check_exports(results) == {
        "gradescope": [],
        "classroom": [],
        "classroom_encoded": [],
        "junit": [],
        "csv": [],
    }


# --- the GitHub Classroom result ---------------------------------------------------------------------

EXPECTED_STATUS = {
    "sample": "error",  # lab 03 did not build
    "no_gpu": "error",
    "no_gpu_no_dates": "error",
    "build_failure": "error",
    "all_passing": "pass",
    "wrong_answers": "fail",
    "empty": "error",  # nothing graded is never a green check
    "solution_mode": "error",
    "round_trip": "error",
}


@pytest.mark.parametrize("name", list(VARIANTS))
def test_classroom_status(name: str) -> None:
    assert render_classroom(VARIANTS[name]())["status"] == EXPECTED_STATUS[name]


def test_classroom_entries() -> None:
    r = sample_results()
    data = render_classroom(r)
    tests = {t["name"]: t for t in data["tests"]}
    assert data["version"] == 1 and data["max_score"] == 400
    build = tests["Lab 03 · build lab03_student"]
    assert build["status"] == "error" and build["score"] == 0
    assert (build["filename"], build["line_no"]) == ("labs/03-vector-add/vector_add.cu", 41)
    assert "ceil_dvi" in build["message"]
    naive = tests["Lab 05 · Naive matmul, one thread per output"]
    assert naive["status"] == "pass" and naive["score"] == 30 and naive["duration"] == 30
    tiled = tests["Lab 05 · Shared-memory tiles"]
    assert tiled["status"] == "error" and tiled["score"] == 12  # a hidden test crashed
    assert tests["Lab 05 · speed points not timed"]["score"] == 0
    shuffle = tests["Lab 06 · speed: ReducePerf.Shuffle/268435456"]
    assert shuffle["status"] == "fail" and shuffle["score"] == pytest.approx(4.7)
    assert "GB/s" in shuffle["message"]
    events = tests["Lab 09 · Order work with events"]
    assert events["status"] == "fail" and events["test_code"] == "python3 -m grader test 09"
    assert isinstance(events["line_no"], int) and isinstance(events["duration"], int)
    # the runner's log is the student's to read: hidden tests are counted, never named
    text = json.dumps(data)
    assert "MatmulHidden" not in text and "1 hidden test did not pass" in tiled["message"]
    assert "<script>" in text  # kept verbatim as text (the reporter prints to a log, not HTML)...
    assert "\x07" not in text and "\x1b" not in text  # ...but control characters and ANSI codes are gone


def test_classroom_late_penalty_is_a_negative_entry() -> None:
    """With a course file's penalty, the tests' scores add up to the final score, not the raw one."""
    from datetime import datetime, timezone
    from pathlib import Path

    from grader.course.policy import Course, Policy, SubmittedAt, apply_course

    r = sample_results()
    raw = {lab.name: sum(t["score"] for t in render_classroom(Results(run=r.run, labs=[lab]))["tests"])
           for lab in r.labs}
    due = datetime(2025, 9, 26, 23, 59, tzinfo=timezone.utc)
    course = Course(Path("course.toml"), Policy(penalty_percent=10), {"06-reduce": due, "05-tiled-matmul": due})
    when = {"06-reduce": SubmittedAt(datetime(2025, 9, 28, 1, 0, tzinfo=timezone.utc), "archive mtime"),
            "": SubmittedAt(datetime(2025, 9, 26, 12, 0, tzinfo=timezone.utc), "archive mtime")}  # 05: on time
    apply_course(course, "ada", r, when)
    reduce = next(lab for lab in r.labs if lab.name == "06-reduce")
    assert reduce.late is not None and reduce.late.penalty == pytest.approx(0.2 * 99.7)
    data = render_classroom(r)
    assert validate_classroom(data) == [] and validate_classroom_encoded(encode_classroom(r)) == []
    penalty = {t["name"]: t for t in data["tests"]}["Lab 06 · late penalty"]
    assert penalty["score"] == pytest.approx(-reduce.late.penalty) and penalty["status"] == "fail"
    assert "25 hours late" in penalty["message"] and "19.94 points come off" in penalty["message"]
    assert [t["name"] for t in data["tests"] if "late penalty" in t["name"]] == ["Lab 06 · late penalty"]
    assert sum(t["score"] for t in data["tests"]) == pytest.approx(r.score, abs=1e-3)  # the final score
    assert sum(t["score"] for t in data["tests"]) == pytest.approx(sum(raw.values()) - reduce.late.penalty, abs=1e-3)
    lab06 = [t["score"] for t in data["tests"] if t["name"].startswith("Lab 06")]
    assert sum(lab06) == pytest.approx(reduce.score, abs=1e-3) and reduce.score < raw["06-reduce"]


def test_classroom_encoding_round_trip() -> None:
    r = sample_results()
    encoded = encode_classroom(r)
    assert encoded.isascii() and "\n" not in encoded
    assert json.loads(base64.b64decode(encoded).decode("utf-8")) == render_classroom(r)


# --- the checkers reject what consumers reject --------------------------------------------------------

GOOD_GS = {
    "score": 3.0,
    "output": "x",
    "visibility": "visible",
    "tests": [{"name": "a", "score": 1, "max_score": 2, "visibility": "after_due_date", "status": "failed"}],
    "leaderboard": [{"name": "GB/s", "value": 3012.5, "order": "desc"}, {"name": "t", "value": "fast"}],
}


@pytest.mark.parametrize(
    ("patch", "problem"),
    [
        (lambda d: d.update(visibility="students"), "not one of"),
        (lambda d: d.update(stdout_visibility="public"), "not one of"),
        (lambda d: d.update(output_format="markdown"), "not one of"),
        (lambda d: d["tests"][0].update(status="ok"), "not one of"),
        (lambda d: d["tests"][0].update(visibility="later"), "not one of"),
        (lambda d: d["tests"][0].update(output_format="rtf"), "not one of"),
        (lambda d: d["tests"][0].update(score="1"), "expected number"),
        (lambda d: d["tests"][0].update(score=True), "expected number"),
        (lambda d: d["tests"][0].update(tags="lab01"), "expected array"),
        (lambda d: d["tests"][0].update(number=1.1), "expected string"),
        (lambda d: d["tests"][0].update(maxscore=2), "unknown field"),
        (lambda d: d.update(score=float("nan")), "not valid JSON"),
        (lambda d: d.update(execution_time=-1), "below the minimum"),
        (lambda d: d.update(extra_data=[]), "expected object"),
        (lambda d: d["leaderboard"][0].update(order="up"), "not one of"),
        (lambda d: d["leaderboard"][0].pop("name"), "missing required field 'name'"),
        (lambda d: d["leaderboard"][0].update(value=None), "expected number or string"),
        (lambda d: (d.pop("score"), d["tests"].append({"name": "b"})), "no score"),
    ],
)
def test_gradescope_checker_rejects(patch: Callable[[dict], object], problem: str) -> None:
    assert validate_gradescope(GOOD_GS) == []
    bad = copy.deepcopy(GOOD_GS)
    patch(bad)
    errors = validate_gradescope(bad)
    assert errors and any(problem in e for e in errors), errors


GOOD_GH = {
    "version": 1,
    "status": "fail",
    "max_score": 10,
    "tests": [
        {
            "name": "a",
            "status": "pass",
            "score": 5,
            "message": "",
            "test_code": "make",
            "filename": "",
            "line_no": 0,
            "duration": 12,
        },
        {"name": "b", "status": "fail", "score": 0, "message": "no", "line_no": 3, "duration": 1},
    ],
}


@pytest.mark.parametrize(
    ("patch", "problem"),
    [
        (lambda d: d.update(version=2), "must be 1"),
        (lambda d: d.update(status="passed"), "not one of"),
        (lambda d: d.pop("max_score"), "missing required field 'max_score'"),
        (lambda d: d["tests"][0].pop("score"), "missing required field 'score'"),
        (lambda d: d["tests"][0].update(score="5"), "expected number"),
        (lambda d: d["tests"][0].update(line_no=1.5), "expected integer"),
        (lambda d: d["tests"][0].update(duration=-1), "below the minimum"),
        (lambda d: d["tests"][0].update(max_score=5), "unknown field"),
        (lambda d: d.update(status="pass"), "'pass' while some tests did not pass"),
        (lambda d: d["tests"][1].update(status="error"), "must be 'error'"),
        (lambda d: d["tests"][0].update(score=50), "above max_score"),
        (lambda d: d["tests"][1].update(name="a"), "duplicate names"),
        (lambda d: d["tests"][1].update(score=-6), "below 0"),
        (lambda d: d["tests"].append({"name": "late", "status": "pass", "score": -1}), "a deduction"),
    ],
)
def test_classroom_checker_rejects(patch: Callable[[dict], object], problem: str) -> None:
    assert validate_classroom(GOOD_GH) == []
    bad = copy.deepcopy(GOOD_GH)
    patch(bad)
    errors = validate_classroom(bad)
    assert errors and any(problem in e for e in errors), errors


def test_classroom_encoded_checker() -> None:
    good = base64.b64encode(json.dumps(GOOD_GH).encode()).decode()
    assert validate_classroom_encoded(good) == []
    assert validate_classroom_encoded(good[:-3] + "!!!")
    assert validate_classroom_encoded(base64.b64encode(b"{not json").decode())
    assert validate_classroom_encoded(good[:20] + "\n" + good[20:])
    assert validate_classroom_encoded("")


GOOD_JUNIT = """<?xml version="1.0" encoding="UTF-8"?>
<testsuites name="x" tests="3" failures="1" errors="0" skipped="1" time="0.3">
  <testsuite name="lab01" tests="3" failures="1" errors="0" skipped="1" time="0.3" timestamp="2025-11-22T10:15:03">
    <properties><property name="gpu" value="H100"/></properties>
    <testcase name="A" classname="lab01.S" time="0.1"/>
    <testcase name="B" classname="lab01.S" time="0.1"><failure message="m" type="wrong_answer">t</failure></testcase>
    <testcase name="C" classname="lab01.S" time="0.1"><skipped message="no GPU"/><system-out>o</system-out></testcase>
    <system-out>lab</system-out>
  </testsuite>
</testsuites>
"""


@pytest.mark.parametrize(
    ("old", "new", "problem"),
    [
        ('testsuite name="lab01" tests="3"', 'testsuite name="lab01" tests="4"', "tests=4 but"),
        (
            'failures="1" errors="0" skipped="1" time="0.3" timestamp',
            'failures="0" errors="0" skipped="1" time="0.3" timestamp',
            "failures=0 but",
        ),
        ('<testsuites name="x" tests="3"', '<testsuites name="x" tests="2"', "testsuites: tests=2"),
        (
            'type="wrong_answer">t</failure>',
            'type="wrong_answer">t</failure><error message="e" type="crash"/>',
            "more than one",
        ),
        (' type="wrong_answer"', "", "missing attribute 'type'"),
        ('<skipped message="no GPU"/>', "<skipped/>", "missing attribute 'message'"),
        ('name="A" classname="lab01.S" ', 'name="A" ', "missing attribute 'classname'"),
        ('classname="lab01.S" time="0.1"/>', 'classname="lab01.S"/>', "missing attribute 'time'"),
        ('time="0.1"/>', 'time="fast"/>', "is not a number"),
        ('timestamp="2025-11-22T10:15:03"', 'timestamp="22/11/2025"', "timestamp"),
        (' time="0.3" timestamp', " timestamp", "missing attribute 'time'"),
        (
            "<system-out>lab</system-out>",
            '<system-out>lab</system-out><testcase name="D" classname="c" time="0"/>',
            "out of order",
        ),
        (
            '<testcase name="A" classname="lab01.S" time="0.1"/>',
            '<testcase name="A" classname="lab01.S" time="0.1"><stdout/></testcase>',
            "unexpected <stdout>",
        ),
        ("<testsuites", "<results", "root element"),
        ("</testsuites>", "", "not well-formed"),
    ],
)
def test_junit_checker_rejects(old: str, new: str, problem: str) -> None:
    assert validate_junit(GOOD_JUNIT) == []
    assert old in GOOD_JUNIT
    bad = GOOD_JUNIT.replace(old, new, 1)
    if problem == "root element":
        bad = bad.replace("</testsuites>", "</results>")
    errors = validate_junit(bad)
    assert errors and any(problem in e for e in errors), errors


GOOD_BOOK = (
    "student,total,max_total,01-add,01-add:small,status,notes\nann,40,100,40,40,graded,\nbo,,,,,broken,no file\n"
    "cy,,,,,not graded (no GPU),not graded: no GPU\n"
)
COMPILE_BOOK = (
    "student,total,max_total,01-add,01-add:small,status,notes\nann,,,compiled,,compiled,\n"
    "bo,,,compile error,,not compiled,01-add: compile error: x\n"
)


@pytest.mark.parametrize(
    ("old", "new", "problem"),
    [
        ("ann,40", "=ann,40", "starts like a formula"),
        ("no file", "-no file", "starts like a formula"),
        ("bo,,,,,broken", "bo,1,,,,broken", "broken submission has scores"),
        ("cy,,,,,not", "cy,0,100,0,0,not", "not graded (no GPU) submission has scores (no score is not a zero)"),
        ("not graded: no GPU\n", "\n", "without a note"),
        ("broken,no file", "broken,", "without a note"),
        ("graded,", "done,", "status"),
        ("ann,40,100", "ann,forty,100", "not a number"),
        ("01-add:small", "02-mul:small", "names no lab column"),
        ("ann,40,100,40,40,graded,", "ann,40,100,40,graded,", "cells"),
        ("student,total", "name,total", "header"),
    ],
)
def test_gradebook_checker_rejects(old: str, new: str, problem: str) -> None:
    assert validate_class_gradebook(GOOD_BOOK) == []
    errors = validate_class_gradebook(GOOD_BOOK.replace(old, new, 1))
    assert errors and any(problem in e for e in errors), errors


@pytest.mark.parametrize(
    ("old", "new", "problem"),
    [
        ("ann,,,compiled,,compiled", "ann,0,,compiled,,compiled", "a compile check has scores"),
        ("ann,,,compiled,,compiled", "ann,,,compiled,0,compiled", "a compile check has scores"),
        ("ann,,,compiled,", "ann,,,built,", "is not one of"),
        ("bo,,,compile error,,not compiled", "bo,,,compile error,,compiled", "while its labs say"),
        ("ann,,,compiled,,compiled", "ann,,,compiled,,not compiled", "while its labs say"),
    ],
)
def test_gradebook_checker_rejects_a_bad_compile_check(old: str, new: str, problem: str) -> None:
    assert validate_class_gradebook(COMPILE_BOOK) == []
    errors = validate_class_gradebook(COMPILE_BOOK.replace(old, new, 1))
    assert errors and any(problem in e for e in errors), errors
