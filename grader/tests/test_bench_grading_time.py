"""bench/grading_time.py without a GPU: the stage timings a grade records, grouped into the table, and the
submission of references it grades as a student."""

from __future__ import annotations

import io
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import grading_time  # noqa: E402

from grader.execute import sanitizer  # noqa: E402
from grader.grade.options import RunOptions  # noqa: E402
from grader.grade.pipeline import run_labs  # noqa: E402
from grader.host.environment import GpuProbe  # noqa: E402
from grader.model.labs import discover  # noqa: E402
from grader.model.progress import Progress  # noqa: E402
from grader.tests.conftest import FakeBuilder, add_tests, spec  # noqa: E402


def test_a_grade_records_the_seconds_of_each_stage(lab_root: Path, monkeypatch) -> None:
    builder = FakeBuilder(lab_root / "build" / "bin", {"lab01_student": spec(add_tests()),
                                                       "lab01_solution": spec(add_tests())})
    monkeypatch.setattr(sanitizer, "find_sanitizer", lambda: None)
    results = run_labs(lab_root, discover(lab_root), builder, GpuProbe(True, "NVIDIA Fake", "9.0"), RunOptions(),
                       Progress(stream=io.StringIO()))
    seconds = results.labs[0].seconds
    assert list(seconds)[0] == "prepare" and "run lab01_student" in seconds and "score" in seconds
    assert "sanitize" in seconds  # the stage's wall time, beside each tool's (none here: no tool found)
    assert "reference lab01_solution" in seconds  # the reference timed beside the student's perf tests
    assert all(v >= 0 for v in seconds.values())
    assert results.to_dict()["labs"][0]["seconds"] == seconds  # in results.json


def test_the_table_groups_binaries_and_tools() -> None:
    results = {"run": {"gpu": {"gpu_name": "NVIDIA H200"}}, "labs": [
        {"name": "10-cooperative-groups", "seconds": {"prepare": 2.0, "run lab10_student": 3.0,
                                                     "run lab10_hidden_student": 1.0, "reference lab10_solution": 4.0,
                                                     "sanitizer.memcheck": 5.0, "sanitizer.racecheck": 6.0,
                                                     "score": 0.5}},
        {"name": "01-hello", "seconds": {"prepare": 1.0, "run lab01_student": 0.5},
         "host_memory_mib": {"run lab01_student": 310.4, "run lab01_hidden_student": 1290.0}},
    ]}
    text = grading_time.table(results, wall_s=30.0)
    head, _, row10, row01, total = text.splitlines()[:5]
    assert head.split() == ["lab", "prepare", "run", "student", "run", "hidden", "reference", "memcheck",
                            "racecheck", "score", "total"]
    assert row10.split() == ["10-cooperative-groups", "2.0", "3.0", "1.0", "4.0", "5.0", "6.0", "0.5", "21.5"]
    assert row01.split() == ["01-hello", "1.0", "0.5", "1.5"]
    assert total.split()[-1] == "23.0" and "NVIDIA H200" in text
    assert "7.0 s outside the labs' stages" in text
    assert text.splitlines()[-1] == "peak host memory of a test binary's runs, MiB: 01 1,290"


def test_the_sanitize_stage_counts_its_wall_time_not_its_tools_sum() -> None:
    """The tools run side by side: a lab's total takes the stage's wall time (sanitize), and each tool's
    column still says how long its own run took."""
    results = {"run": {"gpu": {"gpu_name": "NVIDIA H200"}}, "labs": [
        {"name": "05-tiled-matmul", "seconds": {"prepare": 7.0, "run lab05_student": 9.0, "sanitizer.memcheck": 1.1,
                                               "sanitizer.racecheck": 4.5, "sanitizer.synccheck": 1.1,
                                               "sanitize": 4.6, "score": 0.1}}]}
    text = grading_time.table(results, wall_s=21.0)
    row = text.splitlines()[2].split()
    assert row[0] == "05-tiled-matmul" and row[-1] == "20.7" and "4.6" in row
    assert "side by side" in text


def test_a_stage_beside_the_run_counts_nothing_of_its_own() -> None:
    """The sanitize stage ran beside the correctness tests: the run's seconds hold it (its later runs
    waited for the stage), so the total leaves out both the stage and its tools."""
    results = {"run": {"gpu": {"gpu_name": "NVIDIA H200"}}, "labs": [
        {"name": "05-tiled-matmul", "seconds": {"prepare": 7.0, "run lab05_student": 9.0, "sanitizer.memcheck": 1.1,
                                               "sanitizer.racecheck": 4.5, grading_time.SANITIZE_BESIDE: 4.6,
                                               "score": 0.1}}]}
    text = grading_time.table(results, wall_s=17.0)
    row = text.splitlines()[2].split()
    assert row[0] == "05-tiled-matmul" and row[-1] == "16.1" and "4.6" in row
    assert "beside the correctness tests" in text


def test_the_student_submission_holds_each_reference_file_in_its_lab(tmp_path: Path) -> None:
    where = grading_time.submission_of_references(ROOT, ["05", "11"], tmp_path / "sub")
    files = sorted(p.relative_to(where).as_posix() for p in where.rglob("*") if p.is_file())
    assert files == ["labs/05-tiled-matmul/matmul.cu", "labs/11-quicksort/quicksort.cu"]
    assert (where / files[0]).read_text() == (ROOT / "solutions" / "05-tiled-matmul" / "matmul.cu").read_text()


