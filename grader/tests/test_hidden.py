"""Hidden tests end to end (fake builds, no GPU): the hidden binary runs after the public one, its tests
score only the hidden task, and every student-facing export shows them as the lab's visibility says."""

from __future__ import annotations

import base64
import io
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from grader.cli import args as cli
from grader.cli import commands
from grader.host.environment import GpuProbe
from grader.model.hidden import NOTE_PREFIX, SUMMARY_SUITE, redact, reveals, summarize
from grader.model.labs import LabError, discover, load_lab
from grader.grade.options import RunOptions
from grader.grade.pipeline import run_labs
from grader.model.progress import Progress
from grader.report import render_console, write_reports
from grader.report.schemas import (
    validate_classroom,
    validate_classroom_encoded,
    validate_gradescope,
    validate_junit,
)
from grader.model.results import Category, Results, Status
from grader.model.results import TestResult as TResult

from grader.tests.conftest import LAB_TOML, FakeBuilder, add_tests, spec, write_lab

GPU = GpuProbe(True, "NVIDIA Fake", "9.0")
SECRET = "AddHiddenCorrectness"  # the hidden suite: its name must never reach a concealed report
SECRET_INPUT = "seed 424242"  # text of a hidden failure message (an input)

HIDDEN_TOML = LAB_TOML.replace("points = 40\ntests = [\"AddCorrectness.Large/*\"]",
                               "points = 30\ntests = [\"AddCorrectness.Large/*\"]") + """
[[task]]
id = "hidden"
title = "Hidden tests"
points = 10
tests = ["AddHidden*"]
hidden = true

[hidden]
visibility = "{visibility}"
"""


def hidden_tests(fail: bool = True) -> list[dict]:
    bad = {"do": "fail", "message": f"add.cu:3\n1 of 3 elements differ ({SECRET_INPUT}, exact)"}
    return [
        {"name": f"{SECRET}.Edge/3", **(bad if fail else {"do": "pass"})},
        {"name": f"{SECRET}.Edge/65537", "do": "pass"},
        {"name": f"{SECRET}.Odd/99991", "do": "pass"},
    ]


def grade(root: Path, visibility: str = "hidden", fail: bool = True, mode: str = "student",
          hidden_spec: dict | None = None) -> Results:
    write_lab(root, toml=HIDDEN_TOML.format(visibility=visibility))
    (root / "solutions" / "01-add" / "test_hidden_add.cu").write_text("// hidden tests\n")
    builder = FakeBuilder(root / "build" / "bin", {
        "lab01_student": spec(add_tests()),
        "lab01_solution": spec(add_tests()),
        "lab01_hidden_student": hidden_spec or spec(hidden_tests(fail)),
        "lab01_hidden_solution": spec(hidden_tests(fail=mode == "solution" and fail)),
    })
    return run_labs(root, discover(root), builder, GPU, RunOptions(mode=mode), Progress(stream=io.StringIO()))


def texts(out: Path) -> dict[str, str]:
    return {p.name: p.read_text(encoding="utf-8") for p in out.iterdir() if p.is_file()}


# --- lab.toml ----------------------------------------------------------------------------------------


def test_lab_toml_hidden_keys(tmp_path: Path) -> None:
    lab = load_lab(write_lab(tmp_path, toml=HIDDEN_TOML.format(visibility="after_due_date")), tmp_path)
    assert lab.hidden_visibility == "after_due_date" and lab.total_points == 100
    assert [t.id for t in lab.tasks if t.hidden] == ["hidden"]
    assert lab.task_for_test("AddHiddenCorrectness.Edge/3", hidden=True).id == "hidden"
    assert lab.task_for_test("AddHiddenCorrectness.Edge/3", hidden=False) is None
    assert lab.task_for_test("AddCorrectness.Small/1", hidden=True) is None


def test_lab_toml_default_and_bad_visibility(tmp_path: Path) -> None:
    assert load_lab(write_lab(tmp_path / "a"), tmp_path / "a").hidden_visibility == "hidden"
    path = write_lab(tmp_path / "b", toml=HIDDEN_TOML.format(visibility="after_published"))
    with pytest.raises(LabError, match="visibility must be"):
        load_lab(path, tmp_path / "b")


# --- the pipeline --------------------------------------------------------------------------------------


