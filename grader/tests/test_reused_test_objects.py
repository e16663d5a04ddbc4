"""A submission's build links the pristine build's test objects (cmake/CudaLab.cmake's
CUDALAB_TEST_OBJECTS_FROM, grader/build/submission.py): a first grade compiles the student's file only,
not the test translation unit as well (issue 28: the cold build was two thirds of a first grade)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from grader.build.cmake import CMakeBuilder, failed_build
from grader.model.results import Category
from grader.build.stages import Builders, build_test_objects
from grader.build.cmake import cached_variable
from grader.build.submission import SubmissionBuilder, dirs_with_test_objects
from grader.model.labs import discover
from grader.model.progress import Progress

REPO = Path(__file__).resolve().parents[2]


def test_the_submission_build_is_configured_to_link_the_pristine_objects(tmp_path: Path) -> None:
    pristine = tmp_path / "build" / "ci"
    b = SubmissionBuilder(tmp_path, "ci", 2, submission_dir=tmp_path / "stage", reuse_from=pristine)
    assert f"-DCUDALAB_TEST_OBJECTS_FROM={pristine}" in b.configure_command(True, ["03-vector-add"])
    b.build_dir.mkdir(parents=True)
    cache = b.build_dir / "CMakeCache.txt"
    cache.write_text(f"CUDALAB_LABS:STRING=03-vector-add\nCUDALAB_SUBMISSION_DIR:PATH={tmp_path / 'stage'}\n"
                     f"CUDALAB_TEST_OBJECTS_FROM:PATH={pristine}\n")
    assert b.cached_labs() == ["03-vector-add"]
    assert cached_variable(b.build_dir, "CUDALAB_TEST_OBJECTS_FROM") == str(pristine)
    assert dirs_with_test_objects(b.build_dir) == [b.build_dir, pristine]
    # A build configured to compile its own (or from another tree) is configured again.
    assert SubmissionBuilder(tmp_path, "ci", 2, submission_dir=tmp_path / "stage",
                             reuse_from=tmp_path / "other").cached_labs() is None
    cache.write_text(f"CUDALAB_LABS:STRING=03-vector-add\nCUDALAB_SUBMISSION_DIR:PATH={tmp_path / 'stage'}\n")
    assert b.cached_labs() is None and dirs_with_test_objects(b.build_dir) == [b.build_dir]


class _Recording(CMakeBuilder):
    def __init__(self, root: Path, name: str, calls: list[tuple[str, tuple[str, ...]]], fails: bool = False) -> None:
        super().__init__(root, name)
        self.calls = calls
        self.fails = fails

    def run_build(self, *targets: str, jobs: int | None = None, **limits) -> tuple[int, str]:
        self.calls.append((self.preset, targets))
        return (1, "test_add.cu(3): error: identifier \"x\" is undefined") if self.fails else (0, "")


def test_the_test_objects_build_in_the_pristine_tree_first(lab_root: Path) -> None:
    """`grade --submission`: the pristine build makes the objects, then the submission's build (a no-op
    there where it links them). A batch built the pristine tree before any slot: only the slot's."""
    lab = discover(lab_root)[0]
    calls: list[tuple[str, tuple[str, ...]]] = []
    main, code = _Recording(lab_root, "main", calls), _Recording(lab_root, "code", calls)
    build_test_objects([lab], Builders(main=main, code=code), Progress())
    assert [c[0] for c in calls] == ["main", "code"] and calls[0][1] == ("lab01_tests",)
    calls.clear()
    build_test_objects([lab], Builders(main=main, code=code, main_built=True), Progress())
    assert [c[0] for c in calls] == ["code"]
    calls.clear()
    build_test_objects([lab], Builders(main=main, code=main), Progress())  # no submission: one build
    assert [c[0] for c in calls] == ["main"]
    # The pristine build's test objects did not build: said, not blamed on the student.
    broken = _Recording(lab_root, "main", calls, fails=True)
    notes = build_test_objects([lab], Builders(main=broken, code=code), Progress())
    assert notes[lab.name] and "did not build in the pristine tree" in notes[lab.name][0]


def test_a_submissions_pristine_builds_run_beside_its_compile(lab_root: Path) -> None:
    """The pristine tree's test objects and the reference's link wait on nothing of the student's file:
    they build in a thread while the submission's screen and compile run, and their progress lines are
    said, in order, when the grade joins them (before the inspection reads the test objects)."""
    import io
    import threading

    from grader.grade.prepare import _PristineAhead

    lab = discover(lab_root)[0]
    calls: list[tuple[str, tuple[str, ...]]] = []
    met = threading.Barrier(2, timeout=20)

    class Pristine(_Recording):
        def run_build(self, *targets: str, jobs: int | None = None, **limits) -> tuple[int, str]:
            if targets == ("lab01_tests",):
                met.wait()  # returns only while the grade's own thread waits at the barrier too
            return super().run_build(*targets, jobs=jobs, **limits)

    main, code = Pristine(lab_root, "main", calls), _Recording(lab_root, "code", calls)
    out = io.StringIO()
    with _PristineAhead([lab], [lab], Builders(main=main, code=code)) as ahead:
        met.wait()  # the grade's thread (its compile) while the pristine build runs: both at once
        notes, refs = ahead.result(Progress(stream=out, color=False))
    assert notes == {lab.name: []} and refs is not None and refs["lab01_solution"].ok
    assert calls == [("main", ("lab01_tests",)), ("main", ("lab01_solution",))]
    assert out.getvalue().splitlines() == ["  .. building lab01_solution", "  ok built lab01_solution (0.0 s)"]
    # A grade in place (the pristine build is the graded one): nothing ahead, the references come later.
    calls.clear()
    with _PristineAhead([lab], [lab], Builders(main=code, code=code)) as ahead:
        notes, refs = ahead.result(Progress(stream=io.StringIO()))
    assert refs is None and calls == []


