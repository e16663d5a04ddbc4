"""JUnit XML for CI dashboards (Jenkins, GitLab, GitHub test reporters).

One <testsuite> per lab; one <testcase classname="labNN.Suite" name="Test/param"> per test; a
wrong answer is a <failure type="category">, a crash, timeout or test that never ran is an <error>,
a skip is <skipped>. Each build is a testcase named "build" (an <error> when it failed). A lab that
could not be graded (no GPU) has no "score" property and "graded" says why. Element
order and attributes follow the common JUnit schema (testsuite: properties, testcase*, system-out).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from grader.report._format import (
    category_label,
    clean_text,
    first_line,
    gpu_line,
    lab_id,
    parse_time,
    perf_summary,
    split_test_name,
    truncate,
)
from grader.report.standing import lab_standing
from grader.model.results import Category, LabResult, Results, Status, TestResult

# Failures of the code under test: the test ran and said no. Everything else that kept a test from
# finishing (crash, timeout, harness trouble) is an error.
_FAILURE_CATEGORIES = {
    Category.WRONG_ANSWER,
    Category.CUDA_ERROR,
    Category.TECHNIQUE_MISSING,
    Category.FORBIDDEN_CALL,
    Category.SANITIZER,
}
_LOG_LIMIT = 20_000


def _t(value: float) -> str:
    return f"{max(0.0, value):.3f}"


def _timestamp(iso: str) -> str | None:
    when = parse_time(iso)
    return when.strftime("%Y-%m-%dT%H:%M:%S") if when else None


def _outcome(test: TestResult) -> str:
    """'passed', 'failure', 'error' or 'skipped'."""
    if test.status is Status.PASSED:
        return "passed"
    if test.status is Status.SKIPPED:
        return "skipped"
    if test.status is Status.NOT_RUN:
        return "skipped" if test.category is Category.NO_GPU else "error"
    if test.category is None or test.category in _FAILURE_CATEGORIES:
        return "failure"
    return "error"


def _testcase(parent: ET.Element, lab: LabResult, test: TestResult) -> str:
    suite, name = split_test_name(test.name)
    case = ET.SubElement(
        parent,
        "testcase",
        {
            "name": clean_text(name),
            "classname": clean_text(f"{lab_id(lab)}.{suite}" if suite else lab_id(lab)),
            "time": _t(test.duration_s),
        },
    )
    outcome = _outcome(test)
    message = clean_text(test.message or test.properties.get("skip_reason", ""))
    kind = (
        test.category.value if test.category else ("not_run" if test.status is Status.NOT_RUN else "failure")
    )
    if outcome == "skipped":
        ET.SubElement(case, "skipped", {"message": first_line(message, 500) or "skipped"})
    elif outcome in ("failure", "error"):
        summary = first_line(message, 500) or category_label(test.category) or test.status.value
        body = truncate(message, _LOG_LIMIT)
        if test.hint:
            body += f"\n\nHint: {clean_text(test.hint)}"
        element = ET.SubElement(case, outcome, {"message": summary, "type": kind})
        element.text = body
    out = []
    if test.perf is not None and (line := perf_summary(test.perf)):
        out.append(f"perf: {line}")
    if out:
        ET.SubElement(case, "system-out").text = "\n".join(out)
    return outcome


def render_junit(results: Results) -> str:
    """The JUnit XML document, as text (UTF-8 declared)."""
    root = ET.Element("testsuites", {"name": "cudalab"})
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    total_time = 0.0
    stamp = _timestamp(results.run.started)
    for lab in results.labs:
        attrs = {"name": clean_text(lab.name), "id": str(lab.number), "package": lab_id(lab)}
        if stamp:
            attrs["timestamp"] = stamp
        if results.run.host:
            attrs["hostname"] = clean_text(results.run.host)
        suite = ET.SubElement(root, "testsuite", attrs)
        props = ET.SubElement(suite, "properties")
        graded = lab_standing(lab)
        for key, value in (
            ("title", lab.title),
            # a lab without a verdict (no GPU) has no score: "graded" says why instead of a 0
            ("score", f"{lab.score:g}" if graded.graded else ""),
            ("max_score", f"{lab.max_score:g}"),
            ("graded", "true" if graded.graded else f"false ({graded.reason})"),
            ("mode", results.run.mode),
            ("commit", results.run.commit),
            ("gpu", gpu_line(results.run)),
            ("toolkit", results.run.toolkit),
        ):
            if value:
                ET.SubElement(props, "property", {"name": key, "value": clean_text(value)})
        counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
        seconds = 0.0
        for build in lab.builds:
            case = ET.SubElement(
                suite,
                "testcase",
                {
                    "name": "build",
                    "classname": clean_text(f"{lab_id(lab)}.{build.target}"),
                    "time": _t(build.seconds),
                },
            )
            counts["tests"] += 1
            seconds += build.seconds
            if not build.ok:
                counts["errors"] += 1
                kind = build.category.value if build.category else Category.COMPILE_ERROR.value
                message = clean_text(build.message) or f"{build.target} failed to build"
                error = ET.SubElement(case, "error", {"message": message, "type": kind})
                error.text = truncate(clean_text(build.log), _LOG_LIMIT)
        for test in lab.tests:
            outcome = _testcase(suite, lab, test)
            counts["tests"] += 1
            seconds += test.duration_s
            if outcome == "failure":
                counts["failures"] += 1
            elif outcome == "error":
                counts["errors"] += 1
            elif outcome == "skipped":
                counts["skipped"] += 1
        if lab.messages:
            ET.SubElement(suite, "system-out").text = "\n".join(clean_text(m) for m in lab.messages)
        for key, value in counts.items():
            suite.set(key, str(value))
            totals[key] += value
        suite.set("time", _t(seconds))
        total_time += seconds
    for key, value in totals.items():
        root.set(key, str(value))
    root.set("time", _t(total_time))
    ET.indent(root, space="  ")
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