def test_hidden_binary_scores_only_the_hidden_task(tmp_path: Path) -> None:
    lab = grade(tmp_path, "after_due_date").labs[0]
    hidden = [t for t in lab.tests if t.binary == "hidden"]
    assert len(hidden) == 3 and {t.visibility for t in hidden} == {"after_due_date"}
    assert {t.task for t in hidden} == {"hidden"}
    assert all(t.visibility == "" for t in lab.tests if t.binary != "hidden")
    task = next(t for t in lab.tasks if t.id == "hidden")
    assert (task.tests_passed, task.tests_total) == (2, 3) and task.earned == pytest.approx(20 / 3, abs=1e-3)
    assert lab.max_score == 100 and lab.score == pytest.approx(90 + 20 / 3, abs=1e-3)


def test_hidden_binary_messages_are_tagged(tmp_path: Path) -> None:
    crash = spec([{"name": f"{SECRET}.Edge/3", "do": "segv"}, {"name": f"{SECRET}.Odd/7", "do": "pass"}])
    lab = grade(tmp_path, hidden_spec=crash).labs[0]
    hidden_notes = [m for m in lab.messages if m.startswith(NOTE_PREFIX)]
    assert hidden_notes and all(SECRET not in m for m in lab.messages if not m.startswith(NOTE_PREFIX))
    shown = redact(Results(run=grade(tmp_path / "again").run, labs=[lab]))
    assert not any(SECRET in m for m in shown.labs[0].messages)


def test_no_hidden_file_no_hidden_anything(tmp_path: Path) -> None:
    """A student release has no solutions/: no hidden binary, nothing about hidden tests."""
    write_lab(tmp_path, solution=None)
    builder = FakeBuilder(tmp_path / "bin", {"lab01_student": spec(add_tests())})
    results = run_labs(tmp_path, discover(tmp_path), builder, GPU, RunOptions(), Progress(stream=io.StringIO()))
    assert builder.built == ["lab01_student"]
    out = tmp_path / "out"
    write_reports(results, out)
    for name, text in texts(out).items():
        assert "hidden test" not in text.lower(), name
        assert SUMMARY_SUITE not in text, name


# --- redaction -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("visibility", "reveal", "mode", "shown"), [
    ("hidden", False, "student", False),
    ("hidden", True, "student", False),
    ("hidden", False, "solution", False),
    ("after_due_date", False, "student", False),
    ("after_due_date", True, "student", True),
    ("after_due_date", False, "solution", True),
    ("visible", False, "student", True),
])
def test_reveals(visibility: str, reveal: bool, mode: str, shown: bool) -> None:
    assert reveals(visibility, reveal, mode) is shown


def test_redact_leaves_one_summary_row(tmp_path: Path) -> None:
    results = grade(tmp_path, "hidden")
    shown = redact(results)
    lab, full = shown.labs[0], results.labs[0]
    assert not any(SECRET in t.name or SECRET_INPUT in t.message for t in lab.tests)
    summary = next(t for t in lab.tests if t.name.startswith(SUMMARY_SUITE))
    assert summary.name == "HiddenTests.hidden" and summary.task == "hidden"
    assert summary.status is Status.FAILED and summary.category is Category.WRONG_ANSWER
    assert summary.message.startswith("3 hidden tests: 2 passed, 1 failed.") and not summary.hint
    assert len(lab.tests) == len(full.tests) - 3 + 1
    assert lab.score == full.score and lab.tasks == full.tasks  # the points and counts stay
    assert any(SECRET in t.name for t in full.tests), "redact must not change its argument"


def test_summary_statuses() -> None:
    def t(status: Status, category: Category | None = None) -> TResult:
        return TResult("H.x", status, binary="hidden", category=category)

    assert summarize([t(Status.PASSED)] * 2, "h", "hidden").status is Status.PASSED
    no_gpu = summarize([t(Status.SKIPPED, Category.NO_GPU)] * 2, "h", "hidden")
    assert no_gpu.status is Status.SKIPPED and no_gpu.category is Category.NO_GPU
    broken = summarize([t(Status.NOT_RUN, Category.COMPILE_ERROR), t(Status.PASSED)], "h", "after_due_date")
    assert broken.status is Status.NOT_RUN and "until the due date" in broken.message
    assert summarize([t(Status.PASSED)], None, "hidden").name == "HiddenTests.unscored"