def test_a_grade_in_place_links_its_binaries_and_references_at_once(lab_root: Path) -> None:
    """One build folder: the student's binaries and the reference's in one CMake call; a submission's
    (two folders) one after the other, each in its own."""
    from grader.build.stages import build_links

    lab = discover(lab_root)[0]
    calls: list[tuple[str, tuple[str, ...]]] = []
    main, code = _Recording(lab_root, "main", calls), _Recording(lab_root, "code", calls)
    linked, refs = build_links([lab], [lab], Builders(main=main, code=main), Progress(quiet=True))
    assert calls == [("main", ("lab01_student", "lab01_solution"))]
    assert linked["lab01_student"].ok and refs["lab01_solution"].ok
    calls.clear()
    linked, refs = build_links([lab], [lab], Builders(main=main, code=code), Progress(quiet=True))
    assert calls == [("code", ("lab01_student",)), ("main", ("lab01_solution",))]
    calls.clear()
    linked, refs = build_links([], [lab], Builders(main=main, code=main), Progress(quiet=True))  # refused
    assert linked == {} and calls == [("main", ("lab01_solution",))]


def test_a_missing_pristine_object_is_the_graders_problem() -> None:
    log = ("ninja: error: '/c/build/ci/labs/07-scan/CMakeFiles/lab07_tests.dir/test_scan.cu.o', needed by "
           "'bin/lab07_student', missing and no known rule to make it\n")
    built = failed_build("lab07_student", log)
    assert built.category is Category.HARNESS and built.message.startswith("the grader's own build is incomplete")


def _pristine() -> Path | None:
    """The build `make test-labs` made of every lab (build/ci without a GPU), with its test objects."""
    for preset in ("ci", "default"):
        d = REPO / "build" / preset
        if (d / "test-objects" / "lab01_tests.cmake").is_file() and any(
                (d / "labs" / "01-hello" / "CMakeFiles" / "lab01_tests.dir").glob("*.o")):
            return d
    return None


def _configured(tmp_path: Path, lab: str, file: str) -> tuple[SubmissionBuilder, Path]:
    """A submission of the lab's skeleton file, its build configured in tmp_path/b to link the pristine
    build's test objects: (the builder, the pristine build). Skips the calling test without that build
    (a mark on this helper would not: pytest reads marks of tests only)."""
    pristine = _pristine()
    if pristine is None or shutil.which("cmake") is None:
        pytest.skip("needs the build of every lab that make test-labs makes (build/ci) and cmake")
    stage = tmp_path / "stage" / "labs" / lab
    stage.mkdir(parents=True)
    shutil.copy(REPO / "labs" / lab / file, stage / file)
    b = SubmissionBuilder(REPO, pristine.name, 2, submission_dir=tmp_path / "stage", directory=tmp_path / "b",
                          reuse_from=pristine)
    b.configure([lab])
    return b, pristine


def test_a_real_submission_build_compiles_only_the_students_file(tmp_path: Path) -> None:
    b, pristine = _configured(tmp_path, "01-hello", "hello.cu")
    tests = b.build("lab01_tests")  # the grader still names it: a no-op target here
    built = b.build("lab01_student")
    assert tests.ok and built.ok, built.log
    assert "lab01_student_object" in built.log and "lab01_tests.dir" not in built.log, built.log
    assert (tmp_path / "b" / "bin" / "lab01_student").is_file()
    assert dirs_with_test_objects(tmp_path / "b") == [tmp_path / "b", pristine]
    # Compiled differently (another architecture): the build compiles its own test objects.
    other = SubmissionBuilder(REPO, pristine.name, 2, submission_dir=tmp_path / "stage", directory=tmp_path / "o",
                              reuse_from=pristine)
    command = other.configure_command(False, ["01-hello"]) + ["-DCMAKE_CUDA_ARCHITECTURES=80"]
    import subprocess

    configured = subprocess.run(command, cwd=REPO, capture_output=True, text=True, check=False)
    assert configured.returncode == 0, configured.stdout + configured.stderr
    assert "lab01_tests: compiled in this build" in configured.stdout


@pytest.mark.skipif(_pristine() is None or shutil.which("cmake") is None
                    or not (REPO / "build" / "ci" / "test-objects" / "lab11_tests.cmake").is_file(),
                    reason="needs the build of every lab that make test-labs makes (build/ci) and cmake")
def test_a_relocatable_device_code_lab_reuses_the_test_objects_too(tmp_path: Path) -> None:
    """Lab 11's file needs relocatable device code (dynamic parallelism), its tests do not: a submission's
    build links the pristine test objects and compiles (and device-links) only the student's file; its
    test binary is linked without a device link of its own (45.9 s of a first grade on the H200 before)."""
    b, _ = _configured(tmp_path, "11-quicksort", "quicksort.cu")
    built = b.build("lab11_student")
    assert built.ok, built.log
    assert "lab11_student_object" in built.log and "lab11_tests.dir" not in built.log, built.log
    assert "cmake_device_link" not in built.log.split("lab11_student_code")[-1], built.log
    assert (tmp_path / "b" / "bin" / "lab11_student").is_file()
