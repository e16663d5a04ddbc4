"""The GitHub Classroom runner `result` object, as classroom-resources/autograding-grading-reporter reads it.

A grader step in classroom.yml sets its `result` output to encode_classroom(results); the
classroom-resources/autograding-grading-reporter step decodes it, prints one line per test, sums
tests[].score against max_score for the score bubble, and fails the job unless the status is "pass".

One test per task (its correctness points), one per perf test that carries speed points, one for speed
points no timed test carries (their perf test was skipped), and a score-less one per failed build, so
the scores add up to the grader's total. Statuses: "pass" when every counted test passed and the points
are all earned; "error" when something kept tests from running (build failure, crash, timeout, no GPU,
harness trouble); "fail" otherwise. A run that graded nothing is an "error". A lab that could not be
graded (no GPU) still needs numeric scores here (0): its tests are errors whose messages say "Not graded:
no GPU", never a number of points.

A lab with a late penalty (a course file: grader/course/policy.py) gets one more test, "Lab NN · late penalty",
whose score is the penalty as a negative number: the reporter sums every test's score, so the total is
the lab's final score (raw - penalty), as in the gradebook and gradescope.json. Its status is "fail"
(points were taken off; the module's rule: "pass" only when every point is earned), its message the
student's report's paragraph on how the penalty came about.
"""

from __future__ import annotations

import base64
import json
import re
from typing import Any

from grader.report._format import (
    category_label,
    clean_text,
    first_line,
    fmt_points,
    is_perf,
    labelled,
    perf_summary,
    truncate,
)
from grader.report.standing import lab_standing
from grader.model.results import Category, LabResult, Results, Status, TaskScore, TestResult

VERSION = 1
_MESSAGE_LIMIT = 2_000
_EPS = 1e-6
# reasons a test could not give a verdict: the reporter calls these errors, not failures
_ERROR_CATEGORIES = {
    Category.COMPILE_ERROR,
    Category.LINK_ERROR,
    Category.CRASH,
    Category.TIMEOUT,
    Category.NO_GPU,
    Category.HARNESS,
}
# "vector_add.cu:41" or "labs/03-vector-add/vector_add.cu(41)" at the start of a line of a failure
_WHERE = re.compile(r"^\s*([\w./+-]+\.(?:cu|cuh|cpp|cc|cxx|c|h|hpp))(?::|\()(\d+)", re.MULTILINE)


def _round(x: float) -> float:
    return round(float(x), 4)


def _ms(seconds: float) -> int:
    return max(0, round(seconds * 1000))


def _is_error(test: TestResult) -> bool:
    return (
        test.status is Status.NOT_RUN
        or test.category in _ERROR_CATEGORIES
        or (test.status is Status.SKIPPED and test.category is Category.NO_GPU)
    )


def _where(tests: list[TestResult]) -> tuple[str, int]:
    """The file and line of the first failure that names one (gtest prints file:line)."""
    for t in tests:
        if t.status is Status.PASSED or t.binary == "hidden":
            continue
        if m := _WHERE.search(clean_text(t.message)):
            return m.group(1), int(m.group(2))
    return "", 0


def _failure_lines(tests: list[TestResult], limit: int = 6) -> list[str]:
    """A line per test that did not pass. The runner's log is the student's to read, so hidden tests
    are only counted, never named."""
    lines = []
    bad = [t for t in tests if t.status is not Status.PASSED and t.binary != "hidden"]
    hidden = sum(t.status is not Status.PASSED and t.binary == "hidden" for t in tests)
    for t in bad[:limit]:
        why = category_label(t.category) or t.status.value.replace("_", " ")
        detail = first_line(clean_text(t.message or t.properties.get("skip_reason", "")), 200)
        lines.append(f"{clean_text(t.name)}: {labelled(why, detail)}")
        if t.hint and t.status is Status.FAILED:
            lines.append(f"  Hint: {first_line(clean_text(t.hint), 300)}")
    if len(bad) > limit:
        lines.append(f"... and {len(bad) - limit} more")
    if hidden:
        lines.append(f"{hidden} hidden test{'s' if hidden != 1 else ''} did not pass.")
    return lines


def _command(lab: LabResult) -> str:
    return f"python3 -m grader test {lab.number:02d}"


def _task_test(lab: LabResult, task: TaskScore) -> dict[str, Any]:
    members = [t for t in lab.tests if t.task == task.id and not is_perf(t)]
    all_passed = task.tests_total > 0 and task.tests_passed == task.tests_total
    if all_passed and task.earned >= task.points - _EPS:
        status = "pass"
    elif any(_is_error(t) for t in members) or task.tests_total == 0:
        status = "error"
    else:
        status = "fail"
    if lab_standing(lab).graded:
        head = f"{fmt_points(task.earned)} / {fmt_points(task.points)} points"
        if task.tests_total:
            head += f"; {task.tests_passed} of {task.tests_total} tests passed"
    else:  # the score must be a number here; the message says it is not a grade
        head = (f"Not graded: no GPU. These tests need a GPU and could not run here, so the 0 shown is not a "
                f"score (the task is worth {fmt_points(task.points)} points)")
    lines = [head + "."] + [clean_text(n) for n in task.notes] + _failure_lines(members)
    filename, line_no = _where(members)
    return {
        "name": clean_text(f"Lab {lab.number:02d} · {task.title}"),
        "status": status,
        "score": _round(task.earned),
        "message": truncate("\n".join(lines), _MESSAGE_LIMIT),
        "test_code": _command(lab),
        "filename": filename,
        "line_no": line_no,
        "duration": _ms(sum(t.duration_s for t in members)),
    }


