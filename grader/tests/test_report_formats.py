"""JUnit XML, Gradescope results.json, grades.csv, the console summary and write_reports()."""

from __future__ import annotations

import csv
import io
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from grader.model.hidden import redact
from grader.report import (
    console,
    render_console,
    render_csv,
    render_gradescope,
    render_html,
    render_junit,
    write_reports,
)
from grader.report.sample import no_gpu_results, sample_results
from grader.model.results import Results, Status

CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


@pytest.fixture()
def results() -> Results:
    return sample_results()


# --- JUnit -----------------------------------------------------------------------------------------

SUITE_ATTRS = {
    "name",
    "tests",
    "failures",
    "errors",
    "skipped",
    "time",
    "timestamp",
    "hostname",
    "id",
    "package",
}
CASE_ATTRS = {"name", "classname", "time"}
CASE_CHILDREN = {"skipped", "error", "failure", "system-out", "system-err"}


def test_junit_parses_and_counts(results: Results) -> None:
    text = render_junit(results)
    assert not CONTROL.search(text)
    root = ET.fromstring(text.encode("utf-8"))
    assert root.tag == "testsuites"
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == [lab.name for lab in results.labs]
    for suite, lab in zip(suites, results.labs, strict=False):
        assert set(suite.attrib) <= SUITE_ATTRS
        cases = suite.findall("testcase")
        assert int(suite.get("tests")) == len(cases) == len(lab.tests) + len(lab.builds)
        for key, tag in (("failures", "failure"), ("errors", "error"), ("skipped", "skipped")):
            assert int(suite.get(key)) == sum(1 for c in cases if c.find(tag) is not None), (lab.name, key)
        for case in cases:
            assert set(case.attrib) <= CASE_ATTRS and case.get("classname", "").startswith(
                f"lab{lab.number:02d}"
            )
            assert {child.tag for child in case} <= CASE_CHILDREN
            float(case.get("time"))
        children = [c.tag for c in suite]
        assert children[0] == "properties"
    for key in ("tests", "failures", "errors", "skipped"):
        assert int(root.get(key)) == sum(int(s.get(key)) for s in suites)


def test_junit_mapping(results: Results) -> None:
    root = ET.fromstring(render_junit(results))
    by_name = {(c.get("classname"), c.get("name")): c for c in root.iter("testcase")}
    build = by_name[("lab03.lab03_student", "build")]
    error = build.find("error")
    assert error is not None and error.get("type") == "compile_error"
    assert 'identifier "ceil_dvi" is undefined' in error.text and "\x1b" not in error.text
    assert by_name[("lab03.VectorAddCorrectness", "HostFlow/1")].find("error") is not None  # not run
    wrong = by_name[("lab05.MatmulCorrectness", "Tiled/1000")].find("failure")
    assert wrong.get("type") == "wrong_answer" and wrong.get("message").startswith("42112 of 1000000")
    assert "Hint: The last tile" in wrong.text
    assert by_name[("lab05.MatmulHidden", "Rectangular/r1021_c777")].find("error").get("type") == "crash"
    skipped = by_name[("lab05.MatmulPerf", "Tiled/2048")].find("skipped")
    assert skipped.get("message") == "matmul_tiled is incorrect at this size: not timed"
    hostile = by_name[("lab09.StreamsCorrectness", "Events/8")].find("failure")
    assert "<script>alert(1)</script>" in hostile.text and "]]>" in hostile.text  # escaped, then parsed back
    assert "\\x07" in hostile.text
    assert "perf: 2,671 GB/s" in by_name[("lab06.ReducePerf", "Shuffle/268435456")].find("system-out").text


def test_junit_no_gpu_is_all_skips() -> None:
    root = ET.fromstring(render_junit(no_gpu_results()))
    assert int(root.get("failures")) == 0 and int(root.get("errors")) == 0
    assert int(root.get("skipped")) == sum(lab.skipped for lab in no_gpu_results().labs)


# --- Gradescope ------------------------------------------------------------------------------------

VIS = {"hidden", "after_due_date", "after_published", "visible"}