def test_hidden_build_failure_output_is_concealed(tmp_path: Path) -> None:
    write_lab(tmp_path, toml=HIDDEN_TOML.format(visibility="hidden"))
    (tmp_path / "solutions" / "01-add" / "test_hidden_add.cu").write_text("// hidden\n")
    log = f"solutions/01-add/test_hidden_add.cu(9): error: {SECRET} secret_input_table is undefined\n"
    builder = FakeBuilder(tmp_path / "bin", {
        "lab01_student": spec(add_tests()), "lab01_solution": spec(add_tests()),
        "lab01_hidden_solution": spec(hidden_tests()),
    }, failures={"lab01_hidden_student": log})
    progress = io.StringIO()
    results = run_labs(tmp_path, discover(tmp_path), builder, GPU, RunOptions(), Progress(stream=progress))
    said = "lab01_hidden_student: did not build (the output of the hidden tests' build is not shown)"
    assert said in progress.getvalue()
    assert "secret_input_table" not in progress.getvalue() and SECRET not in progress.getvalue()
    out = tmp_path / "out"
    write_reports(results, out)
    files = texts(out)
    for name, text in files.items():
        if name not in ("results.json", "gradescope.json"):
            assert "secret_input_table" not in text and SECRET not in text, name
    assert "secret_input_table" in files["results.json"]
    gs = json.loads(files["gradescope.json"])
    assert "secret_input_table" not in gs["output"]
    for entry in gs["tests"]:
        if "secret_input_table" in entry["output"]:
            assert entry["visibility"] == "hidden", entry["name"]  # course staff only
    build = next(b for b in redact(results).labs[0].builds if b.target == "lab01_hidden_student")
    assert not build.ok and build.log == "" and "not shown" in build.message


# --- every export --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("visibility", ["hidden", "after_due_date"])
def test_concealed_exports_count_never_name(tmp_path: Path, visibility: str) -> None:
    results = grade(tmp_path / "g", visibility)
    out = tmp_path / "out"
    write_reports(results, out)
    files = texts(out)
    # the instructor's record keeps everything
    assert SECRET in files["results.json"] and SECRET_INPUT in files["results.json"]
    for name in ("report.html", "junit.xml", "grades.csv", "classroom.json"):
        assert SECRET not in files[name] and SECRET_INPUT not in files[name], name
        assert "65537" not in files[name] and "99991" not in files[name], name  # the sizes are inputs too
    assert SECRET not in base64.b64decode(files["classroom.b64"]).decode()
    assert "3 hidden tests: 2 passed, 1 failed." in files["report.html"]
    console = io.StringIO()
    render_console(redact(results), console)
    assert SECRET not in console.getvalue() and "HiddenTests.hidden" in console.getvalue()
    # valid exports
    assert validate_junit(files["junit.xml"]) == []
    assert validate_classroom(json.loads(files["classroom.json"])) == []
    assert validate_classroom_encoded(files["classroom.b64"].strip()) == []
    # Gradescope: hidden results in their own entry, gated by Gradescope's own visibility
    gs = json.loads(files["gradescope.json"])
    assert validate_gradescope(gs) == []
    entry = next(t for t in gs["tests"] if t["name"] == "Lab 01 · Hidden tests")
    assert entry["visibility"] == visibility and entry["max_score"] == 10
    assert f"{SECRET}.Edge/3" in entry["output"]  # course staff (or students after the due date) see why
    public = [t for t in gs["tests"] if t is not entry]
    assert all(t.get("visibility", "visible") == "visible" for t in public)
    assert not any(SECRET in t["output"] for t in public) and SECRET not in gs["output"]
    assert gs["score"] == pytest.approx(results.score)


def test_after_due_date_revealed(tmp_path: Path) -> None:
    results = grade(tmp_path / "g", "after_due_date")
    out = tmp_path / "out"
    write_reports(results, out, reveal_hidden=True)
    html = texts(out)["report.html"]
    assert f"{SECRET}" in html and SECRET_INPUT in html and SUMMARY_SUITE not in html
    junit = ET.fromstring(texts(out)["junit.xml"].split("\n", 1)[1])
    assert any(c.get("classname") == f"lab01.{SECRET}" for c in junit.iter("testcase"))


def test_after_due_date_shown_in_solution_mode(tmp_path: Path) -> None:
    results = grade(tmp_path / "g", "after_due_date", mode="solution")
    assert results.run.mode == "solution" and any(t.binary == "hidden" for t in results.labs[0].tests)
    out = tmp_path / "out"
    write_reports(results, out)
    assert SECRET in texts(out)["report.html"]


def test_visible_hidden_tests_show_everywhere(tmp_path: Path) -> None:
    results = grade(tmp_path / "g", "visible")
    out = tmp_path / "out"
    write_reports(results, out)
    files = texts(out)
    assert SECRET in files["report.html"] and SECRET_INPUT in files["report.html"]
    gs = json.loads(files["gradescope.json"])
    assert next(t for t in gs["tests"] if t["name"] == "Lab 01 · Hidden tests")["visibility"] == "visible"


