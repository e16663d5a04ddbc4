"""What every report says when a run could not be graded (no GPU: grader/report/standing.py), and the
small things a reader must be able to trust: the commit with its "+dirty", no absolute path of the
grading machine in an export, and a failure's category said once."""

from __future__ import annotations

import csv
import io
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from grader.model.hidden import redact
from grader.report import (
    encode_classroom,
    render_classroom,
    render_console,
    render_csv,
    render_gradescope,
    render_html,
    render_junit,
    write_reports,
)
from grader.report._format import fmt_commit, labelled
from grader.report.paths import relative_paths, roots_of
from grader.report.sample import _reduce_lab, _run, _vector_add_lab, no_gpu_results, sample_results
from grader.report.schemas import check_exports
from grader.report.standing import compile_state, grade_record, lab_standing, standing
from grader.model.results import BuildResult, Category, LabResult, Results, Status
from grader.model.results import TestResult as Case


def _mixed() -> Results:
    """One lab run on a GPU, one without (a GPU lost between labs): the run is not graded."""
    gpu_lab = _reduce_lab()
    lost = no_gpu_results().labs[1]
    return Results(run=_run(gpu=True), labs=[gpu_lab, lost])


# --- the rule ---------------------------------------------------------------------------------------------


def test_standing() -> None:
    assert standing(sample_results()).graded and grade_record(sample_results()) == {"status": "graded"}
    ungraded = standing(no_gpu_results())
    assert not ungraded.graded and ungraded.reason == "no GPU" and ungraded.headline == "not graded: no GPU"
    assert ungraded.labs == ("06-reduce", "05-tiled-matmul") and ungraded.waiting == 43
    mixed = standing(_mixed())
    assert not mixed.graded and mixed.labs == ("05-tiled-matmul",)
    assert lab_standing(_mixed().labs[0]).graded
    # a compile error is a verdict without a GPU too: 0 is the grade
    broken = _vector_add_lab()
    assert lab_standing(broken).graded and compile_state(broken) == ("compile error", broken.builds[0].message)


def test_a_hidden_summary_row_counts_the_tests_it_stands_for() -> None:
    lab = LabResult(1, "01-add", "Add", 100, tests=[
        Case("AddCorrectness.Small/1", Status.SKIPPED, category=Category.NO_GPU),
        *(Case(f"AddHidden.Edge/{n}", Status.SKIPPED, binary="hidden", visibility="hidden", category=Category.NO_GPU,
               task="hidden") for n in range(4)),
    ])
    shown = redact(Results(run=_run(gpu=False), labs=[lab])).labs[0]
    assert len(shown.tests) == 2 and lab_standing(shown).waiting == 5 == lab_standing(lab).waiting


def test_compile_states() -> None:
    lab = LabResult(1, "01-add", "Add", 100, builds=[BuildResult("lab01_student", True)])
    assert compile_state(lab) == ("compiled", "")
    lab.builds.append(BuildResult("lab01_hidden_student", False, category=Category.LINK_ERROR, message="undefined add"))
    assert compile_state(lab) == ("link error", "undefined add")
    refused = LabResult(1, "01-add", "Add", 100, tests=[
        Case("AddCorrectness.Small/1", Status.NOT_RUN, category=Category.FORBIDDEN_CALL,
             message="the lab file was refused: x")])
    assert compile_state(refused) == ("refused", "the lab file was refused: x")


# --- every export of a run without a GPU --------------------------------------------------------------------


@pytest.mark.parametrize("make", [no_gpu_results, _mixed], ids=["no_gpu", "gpu_lost"])
def test_no_export_shows_a_real_looking_zero(make, tmp_path: Path) -> None:
    results = make()
    ungraded = standing(results).labs
    assert check_exports(results) == {k: [] for k in check_exports(results)}  # the consumers still read them

    console = io.StringIO()
    render_console(results, console)
    text = console.getvalue()
    assert text.splitlines()[1].startswith("Not graded: no GPU.")
    for lab in results.labs:
        row = next(line for line in text.splitlines() if line.startswith(f"{lab.number:02d} "))
        assert ("not graded" in row) == (lab.name in ungraded), row
    assert "Total" in text and "not graded" in next(line for line in text.splitlines() if line.startswith("Total"))

    html = render_html(results)
    assert "<div class=\"big not-graded\">not graded</div>" in html and "<small>/ 200</small>" not in html
    assert "Not graded: no GPU." in html

    junit = ET.fromstring(render_junit(results))
    for suite in junit.iter("testsuite"):
        props = {p.get("name"): p.get("value") for p in suite.iter("property")}
        if suite.get("name") in ungraded:
            assert "score" not in props and props["graded"] == "false (no GPU)"
        else:
            assert props["graded"] == "true" and "score" in props

    rows = list(csv.DictReader(io.StringIO(render_csv(results))))
    for row in rows:
        if row["lab"] in ungraded:
            assert row["status"] == "not graded (no GPU)" and row["score"] == row["perf_earned"] == ""
        else:
            assert row["status"] == "graded" and row["score"]

    gs = render_gradescope(results)
    assert gs["extra_data"]["graded"] is False and gs["output"].startswith("Not graded: no GPU.")

    room = render_classroom(results)
    assert room["status"] == "error"
    for entry in room["tests"]:
        if any(f"Lab {int(name[:2]):02d} ·" in entry["name"] for name in ungraded):
            assert entry["message"].startswith("Not graded: no GPU") and entry["status"] == "error"
    assert encode_classroom(results)

    paths = write_reports(results, tmp_path)
    record = json.loads(paths["json"].read_text())
    assert record["grade"]["status"] == "not_graded" and record["grade"]["labs"] == list(ungraded)
    assert Results.load(paths["json"]).to_dict() == results.to_dict()  # "grade" is read past


