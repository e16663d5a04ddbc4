"""The adversarial submissions (grader/tests/adversarial/): the GPU-free ones graded end to end with the
real command line, CMake and nvcc; the GPU ones checked for being well-formed and for getting past the
static checks (so that only running them can tell them apart). ci/gpu-check runs them all on a GPU."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import pytest

from grader.host.toolkit import find_nvcc
from grader.host.environment import choose_preset, probe_gpu
from grader.model.labs import discover
from grader.model.results import Category, Status
from grader.intake.staging import stage_submission

from grader.tests.adversarial import runner
from grader.tests.compile_helpers import BUILD, compile_like_cmake, static_findings

ROOT = runner.ROOT
CASES = runner.load_cases()
GPU_FREE = [c for c in CASES if not c.needs_gpu]
GPU_CASES = [c for c in CASES if c.needs_gpu]
LABS = {lab.name: lab for lab in discover(ROOT)}
CATEGORIES = {c.value for c in Category}
STATUSES = {s.value for s in Status}


def _toolchain() -> str:
    """Why the end-to-end cases cannot run here ('' when they can)."""
    for tool in ("cmake", "nm"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    if find_nvcc() is None:
        return "nvcc is not installed"
    return ""


@pytest.fixture(scope="module")
def machine() -> dict:
    why = _toolchain()
    if why:
        pytest.skip(f"the adversarial submissions are built with CMake and nvcc: {why}")
    gpu = probe_gpu()
    preset = choose_preset(gpu)
    # A build directory of their own, reused across cases and runs: the test object compiles once.
    return {"gpu": gpu.available, "preset": preset,
            "env": {"CUDALAB_SUBMISSION_BUILD_DIR": str(ROOT / "build" / f"{preset}-adversarial")}}


def test_every_case_is_well_formed() -> None:
    assert len(CASES) >= 40 and GPU_FREE and GPU_CASES
    assert len({c.lab for c in CASES}) >= 6  # spread over the labs, not lab 03 alone
    for case in CASES:
        assert case.description and case.how and case.expects, case.name
        for e in case.expects:
            assert e.test or e.lab_message or e.unsaid, case.name
            assert not e.category or e.category in CATEGORIES, (case.name, e.category)
            assert not e.status or e.status in STATUSES, (case.name, e.status)
            assert e.match in ("any", "all"), case.name
        lab = runner.case_lab(case)
        source = case.dir / "labs" / lab.name / lab.student_files[0]
        patch = runner.patch_of(case)
        assert source.is_symlink() or source.is_file() or patch.is_file() or case.generate, case.name
        assert case.patch_base in ("solution", "skeleton"), case.name


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_case_materializes_with_its_fault(case: runner.Case, tmp_path: Path) -> None:
    """Each patch still applies to its lab as it is now, and changes the file it starts from."""
    lab = runner.case_lab(case)
    submission = runner.materialize(case, tmp_path / "submission")
    student = submission / "labs" / lab.name / lab.student_files[0]
    assert student.is_symlink() or student.is_file(), case.name
    if runner.patch_of(case).is_file():
        base_dir = lab.solution_dir if case.patch_base == "solution" else lab.path
        assert student.read_text() != (base_dir / lab.student_files[0]).read_text(), case.name


def test_patch_that_no_longer_fits_fails_loudly() -> None:
    base = "a\nb\nc\nd\n"
    patch = "--- x\n+++ y\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n"
    assert runner.apply_patch(base, patch, "t") == "a\nB\nc\nd\n"
    with pytest.raises(runner.PatchError, match="no longer matches"):
        runner.apply_patch("a\nx\nc\n", patch, "t")


@pytest.mark.parametrize("case", GPU_FREE, ids=[c.name for c in GPU_FREE])
def test_gpu_free_case_is_classified(case: runner.Case, machine: dict, tmp_path: Path) -> None:
    submission = runner.materialize(case, tmp_path / "submission")
    out = tmp_path / "out"
    graded = runner.grade(case, submission, out, preset=machine["preset"], env=machine["env"])
    checks = runner.check(case, graded, machine["gpu"])
    failed = [f"{c.expectation.describe()}: got {c.got}" for c in checks if not c.ok]
    assert not failed, "\n".join(failed) + "\n--- grader output ---\n" + graded.log[-4000:]
    assert graded.missing_reports == [], graded.missing_reports
    assert graded.returncode in (1, 3), graded.log[-2000:]
    assert runner.cap_respected(case, graded)
    # Nothing of the submission beyond its student file reached the staged build.
    assert graded.results is not None and graded.results["run"]["submission"] == str(submission)


@pytest.mark.parametrize("case", GPU_CASES, ids=[c.name for c in GPU_CASES])
def test_gpu_case_passes_the_static_checks(case: runner.Case, tmp_path: Path) -> None:
    """A GPU case must be caught by running it, not before: it stages, compiles, and the static checks
    (includes through the preprocessor, the allowlists over the object) find nothing to refuse."""
    lab = runner.case_lab(case)
    submission = runner.materialize(case, tmp_path / "submission")
    staged = stage_submission([lab], submission, tmp_path / "staging")
    s = staged.lab(lab.name)
    assert s is not None and not s.refused and s.files == [lab.student_files[0]], s
    if find_nvcc() is None or shutil.which("objdump") is None:
        pytest.skip("nvcc and binutils are needed to compile the case")
    if BUILD is None:
        pytest.skip("the contract comes from the built test objects: build the labs first (make test does)")
    source = staged.path_of(lab, lab.student_files[0])
    obj, log = compile_like_cmake(lab, source, tmp_path / "obj")
    assert obj is not None, log
    assert static_findings(lab, source, obj) == []


def test_run_gpu_without_gpu_skips_gpu_cases(tmp_path: Path, monkeypatch, capsys) -> None:
    from grader.host import environment

    monkeypatch.setattr(environment, "probe_gpu", lambda: environment.GpuProbe(False, reason="no NVIDIA driver"))
    code = runner.main([str(tmp_path / "adv"), "include-solution", "race"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "race" in out and "skipped: no GPU" in out
    assert "include-solution" in out and "forbidden_call" in out and "| ok" in out
    assert (tmp_path / "adv" / "include-solution" / "results.json").is_file()
    assert (tmp_path / "adv" / "summary.txt").is_file()


def test_runner_check_semantics() -> None:
    case = runner.Case("x", ROOT, "d", False, expects=[
        runner.Expectation(test="S.A/*", category="timeout"),
        runner.Expectation(test="S.B", status="passed", match="all"),
        runner.Expectation(test="S.Gone", absent=True),
        runner.Expectation(lab_message="ignored"),
        runner.Expectation(test="S.C", category="crash", gpu=True),
    ])
    results = {"labs": [{"number": 3, "messages": ["ignored (only ...)"], "tests": [
        {"name": "S.A/1", "status": "failed", "category": "timeout", "message": ""},
        {"name": "S.A/2", "status": "passed", "category": None, "message": ""},
        {"name": "S.B", "status": "passed", "category": None, "message": ""},
    ]}]}
    graded = runner.Graded(1, 1.0, results, "", [])
    checks = runner.check(case, graded, gpu=False)
    assert [c.ok for c in checks] == [True, True, True, True]
    assert len(runner.check(case, graded, gpu=True)) == 5 and not runner.check(case, graded, gpu=True)[-1].ok
    wrong = runner.Graded(1, 1.0, {"labs": []}, "", [])
    assert not any(c.ok for c in runner.check(case, wrong, gpu=False))


def test_console_is_quiet_about_internal_paths() -> None:
    """The cases name what they plant in a header comment, so a report reader can tell them apart."""
    for case in CASES:
        lab = runner.case_lab(case)
        source = case.dir / "labs" / lab.name / lab.student_files[0]
        if source.is_file() and not source.is_symlink():
            assert "ADVERSARIAL CASE" in io.StringIO(source.read_text()).readline(), case.name