# --- the command line ---------------------------------------------------------------------------------------


def test_grade_and_report_reveal_hidden(tmp_path: Path, monkeypatch, capsys) -> None:
    root = tmp_path / "repo"
    results = grade(root, "after_due_date")
    builder = FakeBuilder(root / "build" / "bin2", {
        "lab01_student": spec(add_tests()), "lab01_solution": spec(add_tests()),
        "lab01_hidden_student": spec(hidden_tests()), "lab01_hidden_solution": spec(hidden_tests(False)),
    })
    monkeypatch.setattr(commands, "make_builder", lambda r, p, j: builder)
    monkeypatch.setattr(commands, "probe_gpu", lambda: GPU)
    out = tmp_path / "out"
    assert cli.main(["--root", str(root), "grade", "-q", "--out", str(out)]) == 1
    console = capsys.readouterr().out
    assert SECRET not in console and "HiddenTests.hidden" in console
    assert SECRET not in (out / "report.html").read_text()
    again = tmp_path / "again"
    assert cli.main(["report", "--from", str(out / "results.json"), "--out", str(again), "--reveal-hidden"]) == 0
    assert SECRET in (again / "report.html").read_text()
    assert results.labs[0].max_score == 100


def crashing_hidden_grade(root: Path, visibility: str) -> tuple[Results, str]:
    """A grade whose hidden binary crashes: its tests are re-run one by one, each after a GPU check.
    Returns the results and the progress lines (what a CI log publishes)."""
    tests = hidden_tests(fail=False)
    tests[1] = {"name": f"{SECRET}.Edge/65537", "do": "segv"}
    write_lab(root, toml=HIDDEN_TOML.format(visibility=visibility))
    (root / "solutions" / "01-add" / "test_hidden_add.cu").write_text("// hidden tests\n")
    builder = FakeBuilder(root / "build" / "bin", {
        "lab01_student": spec(add_tests()), "lab01_solution": spec(add_tests()),
        "lab01_hidden_student": spec(tests), "lab01_hidden_solution": spec(hidden_tests(fail=False)),
        "cudalab_health_probe": spec([]),  # a healthy GPU
    })
    progress = io.StringIO()
    results = run_labs(root, discover(root), builder, GPU, RunOptions(health=True), Progress(stream=progress))
    return results, progress.getvalue()


def test_progress_lines_never_name_concealed_hidden_tests(tmp_path: Path) -> None:
    results, progress = crashing_hidden_grade(tmp_path, "hidden")
    assert any(t.category is Category.CRASH for t in results.labs[0].tests)  # the crash did happen
    assert SECRET not in progress and "65537" not in progress, progress
    assert "re-running a hidden test of lab01_hidden_student alone" in progress
    assert "checking the GPU after a hidden test of lab01_hidden_student" in progress
    assert "checking the GPU after the full run of lab01_hidden_student" in progress


def test_progress_lines_name_visible_hidden_tests(tmp_path: Path) -> None:
    _, progress = crashing_hidden_grade(tmp_path, "visible")
    assert f"re-running {SECRET}.Odd/99991 alone" in progress


def test_test_verb_counts_like_grade_and_names_no_hidden_test(tmp_path: Path, monkeypatch, capsys) -> None:
    """`grader test` is student-facing too, and its counts are the ones `grade` shows: a concealed group
    counts every hidden test in it (5 public tests pass; hidden: 2 pass, 1 fails)."""
    root = tmp_path / "repo"
    grade(root, "hidden")
    builder = FakeBuilder(root / "build" / "bin2", {
        "lab01_student": spec(add_tests()), "lab01_solution": spec(add_tests()),
        "lab01_hidden_student": spec(hidden_tests()), "lab01_hidden_solution": spec(hidden_tests(False)),
    })
    monkeypatch.setattr(commands, "make_builder", lambda r, p, j: builder)
    monkeypatch.setattr(commands, "probe_gpu", lambda: GPU)
    assert cli.main(["--root", str(root), "test", "-q"]) == 1
    tested = capsys.readouterr().out
    assert SECRET not in tested and SECRET_INPUT not in tested and "65537" not in tested, tested
    assert "lab 01-add: 7 passed, 1 failed, 0 skipped, 0 not run" in tested
    assert "HiddenTests.hidden" in tested and "3 hidden tests: 2 passed, 1 failed." in tested
    assert tested.rstrip().endswith("7 passed, 1 failed, 0 skipped")
    assert cli.main(["--root", str(root), "grade", "-q", "--out", str(tmp_path / "out")]) == 1
    graded = capsys.readouterr().out
    row = next(line for line in graded.splitlines() if line.startswith("01 "))
    assert row.split()[-4:] == ["7", "1", "0", "0"]  # Passed, Failed, Skipped, Not run
    html = (tmp_path / "out" / "report.html").read_text()
    assert "7 of 8 tests passed" in html


