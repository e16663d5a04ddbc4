"""A batch on a machine without a GPU, and a compile check (`batch --compile-only`): no row may look
like a real score, the class summary says so first, and the exit code tells a script (fake builds and
fake test binaries, as in test_batch.py)."""

from __future__ import annotations

import json
from pathlib import Path

from grader.host.environment import GpuProbe
from grader.model.errors import Exit
from grader.report.schemas import validate_class_gradebook
from grader.model.results import BuildResult, Results

from grader.tests.conftest import FakeBuilder, add_tests
from grader.tests.test_batch import SOLUTION, FakeSlot, batch, class_dir, fakes, gpu_aware_binary, gradebook  # noqa: F401

NO_GPU = GpuProbe(False, reason="no NVIDIA driver is installed on this machine")


class NoGpuPristine(FakeBuilder):
    """The pristine build of a machine without a GPU: its reference binaries skip every test."""

    def build(self, target: str) -> BuildResult:
        self.built.append(target)
        gpu_aware_binary(self.bin_dir / target, add_tests(), machine_gpu=False)
        return BuildResult(target=target, ok=True, seconds=0.1)


def no_gpu_machine(lab_root: Path, fakes: dict) -> None:
    """The fake machine loses its GPU: every test binary, the reference's too, skips its tests."""
    FakeSlot.machine_gpu = False
    fakes["main"] = NoGpuPristine(lab_root / "build" / "pristine")


def test_batch_without_a_gpu_grades_no_one(lab_root: Path, tmp_path: Path, fakes: dict) -> None:
    class_dir(tmp_path)
    no_gpu_machine(lab_root, fakes)
    out = tmp_path / "out"
    code, stdout, progress = batch(lab_root, fakes, tmp_path, "1", jobs=2, gpu=NO_GPU)
    assert code is Exit.ENVIRONMENT, progress

    # The reference (ada) and the skeleton (bob) alike: no score, the reason in the row.
    book = gradebook(out)
    for who in ("ada", "bob", "dan"):
        row = book[who]
        assert row["status"] == "not graded (no GPU)", (who, row)
        assert row["total"] == row["max_total"] == row["01-add"] == row["01-add:small"] == "", row
        assert row["notes"].startswith("not graded: no GPU (no NVIDIA driver is installed")
    # A compile error is a verdict on any machine: graded, 0.
    assert book["cat"]["status"] == "graded" and book["cat"]["total"] == "0"
    assert book["eve"]["status"] == "broken"
    assert validate_class_gradebook((out / "gradebook.csv").read_text()) == []

    # The class summary says it first: before the header, the score distribution or the roster.
    html = (out / "class-summary.html").read_text()
    assert html.index("Not graded: no GPU.") < html.index('<header class="top">')
    assert "3 of 5 submissions could not be graded" in html and "no NVIDIA driver is installed" in html
    assert "4 graded" not in html and "5 (1 graded, 3 not graded (no GPU), 1 broken)" in html

    # Each student's own reports: results.json says it, the report never shows 0 / 100.
    record = json.loads((out / "ada" / "results.json").read_text())
    assert record["grade"] == {"status": "not_graded", "reason": "no GPU", "labs": ["01-add"], "tests_not_run": 5}
    Results.load(out / "ada" / "results.json")  # still reads back
    report = (out / "ada" / "report.html").read_text()
    assert "not graded" in report and "0 / 100" not in report and "<small>/ 100</small>" not in report

    # stdout and the progress lines say it before anything else.
    assert stdout.startswith("NOT GRADED: no GPU (no NVIDIA driver is installed on this machine): 3 of 5")
    assert "mean 0 over 1 graded" in stdout  # cat alone: a compile error is a grade
    assert progress.lstrip().startswith("NOT GRADED: no GPU")
    assert "ada: not graded (no GPU)" in progress


def test_a_later_batch_with_a_gpu_grades_them_again(lab_root: Path, tmp_path: Path, fakes: dict) -> None:
    class_dir(tmp_path)
    main = fakes["main"]
    no_gpu_machine(lab_root, fakes)
    assert batch(lab_root, fakes, tmp_path, "1", gpu=NO_GPU)[0] is Exit.ENVIRONMENT
    again = batch(lab_root, fakes, tmp_path, "1", gpu=NO_GPU)  # still no GPU: nothing to do again
    assert again[0] is Exit.ENVIRONMENT and "0 processed now, 4 kept" in again[1]

    FakeSlot.machine_gpu = True
    fakes["main"] = main
    code, stdout, _ = batch(lab_root, fakes, tmp_path, "1")
    book = gradebook(tmp_path / "out")
    assert code is Exit.OK and "3 processed now, 1 kept" in stdout  # cat's compile error stands
    assert book["ada"]["status"] == "graded" and book["ada"]["total"] == "100"

    # A real grade is never thrown away by a later batch without a GPU.
    no_gpu_machine(lab_root, fakes)
    code, stdout, _ = batch(lab_root, fakes, tmp_path, "1", gpu=NO_GPU)
    assert code is Exit.OK and "0 processed now, 4 kept" in stdout
    assert gradebook(tmp_path / "out")["ada"]["total"] == "100"