def _perf_test(lab: LabResult, test: TestResult) -> dict[str, Any]:
    perf = test.perf
    assert perf is not None
    if test.status is Status.PASSED:
        status = "pass" if perf.earned >= perf.points - _EPS else "fail"
    else:
        status = "error" if _is_error(test) else "fail"
    lines = [f"{fmt_points(perf.earned)} / {fmt_points(perf.points)} speed points."]
    if summary := perf_summary(perf):
        lines.append(f"Measured: {summary}.")
    lines += _failure_lines([test])
    return {
        "name": clean_text(f"Lab {lab.number:02d} · speed: {test.name}"),
        "status": status,
        "score": _round(perf.earned),
        "message": truncate("\n".join(lines), _MESSAGE_LIMIT),
        "test_code": _command(lab),
        "filename": "",
        "line_no": 0,
        "duration": _ms(test.duration_s),
    }


def _untimed_test(lab: LabResult, points: float, earned: float) -> dict[str, Any]:
    """Speed points that no timed test carries: their perf test was skipped or never ran."""
    untimed = [t for t in lab.tests if is_perf(t) and t.perf is None]
    status = "error" if any(_is_error(t) for t in untimed) or not untimed else "fail"
    lines = [f"{fmt_points(earned)} / {fmt_points(points)} speed points: not timed, so not earned."
             if lab_standing(lab).graded else "Not graded: no GPU (speed is timed on a GPU)."]
    lines += _failure_lines(untimed)
    return {
        "name": clean_text(f"Lab {lab.number:02d} · speed points not timed"),
        "status": status if earned < points - _EPS else "pass",
        "score": _round(earned),
        "message": truncate("\n".join(lines), _MESSAGE_LIMIT),
        "test_code": _command(lab),
        "filename": "",
        "line_no": 0,
        "duration": _ms(sum(t.duration_s for t in untimed)),
    }


def _late_test(lab: LabResult) -> dict[str, Any] | None:
    """The late penalty as a test of negative score (None when there is none)."""
    from grader.report.late import explain

    if lab.late is None or lab.late.penalty <= _EPS:
        return None
    return {
        "name": clean_text(f"Lab {lab.number:02d} · late penalty"),
        "status": "fail",
        "score": -_round(lab.late.penalty),
        "message": truncate(clean_text(explain(lab.late, lab.max_score)), _MESSAGE_LIMIT),
        "test_code": "",
        "filename": "",
        "line_no": 0,
        "duration": 0,
    }


def _lab_tests(lab: LabResult) -> list[dict[str, Any]]:
    tests: list[dict[str, Any]] = []
    for build in lab.builds:
        if build.ok:
            continue
        filename, line_no = "", 0
        if m := _WHERE.search(clean_text(build.log)):
            filename, line_no = m.group(1), int(m.group(2))
        message = clean_text(build.message) or f"{build.target} failed to build"
        log = clean_text(build.log).strip()
        tests.append(
            {
                "name": clean_text(f"Lab {lab.number:02d} · build {build.target}"),
                "status": "error",
                "score": 0,
                "message": truncate(message + ("\n" + log if log else ""), _MESSAGE_LIMIT),
                "test_code": f"python3 -m grader build {lab.number:02d}",
                "filename": filename,
                "line_no": line_no,
                "duration": _ms(build.seconds),
            }
        )
    for task in lab.tasks:
        if task.points > 0 or task.tests_total > 0:  # not the rubric's bare holder of speed points
            tests.append(_task_test(lab, task))
    timed = [t for t in lab.tests if t.perf is not None and t.perf.points > 0]
    tests += [_perf_test(lab, t) for t in timed]
    points = sum(t.perf_points for t in lab.tasks) - sum(t.perf.points for t in timed if t.perf)
    if points > _EPS:
        earned = max(0.0, sum(t.perf_earned for t in lab.tasks) - sum(t.perf.earned for t in timed if t.perf))
        tests.append(_untimed_test(lab, points, earned))
    if late := _late_test(lab):
        tests.append(late)
    return tests


def render_classroom(results: Results) -> dict[str, Any]:
    """The runner result object: {version, status, max_score, tests[...]}."""
    tests = [t for lab in results.labs for t in _lab_tests(lab)]
    statuses = {t["status"] for t in tests}
    if not tests or "error" in statuses:
        status = "error"
    elif "fail" in statuses:
        status = "fail"
    else:
        status = "pass"
    return {"version": VERSION, "status": status, "max_score": _round(results.max_score), "tests": tests}


def encode_classroom(results: Results) -> str:
    """base64 of the result's JSON: the value of a grader step's `result` output."""
    text = json.dumps(render_classroom(results), ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return base64.b64encode(text.encode("utf-8")).decode("ascii")


__all__ = ["encode_classroom", "render_classroom"]