def test_a_grade_without_stage_seconds_is_tabled_from_its_tests() -> None:
    """An older grader's results.json: the tests' durations per binary and each tool's run."""
    lab = {"name": "11-quicksort", "tests": [
        {"name": "BlockSortCorrectness.Random/1", "binary": "student", "duration_s": 1.5},
        {"name": "QuicksortCorrectness.Random/1", "binary": "student", "duration_s": 2.0},
        {"name": "HiddenQuicksort.X/1", "binary": "hidden", "duration_s": 1.0},
        {"name": "sanitizer.racecheck", "binary": "student", "duration_s": 100.0}]}
    assert grading_time.columns(lab) == {"run student": 3.5, "run hidden": 1.0, "racecheck": 100.0}


def test_the_first_failure_is_read_from_the_console() -> None:
    line = "  !! ScanCorrectness.Tiles/4097 failed (details when lab07_student is done)"
    assert grading_time.FAILED_LINE.match(line).group(1) == "ScanCorrectness.Tiles/4097"
    assert grading_time.FAILED_LINE.match("  !! lab07_student: 3 passed, 2 failed, 0 skipped, 0 not run") is None
    assert grading_time.FAILED_LINE.match("  ok lab07_student: 5 passed") is None


def test_the_first_failure_grades_a_bug_of_the_last_task() -> None:
    """Its failure comes late in a grade: the worst case a student meets."""
    from grader.model.labs import select

    for number in ("05", "07", "11"):
        lab = select(discover(ROOT), [number])[0]
        bug = grading_time.last_task_bug(lab)
        assert bug is not None and bug.kind == "bug"
        tasks = [t.id for t in lab.tasks]
        from grader.authoring.mutation import load_mutants

        with_bugs = [t for t in tasks if any(m.task == t and m.kind == "bug" for m in load_mutants(lab))]
        assert bug.task == with_bugs[-1]


def test_the_first_failure_is_timed_in_a_whole_grade(tmp_path: Path) -> None:
    """The sanitizer stage starts beside the correctness tests: left out, the first failure would come
    sooner than a student sees it."""
    cmd = grading_time.first_failure_command("05-tiled-matmul", tmp_path / "sub", tmp_path / "report", "ci")
    assert cmd[1:6] == ["-m", "grader", "grade", "05", "--submission"] and "--sanitizer" not in cmd
    assert cmd[-2:] == ["--preset", "ci"] and "--reuse-reference" in cmd
    assert grading_time.first_failure_command("05-tiled-matmul", tmp_path, tmp_path, None)[-1] == "--reuse-reference"


def test_a_next_grade_starts_from_edited_files_and_a_first_from_no_kept_timing(tmp_path: Path) -> None:
    sub = tmp_path / "sub"
    (sub / "labs" / "05-tiled-matmul").mkdir(parents=True)
    (sub / "labs" / "05-tiled-matmul" / "matmul.cu").write_text("int x;\n")
    grading_time.touch_files(sub)
    assert (sub / "labs" / "05-tiled-matmul" / "matmul.cu").read_text() == "int x;\n\n// edited\n"
    kept = tmp_path / "build" / "default" / "bin" / ".lab05_solution.timings.json"
    kept.parent.mkdir(parents=True)
    kept.write_text("{}")
    (kept.parent / "lab05_solution").write_text("binary")
    assert grading_time.forget_reference_timings(tmp_path) == 1
    assert not kept.exists() and (kept.parent / "lab05_solution").exists()


def test_the_first_failure_edits_the_graded_submission_and_puts_it_back(tmp_path: Path, monkeypatch) -> None:
    """As a student's next grade: the bug goes into the submission graded before (its build configured),
    the console's first failure and the tests' start are timed, and the file is restored afterwards."""
    import argparse

    where = grading_time.submission_of_references(ROOT, ["05"], tmp_path / "sub")
    graded = where / "labs" / "05-tiled-matmul" / "matmul.cu"
    original = graded.read_text()
    seen: list[str] = []

    def fake_grade(lab: str, submission: Path, report: Path, preset: str | None) -> list[str]:
        assert submission == where  # the submission graded before, not a fresh folder
        seen.append(graded.read_text())
        script = "print('  .. building lab05_student'); print('  .. running lab05_student'); " \
                 "print('  !! MatmulCorrectness.Fast/m64_n1000_k16 failed (details when lab05_student is done)')"
        return [sys.executable, "-c", script]

    monkeypatch.setattr(grading_time, "first_failure_command", fake_grade)
    args = argparse.Namespace(root=ROOT, preset=None, labs=["05"])
    text = grading_time.first_failures(args, ["05"], tmp_path / "ff", where)
    assert len(seen) == 1 and seen[0] != original  # the bug was in the file while it was graded
    assert graded.read_text() == original  # and the reference is back
    row = [line for line in text.splitlines() if line.startswith("05-tiled-matmul")][0]
    assert "MatmulCorrectness.Fast/m64_n1000_k16" in row and "none said" not in row
    assert row.count(" s") >= 3  # tests start, first failure, whole grade