def test_a_graded_run_still_shows_its_score(tmp_path: Path) -> None:
    results = sample_results()
    text = io.StringIO()
    render_console(results, text)
    assert "Not graded" not in text.getvalue() and "195.2 / 400" in text.getvalue()
    assert "not graded" not in render_html(results)
    assert json.loads(write_reports(results, tmp_path)["json"].read_text())["grade"] == {"status": "graded"}


# --- the commit, paths and labels ---------------------------------------------------------------------------


def test_the_commit_keeps_its_dirty_mark() -> None:
    assert fmt_commit("d1f4cd6+dirty") == "d1f4cd6+dirty"
    assert fmt_commit("0123456789abcdef0123+dirty") == "0123456789ab+dirty"
    assert fmt_commit("0123456789abcdef0123") == "0123456789ab"
    results = sample_results()
    results.run.commit = "0123456789abcdef0123+dirty"
    console = io.StringIO()
    render_console(results, console)
    assert "commit 0123456789ab+dirty" in console.getvalue()
    assert "<code>0123456789ab+dirty</code>" in render_html(results)


def test_relative_paths() -> None:
    roots = ("/srv/cudalab",)
    text = ("/usr/local/cuda/bin/nvcc -I/srv/cudalab/labs/03-vector-add -I/srv/cudalab "
            "--keep-dir=/srv/cudalab/build/ci-batch-0/x /srv/cudalab2/y")
    assert relative_paths(text, roots) == (
        "/usr/local/cuda/bin/nvcc -Ilabs/03-vector-add -I. --keep-dir=build/ci-batch-0/x /srv/cudalab2/y")
    assert roots_of(Path("/srv/cudalab/"))[0] == "/srv/cudalab" or "/srv/cudalab" in roots_of(Path("/srv/cudalab"))


def test_exports_hold_no_absolute_path_of_the_grading_machine(tmp_path: Path) -> None:
    root = tmp_path / "checkout"
    results = Results(run=_run(gpu=True), labs=[_vector_add_lab()])
    build = results.labs[0].builds[0]
    build.log = f"{root}/labs/03-vector-add/vector_add.cu(41): error\nnvcc -I{root}/common/include -I{root}"
    build.message = f"{root}/labs/03-vector-add/vector_add.cu(41): error: identifier is undefined"
    results.labs[0].tests[0].message = f"{root}/labs/03-vector-add/test_vector_add.cu:88: Failure"
    results.labs[0].messages.append(f"built in {root}/build/ci-submission")
    paths = write_reports(results, tmp_path / "out", root=root)
    for fmt, path in paths.items():
        text = path.read_text()
        if fmt == "classroom_b64":
            import base64

            text = base64.b64decode(text).decode()
        if fmt == "json":
            assert str(root) in text  # the instructor's record keeps everything
        else:
            assert str(root) not in text, fmt
    room = json.loads(paths["classroom"].read_text())
    assert any("labs/03-vector-add/vector_add.cu(41)" in t["message"] for t in room["tests"])


def test_a_category_is_said_once() -> None:
    """A message that already starts with its category's label (a technique check's) is not labelled
    again in any report."""
    assert labelled("technique missing", "technique missing: no ld.shared") == "technique missing: no ld.shared"
    assert labelled("technique missing", "no ld.shared") == "technique missing: no ld.shared"
    results = sample_results()
    for lab in results.labs:
        for t in lab.tests:
            if t.category is Category.TECHNIQUE_MISSING:
                t.message = "technique missing: " + t.message
    console = io.StringIO()
    render_console(results, console)
    texts = [console.getvalue(), render_html(results), render_junit(results),
             json.dumps(render_gradescope(results)), json.dumps(render_classroom(results)), render_csv(results)]
    for text in texts:
        assert "technique missing: technique missing" not in text
    assert "technique missing: the tiled kernel uses shared memory" in texts[0]