def _check_gradescope(data: dict, results: Results) -> None:
    json.loads(json.dumps(data))  # plain JSON
    assert set(data) <= {
        "score",
        "execution_time",
        "output",
        "output_format",
        "test_output_format",
        "test_name_format",
        "visibility",
        "stdout_visibility",
        "extra_data",
        "tests",
        "leaderboard",
    }
    assert data["score"] == pytest.approx(results.score)
    assert data["visibility"] in VIS and data["stdout_visibility"] in VIS
    scored = [t for t in data["tests"] if "score" in t]
    assert sum(t["score"] for t in scored) == pytest.approx(results.score)
    assert data["extra_data"]["max_score"] == pytest.approx(results.max_score)
    if data["extra_data"]["graded"]:
        assert sum(t["max_score"] for t in scored) == pytest.approx(results.max_score)
    else:  # entries of a lab without a verdict carry no points at all
        assert data["output"].startswith("Not graded: no GPU.")
        ungraded = {f"lab{int(name[:2]):02d}" for name in data["extra_data"]["labs_not_graded"]}
        for t in data["tests"]:
            if set(t["tags"]) & ungraded and "build" not in t["tags"]:
                assert "score" not in t and "max_score" not in t and t["output"].startswith("Not graded: no GPU.")
    for t in data["tests"]:
        assert isinstance(t["name"], str) and t["name"]
        assert t.get("visibility", "visible") in VIS
        assert t.get("status", "passed") in ("passed", "failed")
        # an entry without a verdict is neutral in Gradescope: neither score nor status, and it says why
        assert "score" in t or "status" in t or t["output"].startswith("Not graded: no GPU.")
        assert isinstance(t.get("output", ""), str) and not CONTROL.search(t.get("output", ""))
        assert all(isinstance(tag, str) for tag in t.get("tags", []))
        assert 0 <= t.get("score", 0) <= t.get("max_score", t.get("score", 0)) + 1e-9


def test_gradescope_shape_and_sums(results: Results) -> None:
    data = render_gradescope(results)
    _check_gradescope(data, results)
    assert data["execution_time"] == 404
    names = [t["name"] for t in data["tests"]]
    assert "Lab 03 · build lab03_student" in names
    build = next(t for t in data["tests"] if t["name"] == "Lab 03 · build lab03_student")
    assert build["status"] == "failed" and "ceil_dvi" in build["output"]
    tiled = next(t for t in data["tests"] if t["name"] == "Lab 05 · Shared-memory tiles")
    assert tiled["score"] == 12 and tiled["max_score"] == 60
    assert "FAILED: MatmulCorrectness.Tiled/1000 (wrong answer)" in tiled["output"]
    assert "technique missing" in tiled["output"]
    assert tiled["visibility"] == "after_published"  # holds a hidden test
    untimed = next(t for t in data["tests"] if t["name"] == "Lab 05 · speed: Shared-memory tiles")
    assert (
        untimed["max_score"] == 10 and untimed["score"] == 0 and "MatmulPerf.Tiled/2048" in untimed["output"]
    )
    speed = next(t for t in data["tests"] if "speed: ReducePerf.Shuffle" in t["name"])
    assert speed["score"] == pytest.approx(4.7) and speed["max_score"] == 5 and "perf" in speed["tags"]
    numbers = [t["number"] for t in data["tests"]]
    assert len(numbers) == len(set(numbers))
    board = {e["name"]: e for e in data["leaderboard"]}
    assert board["Lab 09 StreamsPerf.Overlap/8 (ms)"]["order"] == "asc"
    assert board["Lab 06 ReducePerf.Shuffle/268435456 (GB/s)"]["order"] == "desc"
    assert "<script>alert(1)</script>" in json.dumps(data)  # text output, as Gradescope shows it in <pre>


def test_gradescope_no_gpu_and_options() -> None:
    results = no_gpu_results()
    data = render_gradescope(results, visibility="after_due_date")
    _check_gradescope(data, results)
    assert data["score"] == 0 and "No GPU was available" in data["output"]
    assert "0 / " not in data["output"] and "not graded (no GPU)" in data["output"]
    assert data["extra_data"]["graded"] is False and data["extra_data"]["not_graded"] == "no GPU"
    assert not any("score" in t for t in data["tests"])  # nothing here is a score
    assert "leaderboard" not in data
    with pytest.raises(ValueError):
        render_gradescope(results, visibility="sometimes")


# --- CSV -------------------------------------------------------------------------------------------


def test_csv_one_row_per_lab(results: Results) -> None:
    results.labs[0].title = '=HYPERLINK("http://x")'
    rows = list(csv.DictReader(io.StringIO(render_csv(results))))
    assert [r["lab"] for r in rows] == [lab.name for lab in results.labs]
    for row, lab in zip(rows, results.labs, strict=False):
        assert float(row["score"]) == pytest.approx(lab.score)
        assert float(row["max_score"]) == lab.max_score
        assert (int(row["passed"]), int(row["failed"]), int(row["skipped"]), int(row["not_run"])) == (
            lab.passed,
            lab.failed,
            lab.skipped,
            lab.not_run,
        )
        assert row["gpu"] == "NVIDIA H100 80GB HBM3" and row["mode"] == "student"
    assert rows[0]["build_ok"] == "false" and rows[1]["build_ok"] == "true"
    assert rows[0]["title"].startswith("'=")  # no formula injection
    assert rows[3]["perf_earned"] == "8.5" and rows[3]["perf_points"] == "10"