def test_compile_only(lab_root: Path, tmp_path: Path, fakes: dict) -> None:
    """With a GPU on the machine, a compile check still runs no test: the binaries see no GPU."""
    class_dir(tmp_path)
    out = tmp_path / "out"
    code, stdout, progress = batch(lab_root, fakes, tmp_path, "1", compile_only=True)
    assert code is Exit.BUILD  # cat does not compile, eve is broken
    book = gradebook(out)
    assert book["ada"]["status"] == "compiled" and book["ada"]["01-add"] == "compiled"
    assert book["ada"]["total"] == book["ada"]["01-add:small"] == ""
    assert book["cat"]["status"] == "not compiled" and book["cat"]["01-add"] == "compile error"
    assert "01-add: compile error:" in book["cat"]["notes"]
    assert book["eve"]["status"] == "broken"
    assert validate_class_gradebook((out / "gradebook.csv").read_text()) == []
    assert fakes["reference_runs"] == []  # nothing was timed
    results = Results.load(out / "ada" / "results.json")
    assert results.labs[0].passed == 0 and results.run.notes[0].startswith("compile check only")
    html = (out / "class-summary.html").read_text()
    assert html.index("Compile check only") < html.index('<header class="top">')
    assert "3 of 5 submissions compiled and passed the static checks" in html
    assert stdout.startswith("compile check only: no test was run; 3 of 5")
    assert "cat: not compiled (01-add compile error)" in progress

    # A compile check never stands for a grade, nor a grade for a compile check.
    code, stdout, _ = batch(lab_root, fakes, tmp_path, "1")
    assert code is Exit.OK and "4 processed now, 0 kept" in stdout
    assert gradebook(out)["ada"]["total"] == "100"
    code, stdout, _ = batch(lab_root, fakes, tmp_path, "1", compile_only=True)
    assert "4 processed now, 0 kept" in stdout


def test_compile_only_exits_0_when_everything_compiles(lab_root: Path, tmp_path: Path, fakes: dict) -> None:
    for who in ("ada", "bob"):
        (tmp_path / "class" / who).mkdir(parents=True)
        (tmp_path / "class" / who / "add.cu").write_text(SOLUTION)
    no_gpu_machine(lab_root, fakes)
    code, stdout, _ = batch(lab_root, fakes, tmp_path, "1", compile_only=True, gpu=NO_GPU)
    assert code is Exit.OK and "2 of 2 submission(s) compiled" in stdout


def test_refused_file_is_reported_by_a_compile_check(lab_root: Path, tmp_path: Path, fakes: dict) -> None:
    (tmp_path / "class" / "mal" / "labs" / "01-add").mkdir(parents=True)
    (tmp_path / "class" / "mal" / "labs" / "01-add" / "add.cu").symlink_to("/etc/passwd")
    code, _, _ = batch(lab_root, fakes, tmp_path, "1", compile_only=True)
    row = gradebook(tmp_path / "out")["mal"]
    assert code is Exit.BUILD and row["status"] == "not compiled" and row["01-add"] == "refused"
    assert "01-add: refused:" in row["notes"] and "link" in row["notes"]


def test_cli_compile_only_flag(lab_root: Path, tmp_path: Path, monkeypatch) -> None:
    from grader.course.batch import runner as batch_mod
    from grader.cli import args as cli

    seen: dict = {}

    def fake_batch(root, batch_dir, out, labs, **kwargs):
        seen.update(kwargs, root=root, labs=labs)
        return Exit.OK

    monkeypatch.setattr(batch_mod, "cmd_batch", fake_batch)
    (tmp_path / "class").mkdir()
    argv = ["--root", str(lab_root), "batch", str(tmp_path / "class"), "1", "--out", str(tmp_path / "o")]
    assert cli.main([*argv, "--compile-only"]) == 0 and seen["compile_only"] is True and seen["labs"] == ["1"]
    assert cli.main(argv) == 0 and seen["compile_only"] is False
