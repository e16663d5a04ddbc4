"""The grade path end to end, with fake builds and fake test binaries (no cmake, no GPU)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from grader.host.environment import GpuProbe
from grader.model.errors import Exit
from grader.model.labs import discover
from grader.build.targets import binary_sets
from grader.grade.options import RunOptions
from grader.grade.pipeline import exit_code, run_labs
from grader.model.progress import Progress
from grader.model.results import Category, Results, Status

from grader.tests.conftest import (
    NO_GPU_REASON,
    NO_GPU_ROOT,
    FakeBuilder,
    add_tests,
    perf_properties,
    spec,
    write_lab,
)
from grader.tests.test_cmake import NVCC_ERROR

GPU = GpuProbe(True, "NVIDIA Fake", "9.0")
NO_GPU = GpuProbe(False, reason="no NVIDIA driver")


def run(root: Path, builder: FakeBuilder, gpu: GpuProbe = GPU, **options) -> Results:
    progress = Progress(stream=io.StringIO())
    return run_labs(root, discover(root), builder, gpu, RunOptions(**options), progress)


def solution_spec(impl_ms: float = 1.0, **extra) -> dict:
    tests = add_tests(impl_ms=impl_ms)
    tests.insert(0, {"name": "AddCorrectness.Small/1", "do": "segv"})  # never run: only perf tests are timed
    del tests[1]
    return spec(tests, **extra)


@pytest.fixture
def builder(lab_root: Path) -> FakeBuilder:
    return FakeBuilder(lab_root / "build" / "bin", {
        "lab01_student": spec(add_tests(impl_ms=1.0 / 0.7)),  # r = 0.7: half the perf points
        "lab01_solution": solution_spec(1.0),
    })


def test_student_grade(lab_root: Path, builder: FakeBuilder) -> None:
    results = run(lab_root, builder)
    assert builder.configured_labs == ["01-add"]
    assert builder.built == ["lab01_student", "lab01_solution"]
    lab = results.labs[0]
    assert [b.target for b in lab.builds] == ["lab01_student", "lab01_solution"]
    assert lab.passed == 5 and lab.failed == 0
    perf = next(t for t in lab.tests if t.kind == "perf").perf
    assert perf.reference is not None and perf.reference.median_ms == 1.0
    assert perf.ratio_to_reference == pytest.approx(0.7)
    assert perf.earned == pytest.approx(10.0)
    assert lab.score == pytest.approx(90.0) and lab.max_score == 100
    assert results.run.gpu_available and results.run.gpu["gpu_name"] == "NVIDIA Fake"
    assert results.run.started and results.run.finished and results.run.grader_version
    assert exit_code(results) is Exit.OK
    # results.json round-trips
    assert Results.from_dict(results.to_dict()).to_dict() == results.to_dict()


def test_failures_get_hints_and_exit_1(lab_root: Path, builder: FakeBuilder) -> None:
    builder.specs["lab01_student"] = spec(add_tests(fail_small=True))
    results = run(lab_root, builder)
    failed = [t for t in results.labs[0].tests if t.status is Status.FAILED]
    assert len(failed) == 1 and failed[0].category is Category.WRONG_ANSWER
    assert "ceil-div" in failed[0].hint
    assert results.labs[0].score == pytest.approx(80.0)
    assert exit_code(results) is Exit.TEST_FAILURES


def test_compile_error_in_one_lab_does_not_stop_another(lab_root: Path, builder: FakeBuilder) -> None:
    write_lab(lab_root, "02-more")
    builder.specs["lab02_student"] = spec(add_tests())
    builder.specs["lab02_solution"] = solution_spec()
    builder.failures["lab01_student"] = NVCC_ERROR
    results = run(lab_root, builder)
    broken, fine = results.labs
    assert builder.built == ["lab01_student", "lab01_solution", "lab02_student", "lab02_solution"]
    assert not broken.builds[0].ok and broken.builds[0].category is Category.COMPILE_ERROR
    # The expected tests come from the solution build and are all reported, not run.
    assert len(broken.tests) == 5 and all(t.status is Status.NOT_RUN for t in broken.tests)
    assert all(t.category is Category.COMPILE_ERROR for t in broken.tests)
    assert "identifier" in broken.tests[0].message and broken.tests[0].hint
    assert broken.score == 0 and any("did not build" in m for m in broken.messages)
    assert fine.passed == 5 and fine.score == 100
    assert exit_code(results) is Exit.BUILD


def test_no_gpu(lab_root: Path, builder: FakeBuilder) -> None:
    skip = [{"name": t["name"], "do": "skip", "reason": NO_GPU_REASON} for t in add_tests()]
    builder.specs["lab01_student"] = spec(skip, root=NO_GPU_ROOT)
    builder.specs["lab01_solution"] = spec(skip, root=NO_GPU_ROOT)
    results = run(lab_root, builder, NO_GPU)
    lab = results.labs[0]
    assert all(b.ok for b in lab.builds)
    assert lab.skipped == 5 and all(t.category is Category.NO_GPU for t in lab.tests)
    assert all(t.hint for t in lab.tests)
    assert not results.run.gpu_available
    assert results.run.gpu_reason == "no NVIDIA driver is installed on this machine"
    assert lab.score == 0
    assert exit_code(results) is Exit.ENVIRONMENT


def test_solution_mode(lab_root: Path, builder: FakeBuilder) -> None:
    builder.specs["lab01_solution"] = spec(add_tests(impl_ms=3.0))
    results = run(lab_root, builder, mode="solution")
    assert builder.built == ["lab01_solution"]
    lab = results.labs[0]
    assert results.run.mode == "solution"
    assert all(t.binary == "solution" for t in lab.tests)
    perf = next(t for t in lab.tests if t.perf).perf
    assert perf.ratio_to_reference == 1.0 and perf.earned == 20
    assert lab.score == 100 and exit_code(results) is Exit.OK


def test_student_crash_is_attributed(lab_root: Path, builder: FakeBuilder) -> None:
    tests = add_tests()
    tests[2] = {"name": "AddCorrectness.Large/1048576", "do": "segv"}
    builder.specs["lab01_student"] = spec(tests)
    lab = run(lab_root, builder).labs[0]
    crashed = next(t for t in lab.tests if t.category is Category.CRASH)
    assert crashed.name == "AddCorrectness.Large/1048576" and "SIGSEGV" in crashed.message
    assert lab.passed == 4
    assert any("re-run one by one" in m for m in lab.messages)


def test_lab_without_solution(tmp_path: Path) -> None:
    write_lab(tmp_path, solution=None)
    builder = FakeBuilder(tmp_path / "bin", {"lab01_student": spec(add_tests())})
    results = run(tmp_path, builder)
    lab = results.labs[0]
    assert builder.built == ["lab01_student"]
    assert lab.passed == 5
    assert any("no reference solution" in m for m in lab.messages)
    assert lab.score == 80  # perf points need a reference
    assert binary_sets(discover(tmp_path)[0])[0].reference is None


def test_hidden_tests_run_as_a_second_binary(lab_root: Path, builder: FakeBuilder) -> None:
    (lab_root / "solutions" / "01-add" / "test_hidden_add.cu").write_text("// hidden\n")
    hidden = [{"name": "AddHiddenCorrectness.Edge", "do": "pass"}]
    builder.specs["lab01_hidden_student"] = spec(hidden)
    builder.specs["lab01_hidden_solution"] = spec(hidden)
    lab = run(lab_root, builder).labs[0]
    # The binaries stage links the graded code's binaries, then the references stage the reference's.
    assert builder.built == ["lab01_student", "lab01_hidden_student", "lab01_solution", "lab01_hidden_solution"]
    edge = next(t for t in lab.tests if t.name == "AddHiddenCorrectness.Edge")
    assert edge.binary == "hidden" and edge.status is Status.PASSED


def test_no_build_uses_existing_binaries(lab_root: Path, builder: FakeBuilder) -> None:
    builder.build("lab01_student")
    builder.build("lab01_solution")
    builder.built.clear()
    results = run(lab_root, builder, build=False)
    assert builder.built == [] and not builder.configured
    assert results.labs[0].passed == 5 and results.labs[0].builds == []


def test_missing_binary_without_build(lab_root: Path, builder: FakeBuilder) -> None:
    results = run(lab_root, builder, build=False)
    lab = results.labs[0]
    assert lab.tests == [] and any("does not exist" in m for m in lab.messages)
    assert [b.ok for b in lab.builds] == [False, False]
    assert exit_code(results) is Exit.BUILD


def test_perf_reference_missing_when_solution_perf_is_skipped(lab_root: Path, builder: FakeBuilder) -> None:
    tests = add_tests()
    tests[-1] = {"name": "AddPerf.Fast/16777216", "do": "skip", "reason": "f is incorrect at this size: not timed"}
    builder.specs["lab01_solution"] = spec(tests)
    lab = run(lab_root, builder).labs[0]
    perf = next(t for t in lab.tests if t.perf).perf
    assert perf.reference is None and perf.earned == 0
    assert perf_properties(1.0)["impl.median_ms"] == "1.0"


def test_correctness_only_runs_no_perf_test(lab_root: Path, builder: FakeBuilder) -> None:
    """perf=False (the mutation gate): the perf tests are filtered out of the run and out of what the
    grader expects, the reference is not timed, and the report says it was not a full grade."""
    results = run(lab_root, builder, perf=False)
    lab = results.labs[0]
    assert [t.name for t in lab.tests if t.kind == "perf"] == []
    assert lab.passed == 4 and lab.failed == 0 and not any(t.status is Status.NOT_RUN for t in lab.tests)
    assert sum(t.perf_earned for t in lab.tasks) == 0
    assert lab.score == pytest.approx(80.0)  # every correctness point, no perf point
    assert any("correctness only" in n for n in results.run.notes)


# --- a student release: the reference shipped compiled (grader/authoring/release_reference.py) -------------


def _release_lab(root: Path, archs: list[int]) -> None:
    """A lab as a student release holds it: no solutions/, the reference as reference/01-add/*.so."""
    import json

    write_lab(root, solution=None)
    lib = root / "reference" / "01-add" / "liblab01_solution_code.so"
    lib.parent.mkdir(parents=True)
    lib.write_bytes(b"\x7fELF")  # never opened here: the fake binaries stand in for the linked tests
    (root / "reference" / "MANIFEST.json").write_text(json.dumps({"archs": archs, "libraries": {}}))


def test_a_release_times_its_compiled_reference(tmp_path: Path) -> None:
    """Issue 28: a student copy scores perf points as the instructor's tree does, with no solution source."""
    _release_lab(tmp_path, [80, 90])
    builder = FakeBuilder(tmp_path / "bin", {"lab01_student": spec(add_tests(impl_ms=1.0 / 0.7)),
                                             "lab01_solution": solution_spec(1.0)})
    bs = binary_sets(discover(tmp_path)[0])[0]
    assert bs.reference == "lab01_solution" and bs.compiled
    lab = run(tmp_path, builder).labs[0]
    assert builder.built == ["lab01_student", "lab01_solution"]
    perf = next(t for t in lab.tests if t.kind == "perf").perf
    assert perf.reference is not None and perf.reference.median_ms == 1.0
    assert perf.ratio_to_reference == pytest.approx(0.7) and perf.earned == pytest.approx(10.0)
    assert lab.score == pytest.approx(90.0)
    assert not any("reference" in m for m in lab.messages)


def test_a_release_does_not_grade_its_compiled_reference_in_solution_mode(tmp_path: Path) -> None:
    _release_lab(tmp_path, [90])
    builder = FakeBuilder(tmp_path / "bin", {"lab01_solution": solution_spec(1.0)})
    results = run(tmp_path, builder, mode="solution")
    assert builder.built == [] and results.labs[0].tests == []
    assert any("holds the reference compiled" in m for m in results.labs[0].messages)


def test_a_compiled_reference_for_another_gpu_says_which(tmp_path: Path) -> None:
    """The reference was compiled for sm_80 only and this GPU (the fake binaries' 9.0) has no code in it:
    its perf test fails, and the student reads why and what to ask for."""
    _release_lab(tmp_path, [80])
    failing = add_tests()
    failing[-1] = {"name": "AddPerf.Fast/16777216", "do": "fail",
                   "message": "CUDA error: no kernel image is available for execution on the device"}
    builder = FakeBuilder(tmp_path / "bin", {"lab01_student": spec(add_tests()), "lab01_solution": spec(failing)})
    lab = run(tmp_path, builder).labs[0]
    perf = next(t for t in lab.tests if t.kind == "perf").perf
    assert perf.reference is None and perf.earned == 0
    note = next(m for m in lab.messages if "compiled reference" in m)
    assert "machine code for sm_80, and this GPU is sm_90" in note and "--reference-archs 90" in note


def test_perf_tests_run_in_a_process_of_their_own(lab_root: Path, builder: FakeBuilder, tmp_path: Path) -> None:
    """The student's perf tests are timed in a fresh process, as the reference's are (issue 28: lab 11's
    quicksort ran 0.69x the reference after the correctness tests had used the device runtime)."""
    log = tmp_path / "runs.log"
    builder.specs["lab01_student"] = spec(add_tests(impl_ms=1.0), log=str(log))
    lab = run(lab_root, builder).labs[0]
    assert log.read_text().splitlines() == ["-*Perf.*", "*Perf.*"]
    assert [t.name for t in lab.tests] == [t["name"] for t in add_tests()]  # one run's order, as listed
    perf = next(t for t in lab.tests if t.kind == "perf")
    assert perf.status is Status.PASSED and perf.perf.ratio_to_reference == pytest.approx(1.0)
    # Correctness only (the mutation gate): one process, no perf test.
    log.unlink()
    run(lab_root, builder, perf=False)
    assert log.read_text().splitlines() == ["-*Perf.*"]


def test_a_failing_test_is_said_while_its_binary_still_runs(lab_root: Path, builder: FakeBuilder) -> None:
    """Issue 28: the first failure reaches the console as GoogleTest prints it, before the binary's summary
    line (a lab's correctness run can take a minute); a name the binary was not built with is not said."""
    tests = add_tests(fail_small=True)
    assert tests[0]["name"] == "AddCorrectness.Small/1"
    tests[0] = {"name": "AddCorrectness.Small/1", "do": "fail", "prints": "[  FAILED  ] Made.Up/1 (1 ms)"}
    builder.specs["lab01_student"] = spec(tests)
    stream = io.StringIO()
    run_labs(lab_root, discover(lab_root), builder, GPU, RunOptions(), Progress(stream=stream))
    lines = stream.getvalue().splitlines()
    said = [i for i, ln in enumerate(lines) if "failed (details when lab01_student is done)" in ln]
    summary = next(i for i, ln in enumerate(lines) if "lab01_student: " in ln and " passed, " in ln)
    assert [lines[i].strip() for i in said] == [
        "!! AddCorrectness.Small/1 failed (details when lab01_student is done)",
        "!! AddCorrectness.Small/257 failed (details when lab01_student is done)"]
    assert said[-1] < summary and "Made.Up" not in stream.getvalue()


def _with_huge(fail_small: bool) -> list[dict]:
    """The fake lab's tests with a plain TEST over 2^32 elements listed first, where GoogleTest runs it."""
    huge = {"name": "AddHugeCorrectness.FourBillion", "do": "fail", "message": "1712 item(s) wrong, the first at index 4294967296"}
    return [huge, *add_tests(fail_small=fail_small)]


def test_huge_inputs_run_after_the_other_correctness_tests(lab_root: Path, builder: FakeBuilder,
                                                           tmp_path: Path) -> None:
    """A lab's huge suite runs last, in a process of its own: the small failures that explain it come first
    (and reach the console first), and the mutation gate stops at them, not at the huge test."""
    log = tmp_path / "runs.log"
    builder.specs["lab01_solution"] = spec([{"name": "AddHugeCorrectness.FourBillion", "do": "pass"},
                                           *solution_spec(1.0)["tests"]])  # the tests to expect
    builder.specs["lab01_student"] = spec(_with_huge(fail_small=True), log=str(log))
    lab = run(lab_root, builder).labs[0]
    assert log.read_text().splitlines() == ["-*Perf.*:*HugeCorrectness.*", "*HugeCorrectness.*", "*Perf.*"]
    assert [t.name for t in lab.tests][:2] == ["AddCorrectness.Small/1", "AddCorrectness.Small/257"]
    assert lab.tests[-2].name == "AddHugeCorrectness.FourBillion" and lab.tests[-2].status is Status.FAILED
    # The gate (correctness only, stop at the first failure): the small failure decides; the huge run is
    # not started, and says why.
    log.unlink()
    gated = run(lab_root, builder, perf=False, stop_at_first_failure=True).labs[0]
    assert log.read_text().splitlines() == ["AddCorrectness.Small/*-*Perf.*:*HugeCorrectness.*"]  # task 1 only
    huge = next(t for t in gated.tests if t.name == "AddHugeCorrectness.FourBillion")
    assert huge.status is Status.NOT_RUN and "decides the mutation gate" in huge.message
    # Nothing small fails: the huge run still happens, and its failure is the one reported.
    log.unlink()
    builder.specs["lab01_student"] = spec(_with_huge(fail_small=False), log=str(log))
    gated = run(lab_root, builder, perf=False, stop_at_first_failure=True).labs[0]
    assert log.read_text().splitlines() == ["AddCorrectness.Small/*-*Perf.*:*HugeCorrectness.*",
                                            "AddCorrectness.Large/*-*Perf.*:*HugeCorrectness.*", "*HugeCorrectness.*"]
    assert [t.name for t in gated.tests if t.status is Status.FAILED] == ["AddHugeCorrectness.FourBillion"]


def test_the_gate_runs_task_by_task_in_the_rubrics_order(lab_root: Path, builder: FakeBuilder,
                                                         tmp_path: Path) -> None:
    """A plain TEST runs before every TEST_P in a binary, whatever its task. The gate stops at the first
    failure, so it runs each task in a process of its own, in the rubric's order: the failure it stops at is
    the one a student's report lists first (task 1's), not the later task's TEST that the binary runs first."""
    from grader.execute.lab_run import gate_passes
    from grader.model.labs import discover

    log = tmp_path / "runs.log"
    later = {"name": "AddCorrectness.Large/1048576", "do": "fail", "message": "wrong at index 3"}
    tests = [later, {"name": "Stray.NoTask", "do": "pass"},
             *[t for t in add_tests(fail_small=True) if t["name"] != later["name"]]]
    builder.specs["lab01_student"] = spec(tests, log=str(log))
    builder.specs["lab01_solution"] = spec([{**t, "do": "pass"} for t in tests])
    gated = run(lab_root, builder, perf=False, stop_at_first_failure=True).labs[0]
    assert log.read_text().splitlines() == ["AddCorrectness.Small/*-*Perf.*"]
    failed = [t.name for t in gated.tests if t.status is Status.FAILED]
    assert failed == ["AddCorrectness.Small/257"]  # task 1's, though the binary lists task 2's test first
    assert next(t for t in gated.tests if t.name == "AddCorrectness.Large/1048576").status is Status.NOT_RUN
    # The passes themselves: each task's, then the tests of no task, then the runs that followed.
    lab = discover(lab_root)[0]
    names = [t["name"] for t in tests]
    assert gate_passes(lab, names, ["-*Perf.*", "*Perf.*"]) == [
        "AddCorrectness.Small/*-*Perf.*", "AddCorrectness.Large/*-*Perf.*",
        "-*Perf.*:AddCorrectness.Small/*:AddCorrectness.Large/*", "*Perf.*"]
    assert gate_passes(lab, names, [None]) == ["AddCorrectness.Small/*", "AddCorrectness.Large/*",
                                               "-AddCorrectness.Small/*:AddCorrectness.Large/*"]
    assert gate_passes(lab, None, ["-*Perf.*"]) == ["-*Perf.*"]  # nothing known to split
    assert gate_passes(lab, ["Stray.NoTask"], ["-*Perf.*"]) == ["-*Perf.*"]


def test_each_binarys_peak_host_memory_is_recorded(lab_root: Path, builder: FakeBuilder) -> None:
    """What a lab's host memory limit is set from (issue 29): the most host memory each binary's confined runs
    held, per binary, in results.json beside the seconds."""
    lab = run(lab_root, builder).labs[0]
    if not lab.host_memory_mib:
        pytest.skip("runs are not confined here, so nothing counts their memory")
    assert set(lab.host_memory_mib) == {"run lab01_student"}
    assert 1 < lab.host_memory_mib["run lab01_student"] < 4096  # a Python stand-in: tens of MiB


def test_the_failure_watcher_reads_googletests_lines() -> None:
    from grader.execute.runs import failure_watcher

    said: list[str] = []
    watch = failure_watcher(["ScanCorrectness.Exclusive/4097", "Sort.Small"], said.append)
    for line in ["[ RUN      ] ScanCorrectness.Exclusive/4097",
                 "[  FAILED  ] ScanCorrectness.Exclusive/4097, where GetParam() = 4097 (3 ms)",
                 "[  FAILED  ] 2 tests, listed below:",
                 "[  FAILED  ] ScanCorrectness.Exclusive/4097, where GetParam() = 4097",  # the summary repeats it
                 "[  FAILED  ] Sort.Small (0 ms)", "[  FAILED  ] Not.Listed (0 ms)", "  [  FAILED  ] Sort.Other"]:
        watch(line)
    assert said == ["ScanCorrectness.Exclusive/4097", "Sort.Small"]
    anything: list[str] = []
    failure_watcher(None, anything.append)("[  FAILED  ] Any.Test/3 (1 ms)")
    assert anything == ["Any.Test/3"]


def test_the_gate_runs_a_tasks_sized_tests_before_its_plain_ones(tmp_path: Path) -> None:
    """Lab 02's 2^32-thread check is a plain TEST of the global-ids task, run before the task's TEST_Ps; the
    report lists the smallest failing input first, so the gate runs the task's TEST_Ps first, by name."""
    from grader.execute.lab_run import gate_passes
    from grader.model.labs import discover
    from grader.tests.conftest import LAB_TOML, write_lab

    write_lab(tmp_path, toml=LAB_TOML.replace('tests = ["AddCorrectness.Small/*"]',
                                              'tests = ["AddCorrectness.Small/*", "AddHuge.*"]'))
    lab = discover(tmp_path)[0]
    names = ["AddHuge.MoreThan2To32", "AddCorrectness.Small/1", "AddCorrectness.Small/257", "AddCorrectness.Large/9"]
    assert gate_passes(lab, names, ["-*Perf.*"]) == [
        "AddCorrectness.Small/1:AddCorrectness.Small/257", "AddHuge.MoreThan2To32", "AddCorrectness.Large/*-*Perf.*"]
