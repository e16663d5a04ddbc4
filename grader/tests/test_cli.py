"""The command line: verbs, exit codes and messages (fake builds, no GPU)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from grader.cli import args as cli
from grader.cli import commands
from grader.host.environment import GpuProbe
from grader.model.results import Results, RunInfo

from grader.tests.conftest import FIXTURES, FakeBuilder, add_tests, spec, write_lab

GPU = GpuProbe(True, "NVIDIA H200", "9.0")


@pytest.fixture
def stand_in_reports(monkeypatch):
    """A tiny stand-in for grader.report, so these tests do not depend on the renderers."""
    calls: dict[str, object] = {}

    def write_reports(results: Results, out_dir: Path, reveal_hidden: bool = False,
                      root: Path | None = None) -> dict[str, Path]:
        out_dir.mkdir(parents=True, exist_ok=True)
        results.save(out_dir / "results.json")
        calls["written"] = out_dir
        calls["reveal_hidden"] = reveal_hidden
        calls["root"] = root
        return {"json": out_dir / "results.json"}

    def render_console(results: Results, stream, color: bool) -> None:
        stream.write(f"SUMMARY {results.score:g}/{results.max_score:g}\n")

    monkeypatch.setattr(commands, "_reporters", lambda: (write_reports, render_console))
    return calls


@pytest.fixture
def fake_machine(monkeypatch, lab_root: Path):
    builder = FakeBuilder(lab_root / "build" / "bin", {
        "lab01_student": spec(add_tests(fail_small=True)),
        "lab01_solution": spec(add_tests()),
    })
    monkeypatch.setattr(commands, "make_builder", lambda root, preset, jobs: builder)
    monkeypatch.setattr(commands, "probe_gpu", lambda: GPU)
    return builder


def main(*argv: str) -> int:
    return cli.main(list(argv))


def test_list(lab_root: Path, capsys) -> None:
    write_lab(lab_root, "02-other", solution=None)
    assert main("--root", str(lab_root), "list") == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split()[:2] == ["01", "add"] and "100 pts" in out[0]
    assert "(no solution)" in out[1]


def test_bad_lab_toml_is_exit_2(lab_root: Path, capsys) -> None:
    write_lab(lab_root, "02-broken", toml="[lab\n")
    assert main("--root", str(lab_root), "list") == 2
    assert "not valid TOML" in capsys.readouterr().err


def test_unknown_lab_is_exit_2(lab_root: Path, capsys) -> None:
    assert main("--root", str(lab_root), "test", "9") == 2
    assert "no lab matches '9'" in capsys.readouterr().err


def test_usage_error_is_exit_2(capsys) -> None:
    with pytest.raises(SystemExit) as err:
        main("frobnicate")
    assert err.value.code == 2
    with pytest.raises(SystemExit) as err:
        main("skeleton")  # needs --check or --write
    assert err.value.code == 2


def test_grade_writes_reports(lab_root: Path, fake_machine, stand_in_reports, capsys, tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert main("--root", str(lab_root), "grade", "1", "--out", str(out), "-q") == 1
    captured = capsys.readouterr()
    assert "SUMMARY 80/100" in captured.out and captured.err == ""
    results = Results.load(out / "results.json")
    assert results.labs[0].failed == 1 and results.run.mode == "student"


def test_grade_default_out_is_reports(lab_root: Path, fake_machine, stand_in_reports) -> None:
    assert main("--root", str(lab_root), "grade", "-q") == 1
    assert stand_in_reports["written"] == lab_root / "reports"
    assert Path(stand_in_reports["root"]).resolve() == lab_root.resolve()  # exports show paths relative to it


def test_grade_solution(lab_root: Path, fake_machine, stand_in_reports, capsys) -> None:
    assert main("--root", str(lab_root), "grade", "--solution", "-q") == 0
    assert "SUMMARY 100/100" in capsys.readouterr().out
    assert fake_machine.built == ["lab01_solution"]


def test_test_verb_prints_results(lab_root: Path, fake_machine, capsys) -> None:
    assert main("--root", str(lab_root), "test", "add", "-q") == 1
    out = capsys.readouterr().out
    assert "FAIL    AddCorrectness.Small/257" in out and "hint: Only the last 3 elements are wrong. Check the ceil-div grid size" in out
    assert "4 passed, 1 failed, 0 skipped" in out


def test_progress_lines_without_tty(lab_root: Path, fake_machine, capsys) -> None:
    main("--root", str(lab_root), "test")
    err = capsys.readouterr().err
    assert "GPU: NVIDIA H200 (sm_90)" in err
    assert "building lab01_student" in err and "running lab01_student" in err


def test_build_verb(lab_root: Path, fake_machine, capsys) -> None:
    assert main("--root", str(lab_root), "build", "--all") == 0
    fake_machine.failures["lab01_student"] = "x.cu(3): error: expected a \";\"\n"
    assert main("--root", str(lab_root), "build", "01") == 3
    out = capsys.readouterr().out
    assert "FAILED  lab01_student" in out and "compile error" in out


def test_report_from_results(tmp_path: Path, stand_in_reports, capsys) -> None:
    source = tmp_path / "results.json"
    Results(run=RunInfo(started="2026-01-01T00:00:00+00:00")).save(source)
    assert main("report", "--from", str(source), "--out", str(tmp_path / "r")) == 0
    assert (tmp_path / "r" / "results.json").is_file()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "no such file"),
        ("{not json", "not valid JSON"),
        (json.dumps({"schema_version": 99}), "schema_version 99"),
        (json.dumps({"schema_version": 1, "run": {"nope": 1}}), "malformed"),
    ],
)
def test_report_from_corrupt_file_is_exit_2(tmp_path: Path, content, message, capsys) -> None:
    source = tmp_path / "results.json"
    if content is not None:
        source.write_text(content)
    assert main("report", "--from", str(source)) == 2
    err = capsys.readouterr().err
    assert "cannot read results" in err and message in err


def test_report_with_real_renderers(tmp_path: Path, lab_root: Path, fake_machine, capsys) -> None:
    pytest.importorskip("grader.report")
    pytest.importorskip("jinja2")
    assert main("--root", str(lab_root), "grade", "--out", str(tmp_path / "g"), "-q") == 1
    assert main("report", "--from", str(tmp_path / "g" / "results.json"), "--out", str(tmp_path / "again")) == 0
    assert (tmp_path / "again" / "report.html").is_file()


def test_skeleton_check_and_write(lab_root: Path, capsys) -> None:
    assert main("--root", str(lab_root), "skeleton", "--check") == 0
    student = lab_root / "labs" / "01-add" / "add.cu"
    student.write_text("int add(int a, int b) { return a + b; }\n")
    assert main("--root", str(lab_root), "skeleton", "--check") == 1
    out = capsys.readouterr().out
    assert "-int add(int a, int b) { return a + b; }" in out and "skeleton --write" in out
    assert main("--root", str(lab_root), "skeleton", "--write") == 0
    assert main("--root", str(lab_root), "skeleton", "--check") == 0


def test_skeleton_unbalanced_markers_is_exit_2(lab_root: Path, capsys) -> None:
    (lab_root / "solutions" / "01-add" / "add.cu").write_text("// BEGIN SOLUTION\nint x;\n")
    assert main("--root", str(lab_root), "skeleton", "--check") == 2
    assert "never closed" in capsys.readouterr().err


def test_doctor_brief(monkeypatch, capsys) -> None:
    monkeypatch.setattr(commands, "probe_gpu", lambda: GpuProbe(False, reason="no NVIDIA driver"))
    assert main("doctor", "--brief") == 0
    assert capsys.readouterr().out == "GPU: none (no NVIDIA driver) — GPU tests will be skipped\n"
    monkeypatch.setattr(commands, "probe_gpu", lambda: GPU)
    assert main("doctor", "--brief") == 0
    assert capsys.readouterr().out == "GPU: NVIDIA H200 (sm_90)\n"


def test_doctor_full(monkeypatch, capsys) -> None:
    monkeypatch.setattr(commands, "probe_gpu", lambda: GpuProbe(False, reason="no NVIDIA driver"))
    code = main("doctor")
    out = capsys.readouterr().out
    assert "GPU" in out and "nvcc" in out and "jinja2" in out
    assert code in (0, 4)
    assert ("missing:" in out) == (code == 4)


def test_doctor_reports_the_optional_grading_tools(monkeypatch, capsys) -> None:
    """compute-sanitizer and bubblewrap are optional: missing, each is a warning with its consequence."""
    from grader.host import toolkit

    monkeypatch.setattr(commands, "probe_gpu", lambda: GPU)
    monkeypatch.setattr(toolkit, "find_sanitizer", lambda: None)
    monkeypatch.setattr(toolkit, "find_bwrap", lambda: None)
    main("doctor")
    out = capsys.readouterr().out
    assert "warning  compute-sanitizer" in out and "reported as not run" in out
    assert "warning  bubblewrap (bwrap)" in out and "without a sandbox" in out
    missing = [line for line in out.splitlines() if line.startswith("missing:")]
    assert not any("sanitizer" in line or "bubblewrap" in line for line in missing)  # neither is required
    monkeypatch.setattr(toolkit, "find_sanitizer", lambda: "/usr/local/cuda/bin/compute-sanitizer")
    monkeypatch.setattr(toolkit, "find_bwrap", lambda: "/usr/bin/bwrap")
    main("doctor")
    out = capsys.readouterr().out
    assert "ok  compute-sanitizer    /usr/local/cuda/bin/compute-sanitizer" in out
    assert "ok  bubblewrap (bwrap)   /usr/bin/bwrap" in out


def test_fixture_round_trip_through_parse_and_results(tmp_path: Path) -> None:
    """Recorded gtest JSON -> TestResults -> results.json -> Results, unchanged."""
    from grader.execute import gtest
    from grader.model.results import LabResult

    tests = gtest.load_report(FIXTURES / "lab03_solution_pass.json").tests
    results = Results(run=RunInfo(started="x"), labs=[LabResult(3, "03-vector-add", "t", 100, tests=tests)])
    results.save(tmp_path / "r.json")
    assert Results.load(tmp_path / "r.json").to_dict() == results.to_dict()


def test_real_buggy_grade_renders_again(tmp_path: Path, stand_in_reports, capsys) -> None:
    """results.json of a real grade on an H200 (a lab 03 file with a segfault, a hang, an out-of-bounds
    write and a floor-divided grid) still loads and re-renders."""
    source = FIXTURES / "lab03_buggy_student_results.json"
    results = Results.load(source)
    by_cat = {t.category.value for t in results.labs[0].tests if t.category}
    assert {"crash", "timeout", "cuda_error", "wrong_answer"} <= by_cat
    assert main("report", "--from", str(source), "--out", str(tmp_path)) == 0


# --- where the lab tree is (grader/model/labs.py find_root) -------------------------------------------------------


def test_the_lab_tree_is_found_from_the_current_directory(lab_root: Path, monkeypatch, capsys) -> None:
    monkeypatch.delenv("CUDALAB_ROOT", raising=False)
    monkeypatch.chdir(lab_root / "labs" / "01-add")
    assert main("list") == 0
    assert capsys.readouterr().out.split()[:2] == ["01", "add"]


def test_cudalab_root_names_the_lab_tree(lab_root: Path, tmp_path_factory, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path_factory.mktemp("elsewhere"))
    monkeypatch.setenv("CUDALAB_ROOT", str(lab_root))
    assert main("list") == 0
    assert capsys.readouterr().out.split()[:2] == ["01", "add"]


def test_no_lab_tree_is_exit_2_and_says_how_to_name_one(tmp_path: Path, monkeypatch, capsys) -> None:
    from grader.model import labs

    monkeypatch.delenv("CUDALAB_ROOT", raising=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(labs, "PACKAGE_CHECKOUT", tmp_path)  # an installed grader sits in no checkout
    assert main("list") == 2
    assert "no lab tree in" in capsys.readouterr().err
    source = tmp_path / "results.json"  # a results.json renders anywhere
    Results(run=RunInfo(started="2026-01-01T00:00:00+00:00")).save(source)
    assert main("report", "--from", str(source), "--out", str(tmp_path / "r")) == 0


def test_doctor_names_cupti_which_lab_02_needs(monkeypatch, capsys, tmp_path: Path) -> None:
    """Lab 02's tests link CUPTI: a toolkit without it is a missing requirement that says so."""
    from grader.host import toolkit

    monkeypatch.setattr(commands, "probe_gpu", lambda: GPU)
    monkeypatch.setattr(toolkit, "toolkit_root", lambda: tmp_path)
    assert toolkit.find_cupti() is None
    main("doctor")
    out = capsys.readouterr().out
    assert "MISSING  CUPTI" in out and "lab 02 is not built" in out, out
    (tmp_path / "extras" / "CUPTI" / "include").mkdir(parents=True)
    (tmp_path / "extras" / "CUPTI" / "include" / "cupti.h").write_text("")
    (tmp_path / "extras" / "CUPTI" / "lib64").mkdir(parents=True)
    (tmp_path / "extras" / "CUPTI" / "lib64" / "libcupti.so").write_text("")
    assert toolkit.find_cupti() is not None
    main("doctor")
    assert f"ok  CUPTI                {tmp_path}/extras/CUPTI/lib64/libcupti.so" in capsys.readouterr().out