# --- console ---------------------------------------------------------------------------------------


def test_console_plain(results: Results) -> None:
    out = io.StringIO()
    render_console(results, out)
    text = out.getvalue()
    assert "\x1b" not in text and not CONTROL.search(text)
    assert "GPU: NVIDIA H100 80GB HBM3 · sm_90 · 132 SMs · 1980 MHz" in text
    assert "195.2 / 400" in text and "99.7 / 100" in text
    assert re.search(r"Tiled matrix multiply\s+42 / 100\s+4\s+3\s+1\s+0", text)
    assert "[build failed]" in text and "4 tests not run" in text
    assert "ReducePerf.Shuffle/268435456: 2,671 GB/s · 0.97× reference · 0.95× cub · 4.7/5 pts" in text
    assert "MatmulCorrectness.Tiled/1000 — wrong answer" in text


def test_a_refused_file_is_said_refused_not_built(results: Results) -> None:
    """A file the static checks turned away never built: the reports' build column must not say it did (the
    reference's builds, which did, are not the student's)."""
    from dataclasses import replace

    from grader.model.results import BuildResult, Category, TestResult

    lab = results.labs[1]
    refused = replace(lab, builds=[BuildResult(target="lab05_solution", ok=True)],
                      tests=[TestResult(name=t.name, status=Status.NOT_RUN, kind=t.kind, category=Category.FORBIDDEN_CALL,
                                        message="the lab file was rejected: solutions/05-tiled-matmul/matmul.cu")
                             for t in lab.tests])
    one = replace(results, labs=[refused])
    out = io.StringIO()
    render_console(one, out)
    text = out.getvalue()
    assert f"{refused.number:02d} [refused] " in text
    # The first problem says why; the task steps (all "the rest not run") are not listed for code that never ran.
    problems = text.split("Problems\n", 1)[1].splitlines()
    assert "✗ the lab file was rejected: solutions/05-tiled-matmul/matmul.cu" in problems[0]
    assert not any(" steps: " in line for line in problems)
    html = render_html(one)
    assert "✗ refused" in html
    # The only "built" left is the reference's own build, listed by its name.
    assert html.count("✓ built") == html.count("✓ built</span> <code>lab05_solution</code>") == 1
    assert next(csv.DictReader(io.StringIO(render_csv(one))))["build_ok"] == "false"


def test_console_color_and_ascii(results: Results, monkeypatch: pytest.MonkeyPatch) -> None:
    results.labs[1].tests[3].message = "[bold]not markup[/bold] " + results.labs[1].tests[3].message
    out = io.StringIO()
    render_console(results, out, color=True)  # rich, where it is installed
    assert "\x1b[" in out.getvalue() and "195.2 / 400" in out.getvalue()
    assert "[bold]not markup[/bold]" in out.getvalue()
    monkeypatch.setattr(console, "_render_rich", lambda summary, stream: False)
    out = io.StringIO()
    render_console(results, out, color=True)  # plain ANSI codes
    assert "\x1b[1;31m" in out.getvalue() and "[bold]not markup[/bold]" in out.getvalue()
    raw = io.BytesIO()
    stream = io.TextIOWrapper(raw, encoding="ascii")
    render_console(results, stream)
    assert "195.2 / 400" in raw.getvalue().decode("ascii")


def test_console_no_gpu() -> None:
    out = io.StringIO()
    render_console(no_gpu_results(), out)
    assert "GPU: none (cudaGetDeviceCount: no CUDA-capable device is detected)" in out.getvalue()


# --- write_reports ---------------------------------------------------------------------------------


def test_write_reports(results: Results, tmp_path: Path) -> None:
    paths = write_reports(results, tmp_path / "out")
    assert set(paths) == {"json", "html", "junit", "gradescope", "csv", "classroom", "classroom_b64"}
    assert {p.name for p in paths.values()} == {
        "results.json",
        "report.html",
        "junit.xml",
        "gradescope.json",
        "grades.csv",
        "classroom.json",
        "classroom.b64",
    }
    assert all(p.is_file() and p.stat().st_size > 0 for p in paths.values())
    assert not list((tmp_path / "out").glob("*.tmp"))
    again = Results.load(paths["json"])
    assert again.to_dict() == Results.from_dict(results.to_dict()).to_dict()
    assert paths["html"].read_text(encoding="utf-8") == render_html(redact(again))  # grader/model/hidden.py
    ET.parse(paths["junit"])
    assert json.loads(paths["gradescope"].read_text())["score"] == pytest.approx(results.score)


def test_statuses_cover_the_fixture(results: Results) -> None:
    seen = {t.status for lab in results.labs for t in lab.tests}
    assert seen == set(Status)