# --- the real lab 03 ------------------------------------------------------------------------------------------

ROOT = Path(__file__).resolve().parents[2]
_SUITE = re.compile(r"\bTEST(?:_P|_F)?\(\s*(\w+)\s*,\s*(\w+)")


def _suites(path: Path) -> set[str]:
    return {m.group(1) for m in _SUITE.finditer(path.read_text())}


@pytest.mark.parametrize("lab", [lab for lab in discover(ROOT)
                                 if (lab.solution_dir / f"test_hidden_{lab.topic}.cu").is_file()],
                         ids=lambda lab: lab.name)
def test_real_hidden_tests_belong_to_hidden_tasks(lab) -> None:
    hidden_file = lab.solution_dir / f"test_hidden_{lab.topic}.cu"
    public_file = lab.path / f"test_{lab.topic}.cu"
    hidden_tasks = [t for t in lab.tasks if t.hidden]
    assert hidden_tasks, f"{lab.name} has hidden tests but no [[task]] with hidden = true"
    assert lab.total_points == 100
    for suite in _suites(hidden_file):
        assert lab.task_for_test(f"{suite}.X/1", hidden=True) is not None, suite
        assert not any(t.matches(f"{suite}.X/1") for t in lab.tasks if not t.hidden), suite
    for suite in _suites(public_file):
        assert not any(t.matches(f"{suite}.X/1") for t in hidden_tasks), suite


def test_the_gate_runs_no_hidden_binary_once_a_test_failed(tmp_path: Path) -> None:
    """--gtest_fail_fast's rule carried across binaries: in the mutation gate a failure in the student
    binary decides, so the hidden binary is not run (a hanging mutant would wait out its timeout again);
    its tests are not run, with the reason. Without the gate's option both run, as before."""
    write_lab(tmp_path, toml=HIDDEN_TOML.format(visibility="hidden"))
    (tmp_path / "solutions" / "01-add" / "test_hidden_add.cu").write_text("// hidden tests\n")
    marker = tmp_path / "hidden-ran"
    specs = {
        "lab01_student": spec(add_tests(fail_small=True)),
        "lab01_solution": spec(add_tests()),
        "lab01_hidden_student": spec(hidden_tests(fail=False), touch=str(marker)),
        "lab01_hidden_solution": spec(hidden_tests(fail=False)),
    }

    def run(**options) -> Results:
        builder = FakeBuilder(tmp_path / "build" / "bin", specs)
        return run_labs(tmp_path, discover(tmp_path), builder, GPU, RunOptions(**options), Progress(stream=io.StringIO()))

    gated = run(stop_at_first_failure=True, perf=False).labs[0]
    hidden = [t for t in gated.tests if t.binary == "hidden"]
    assert len(hidden) == 3 and all(t.status is Status.NOT_RUN for t in hidden)
    assert all("an earlier binary's test failed" in t.message for t in hidden)
    assert not marker.exists()
    full = run().labs[0]
    assert [t.status for t in full.tests if t.binary == "hidden"] == [Status.PASSED] * 3


def test_live_failures_never_name_concealed_hidden_tests(tmp_path: Path) -> None:
    """A failing hidden test is said while its binary runs (issue 28), as 'a hidden test of ...' when concealed."""
    write_lab(tmp_path, toml=HIDDEN_TOML.format(visibility="hidden"))
    (tmp_path / "solutions" / "01-add" / "test_hidden_add.cu").write_text("// hidden tests\n")
    builder = FakeBuilder(tmp_path / "build" / "bin", {
        "lab01_student": spec(add_tests()), "lab01_solution": spec(add_tests()),
        "lab01_hidden_student": spec(hidden_tests(fail=True)), "lab01_hidden_solution": spec(hidden_tests(fail=False)),
    })
    progress = io.StringIO()
    run_labs(tmp_path, discover(tmp_path), builder, GPU, RunOptions(), Progress(stream=progress))
    text = progress.getvalue()
    assert "a hidden test of lab01_hidden_student failed (details when lab01_hidden_student is done)" in text
    assert SECRET not in text, text
