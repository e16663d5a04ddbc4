"""Untrusted submissions: staging, the submission's build, bubblewrap, resource limits, report integrity,
the global time limit and the GPU health probe (no GPU, no nvcc). The include checks are in
test_includes.py, the object checks in test_objcheck.py, the supervisor in test_confine.py."""

from __future__ import annotations

import io
import json
import os
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from grader.execute import gtest
from grader.isolate import process
from grader.execute import runs
from grader.host.environment import GpuProbe
from grader.execute.health import HealthMonitor, default_cap_s
from grader.model.labs import discover
from grader.grade.options import RunOptions
from grader.grade.pipeline import exit_code, run_labs
from grader.model.progress import Progress
from grader.build.cmake import CMakeBuilder, failed_build
from grader.model.results import BuildResult, Category, Status
from grader.build.submission import SubmissionBuilder
from grader.intake.staging import MAX_FILE_BYTES, StagingError, stage_submission
from grader.isolate.bwrap import bwrap_prefix, probe_sandbox

from grader.tests.conftest import FIXTURES, FakeBuilder, add_tests, make_binary, spec

ROOT = Path(__file__).resolve().parents[2]
REAL_LABS = {lab.name: lab for lab in discover(ROOT)}
LAB03 = REAL_LABS["03-vector-add"]
GPU = GpuProbe(True, "NVIDIA Fake", "9.0")


def submission(tmp_path: Path, text: str = "int x;\n", name: str = "vector_add.cu") -> Path:
    sub = tmp_path / "sub"
    (sub / "labs" / LAB03.name).mkdir(parents=True)
    (sub / "labs" / LAB03.name / name).write_text(text)
    return sub


# --- staging -----------------------------------------------------------------------------------------


def test_stage_copies_only_student_files(tmp_path: Path) -> None:
    sub = submission(tmp_path, '#include "vector_add.cuh"\nint x;\n')
    (sub / "labs" / LAB03.name / "test_vector_add.cu").write_text("TEST(X, Y) {}\n")
    (sub / "labs" / LAB03.name / "CMakeLists.txt").write_text("message(FATAL_ERROR no)\n")
    staging = tmp_path / "staging"
    (staging / "labs" / "05-tiled-matmul").mkdir(parents=True)
    (staging / "labs" / "05-tiled-matmul" / "matmul.cu").write_text("stale")  # from an earlier submission
    staged = stage_submission([LAB03, REAL_LABS["05-tiled-matmul"]], sub, staging)
    lab = staged.lab(LAB03.name)
    assert lab.files == ["vector_add.cu"] and not lab.refused
    assert sorted(p.name for p in (staging / "labs" / LAB03.name).iterdir()) == ["vector_add.cu"]
    assert lab.ignored == ["labs/03-vector-add/CMakeLists.txt", "labs/03-vector-add/test_vector_add.cu"]
    assert any("ignored" in n for n in lab.notes())
    other = staged.lab("05-tiled-matmul")
    assert other.missing == ["matmul.cu"] and not (staging / "labs" / "05-tiled-matmul").exists()
    assert any("skeleton" in n for n in other.notes())


def test_stage_accepts_a_lab_directory_at_the_top(tmp_path: Path) -> None:
    sub = tmp_path / "sub"
    (sub / LAB03.name).mkdir(parents=True)
    (sub / LAB03.name / "vector_add.cu").write_text("int x;\n")
    staged = stage_submission([LAB03], sub, tmp_path / "staging")
    assert staged.lab(LAB03.name).files == ["vector_add.cu"]


def test_symlinks_are_refused(tmp_path: Path) -> None:
    sub = tmp_path / "sub"
    (sub / "labs" / LAB03.name).mkdir(parents=True)
    os.symlink("/etc/passwd", sub / "labs" / LAB03.name / "vector_add.cu")
    lab = stage_submission([LAB03], sub, tmp_path / "s1").lab(LAB03.name)
    assert lab.refused and lab.category is Category.COMPILE_ERROR and "symbolic link" in lab.errors[0]
    assert not (tmp_path / "s1" / "labs" / LAB03.name).exists()
    # A linked directory on the way counts the same.
    sub2 = tmp_path / "sub2"
    (sub2 / "labs").mkdir(parents=True)
    real = tmp_path / "elsewhere"
    real.mkdir()
    (real / "vector_add.cu").write_text("int x;\n")
    os.symlink(real, sub2 / "labs" / LAB03.name)
    lab2 = stage_submission([LAB03], sub2, tmp_path / "s2").lab(LAB03.name)
    assert lab2.refused and "symbolic link" in lab2.errors[0]


def test_non_regular_oversized_and_binary_files_are_refused(tmp_path: Path) -> None:
    sub = tmp_path / "sub"
    (sub / "labs" / LAB03.name).mkdir(parents=True)
    os.mkfifo(sub / "labs" / LAB03.name / "vector_add.cu")
    lab = stage_submission([LAB03], sub, tmp_path / "s").lab(LAB03.name)
    assert lab.refused and "not a regular file" in lab.errors[0]

    big = submission(tmp_path / "big", "/" * (MAX_FILE_BYTES + 1))
    lab = stage_submission([LAB03], big, tmp_path / "s").lab(LAB03.name)
    assert lab.refused and "larger than" in lab.errors[0] and lab.category is Category.COMPILE_ERROR

    binary = submission(tmp_path / "bin", "int x;\0\1\2")
    lab = stage_submission([LAB03], binary, tmp_path / "s").lab(LAB03.name)
    assert lab.refused and "not a text file" in lab.errors[0]

    d = submission(tmp_path / "dir", "x")
    (d / "labs" / LAB03.name / "vector_add.cu").unlink()
    (d / "labs" / LAB03.name / "vector_add.cu").mkdir()
    assert "not a regular file" in stage_submission([LAB03], d, tmp_path / "s").lab(LAB03.name).errors[0]


def test_staging_does_not_read_the_code(tmp_path: Path) -> None:
    """What a file includes is for the static checks, through the preprocessor: staging copies it as it is."""
    sub = submission(tmp_path, '#include "../../solutions/03-vector-add/vector_add.cu"\n')
    lab = stage_submission([LAB03], sub, tmp_path / "s").lab(LAB03.name)
    assert not lab.refused and lab.files == ["vector_add.cu"]


def test_submission_must_be_a_directory(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(StagingError):
        stage_submission([LAB03], tmp_path / "file", tmp_path / "s")
    with pytest.raises(StagingError):
        stage_submission([LAB03], tmp_path / "missing", tmp_path / "s")


# --- the submission's build --------------------------------------------------------------------------


def test_submission_builder_configures_its_own_directory(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("CUDALAB_SUBMISSION_BUILD_DIR", raising=False)
    b = SubmissionBuilder(tmp_path, "ci", 2, submission_dir=tmp_path / "stage1")
    assert b.build_dir == tmp_path / "build" / "ci-submission" and b.bin_dir == b.build_dir / "bin"
    cmd = b.configure_command(True, ["03-vector-add"])
    assert cmd[:3] == ["cmake", "--preset", "ci"] and "-G" in cmd
    assert "-B" in cmd and str(b.build_dir) in cmd and f"-DCUDALAB_SUBMISSION_DIR={tmp_path / 'stage1'}" in cmd
    assert b.cached_labs() is None
    b.build_dir.mkdir(parents=True)
    (b.build_dir / "CMakeCache.txt").write_text(
        f"CUDALAB_LABS:STRING=03-vector-add\nCUDALAB_SUBMISSION_DIR:PATH={tmp_path / 'stage1'}\n")
    assert b.cached_labs() == ["03-vector-add"]  # the same staging tree: nothing to configure
    assert "-G" not in b.configure_command(True, ["03-vector-add"])  # the generator stays as it was
    b2 = SubmissionBuilder(tmp_path, "ci", 2, submission_dir=tmp_path / "stage2")
    assert b2.cached_labs() is None  # a new staging tree: configure again
    monkeypatch.setenv("CUDALAB_SUBMISSION_BUILD_DIR", str(tmp_path / "elsewhere"))
    assert b2.build_dir == tmp_path / "elsewhere"


def test_submission_build_errors_name_the_students_paths(tmp_path: Path, monkeypatch) -> None:
    stage = tmp_path / "build" / "ci-batch-3-staging"
    b = SubmissionBuilder(tmp_path, "ci", 2, submission_dir=stage)
    log = f"{stage}/labs/03-vector-add/vector_add.cu(20): error: expected a \";\"\n"

    def failing(self, target: str, **limits) -> BuildResult:
        return failed_build(target, log)

    monkeypatch.setattr(CMakeBuilder, "build", failing)
    result = b.build("lab03_student")
    assert not result.ok and result.message == (
        'compile error: labs/03-vector-add/vector_add.cu(20): error: expected a ";"'
    )
    assert str(stage) not in result.log and "labs/03-vector-add/vector_add.cu(20)" in result.log
    monkeypatch.setattr(CMakeBuilder, "build", lambda self, target, **limits: BuildResult(target, ok=True, log=log))
    assert b.build("lab03_student").log == log  # a successful build's log is left as it was


# --- bubblewrap --------------------------------------------------------------------------------------


def test_bwrap_command_line(tmp_path: Path) -> None:
    cmd = bwrap_prefix("/usr/bin/bwrap", tmp_path)
    joined = " ".join(cmd)
    assert cmd[0] == "/usr/bin/bwrap" and cmd[-1] == "--"
    assert "--ro-bind / /" in joined and "--tmpfs /tmp" in joined and "--unshare-net" in joined
    assert f"--bind {tmp_path} {tmp_path}" in joined and "--die-with-parent" in joined
    assert joined.index("--tmpfs /tmp") < joined.index(f"--bind {tmp_path}")  # the results dir survives /tmp


def _script(path: Path, body: str) -> str:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def test_probe_sandbox(tmp_path: Path, monkeypatch) -> None:
    assert not probe_sandbox("off").active and "turned off" in probe_sandbox("off").reason
    monkeypatch.setattr("grader.isolate.bwrap.find_bwrap", lambda: None)
    assert "not installed" in probe_sandbox().reason
    broken = _script(tmp_path / "bwrap-broken", "echo 'bwrap: No permissions to create new namespace' >&2; exit 1\n")
    box = probe_sandbox(bwrap=broken)
    assert not box.active and "No permissions" in box.reason
    # A stand-in that runs what follows '--', as bubblewrap does.
    working = _script(tmp_path / "bwrap-ok", 'while [ "$1" != "--" ]; do shift; done; shift; exec "$@"\n')
    box = probe_sandbox(bwrap=working)
    assert box.active and box.wrapper(tmp_path)[0] == working


def test_runs_go_through_the_sandbox(tmp_path: Path, lab_root: Path) -> None:
    marker = tmp_path / "wrapped"
    working = _script(tmp_path / "bwrap-ok", f'touch {marker}; while [ "$1" != "--" ]; do shift; done; shift; exec "$@"\n')
    builder = FakeBuilder(lab_root / "build" / "bin", {"lab01_student": spec(add_tests()), "lab01_solution": spec(add_tests())})
    from grader.isolate import bwrap as sandbox

    original = sandbox.find_bwrap
    sandbox.find_bwrap = lambda: working  # type: ignore[assignment]
    try:
        results = run_labs(lab_root, discover(lab_root), builder, GPU, RunOptions(),
                           Progress(stream=io.StringIO()))
    finally:
        sandbox.find_bwrap = original  # type: ignore[assignment]
    assert results.run.sandboxed and marker.exists()
    assert results.labs[0].passed == 5


# --- resource limits ---------------------------------------------------------------------------------


def test_limits_apply_in_the_child() -> None:
    res = process.run(["sh", "-c", "ulimit -c; ulimit -f; ulimit -t; ulimit -n"], 5,
                      limits=process.Limits(cpu_s=7, file_bytes=512 * 1024))
    assert res.stdout.split() == ["0", "1024", "7", "4096"]
    free = process.run(["sh", "-c", "ulimit -c"], 5, limits=process.NO_LIMITS)
    assert free.returncode == 0


def test_file_size_limit_stops_a_writer(tmp_path: Path) -> None:
    process.run(["sh", "-c", f"head -c 200000 /dev/zero > {tmp_path}/big; echo done"], 10,
                      limits=process.Limits(file_bytes=65536))
    assert (tmp_path / "big").stat().st_size <= 65536


def test_cpu_limit_is_derived_from_the_timeout() -> None:
    assert process.Limits().cpu_for(10) == 50 and process.Limits(cpu_s=3).cpu_for(10) == 3


def test_nproc_margin() -> None:
    margin = process.nproc_margin(100)
    if os.getuid() == 0:
        assert margin is None  # root ignores RLIMIT_NPROC
    else:
        assert margin is not None and margin >= 100
    assert process.user_threads() >= 1


def test_wrapper_is_put_in_front(tmp_path: Path) -> None:
    wrapper = _script(tmp_path / "wrap", 'echo wrapped; exec "$@"\n')
    res = process.run(["echo", "inside"], 5, wrapper=[wrapper])
    assert res.stdout.split() == ["wrapped", "inside"] and res.argv == ["echo", "inside"]


def test_a_signal_through_the_wrapper_is_still_a_signal(tmp_path: Path) -> None:
    """bubblewrap's init ends with 128 + N when the program died of signal N (as a shell does): the
    student must still read "SIGSEGV", not "exit code 139"."""
    wrapper = _script(tmp_path / "wrap", '"$@"; exit $?\n')  # not exec: the shell reports 128 + N
    res = process.run(["sh", "-c", "kill -SEGV $$"], 5, wrapper=[wrapper])
    assert res.returncode == 139 and res.signal == 11 and res.signal_name == "SIGSEGV"
    plain = process.run(["sh", "-c", "exit 139"], 5)  # unwrapped, an exit code is an exit code
    assert plain.returncode == 139 and plain.signal is None


# --- results-file integrity -------------------------------------------------------------------------


def test_real_reports_pass_verification() -> None:
    for name in ("lab03_solution_pass.json", "lab03_student_fail.json", "lab03_student_no_gpu.json"):
        gtest.verify_report(json.loads((FIXTURES / name).read_text()))


@pytest.mark.parametrize("change, why", [
    (lambda d: d.update(tests=d["tests"] + 1), "claims"),
    (lambda d: d.update(failures=0), "failed tests"),
    (lambda d: d.pop("gpu_name"), "harness's properties"),
    (lambda d: d["testsuites"][0].update(tests=99), "claims 99"),
])
def test_forged_reports_fail_verification(change, why: str) -> None:
    data = json.loads((FIXTURES / "lab03_student_fail.json").read_text())
    change(data)
    with pytest.raises(gtest.GtestError, match=why):
        gtest.verify_report(data)


def test_a_forged_results_file_is_a_harness_failure(tmp_path: Path) -> None:
    """A binary that writes its own 'all passed' report (no harness properties) gets no credit."""
    forger = tmp_path / "forger"
    forger.write_text(f"""#!{sys.executable}
import json, sys
if "--gtest_list_tests" in sys.argv:
    print("S.\\n  A\\n  B")
    sys.exit(0)
out = next(a.split("json:", 1)[1] for a in sys.argv if a.startswith("--gtest_output="))
tests = [{{"name": n, "status": "RUN", "result": "COMPLETED", "time": "0s"}} for n in ("A", "B")]
json.dump({{"tests": 2, "failures": 0, "testsuites": [{{"name": "S", "tests": 2, "testsuite": tests}}]}}, open(out, "w"))
""")
    forger.chmod(0o755)
    run = runs.run_binary(forger, ["S.A", "S.B"], 5)
    assert [t.status for t in run.tests] == [Status.FAILED, Status.FAILED]
    assert all(t.category is Category.HARNESS and "not written by the test harness" in t.message for t in run.tests)
    unchecked = runs.run_binary(forger, ["S.A", "S.B"], 5, policy=runs.RunPolicy(verify=False))
    assert [t.status for t in unchecked.tests] == [Status.PASSED, Status.PASSED]


def test_the_report_comes_through_a_pipe(tmp_path: Path) -> None:
    """The binary is told to write its report to /proc/self/fd/N, a pipe the grader reads while it runs:
    there is no results file that it, or anything it leaves behind, could rewrite later."""
    seen = tmp_path / "argv"
    binary = tmp_path / "bin"
    binary.write_text(f'#!/bin/sh\necho "$@" >> {seen}\n')
    binary.chmod(0o755)
    first = runs.run_once(binary, 5)
    assert first.parsed is None and first.report_missing
    out = seen.read_text().split("json:")[1].split()[0]
    assert out.startswith("/proc/self/fd/")


# --- the global time limit, per-group timeouts, GPU health -------------------------------------------


def test_expired_deadline_runs_nothing(tmp_path: Path) -> None:
    binary = make_binary(tmp_path / "bin", spec([{"name": "S.A", "do": "pass"}]))
    policy = runs.RunPolicy(deadline=time.monotonic() - 1, cap_s=5)
    run = runs.run_binary(binary, ["S.A"], 5, policy=policy)
    assert run.tests[0].status is Status.NOT_RUN and run.tests[0].category is Category.TIMEOUT
    assert "global time limit (5 s)" in run.tests[0].message


def test_deadline_cuts_the_reruns(tmp_path: Path) -> None:
    tests = [{"name": "S.Hang", "do": "hang"}, {"name": "S.After", "do": "pass"}]
    binary = make_binary(tmp_path / "bin", spec(tests))
    start = time.monotonic()
    policy = runs.RunPolicy(deadline=time.monotonic() + 1.5, cap_s=1.5)
    run = runs.run_binary(binary, ["S.Hang", "S.After"], 10, policy=policy)
    assert time.monotonic() - start < 6
    assert {t.name: t.category for t in run.tests} == {"S.Hang": Category.TIMEOUT, "S.After": Category.TIMEOUT}
    assert all(t.status is Status.NOT_RUN for t in run.tests)


def test_a_hanging_parameterized_test_does_not_stop_the_others(tmp_path: Path) -> None:
    tests = [{"name": f"S.Loop/{i}", "do": "hang"} for i in range(4)] + [{"name": "S.Other/1", "do": "pass"}]
    binary = make_binary(tmp_path / "bin", spec(tests))
    run = runs.run_binary(binary, [t["name"] for t in tests], 0.8)
    results = {t.name: t for t in run.tests}
    assert run.reran == ["S.Loop/0", "S.Loop/1", "S.Other/1"]
    assert results["S.Loop/0"].status is Status.FAILED and results["S.Loop/0"].category is Category.TIMEOUT
    assert results["S.Loop/2"].status is Status.NOT_RUN and "other parameters timed out" in results["S.Loop/2"].message
    assert results["S.Other/1"].status is Status.PASSED


def test_health_probe_after_a_fault_stops_later_runs(tmp_path: Path) -> None:
    tests = [{"name": "S.A", "do": "pass"}, {"name": "S.Crash", "do": "segv"}, {"name": "S.B", "do": "pass"}]
    binary = make_binary(tmp_path / "bin", spec(tests))
    calls: list[str] = []

    def on_fault(after: str) -> str | None:
        calls.append(after)
        return f"GPU unhealthy after {after}" if after == "S.Crash" else None

    run = runs.run_binary(binary, ["S.A", "S.Crash", "S.B"], 5, on_fault=on_fault)
    results = {t.name: t for t in run.tests}
    assert calls == ["the full run of bin", "S.Crash"]
    assert results["S.A"].status is Status.PASSED and results["S.Crash"].category is Category.CRASH
    assert results["S.B"].status is Status.NOT_RUN and "GPU unhealthy after S.Crash" in results["S.B"].message


def test_health_monitor_retries_then_gives_up(tmp_path: Path) -> None:
    counter = tmp_path / "count"
    flaky = _script(tmp_path / "probe", f'echo x >> {counter}; [ $(wc -l < {counter}) -ge 2 ]\n')
    monitor = HealthMonitor(lambda: Path(flaky), retry_wait_s=0)
    assert monitor.check("S.A") is None and monitor.checks == 2  # failed once, then worked
    broken = _script(tmp_path / "broken", "echo 'cudaErrorDevicesUnavailable' >&2; exit 4\n")
    monitor = HealthMonitor(lambda: Path(broken), retry_wait_s=0)
    why = monitor.check("S.Crash")
    assert why and "GPU unhealthy after S.Crash" in why and "cudaErrorDevicesUnavailable" in why
    assert monitor.check("anything") == why  # stays unhealthy without probing again
    assert HealthMonitor(lambda: Path(broken), gpu_available=False).check("x") is None
    missing = HealthMonitor(lambda: None)
    assert missing.check("x") is None and missing.notes


def test_default_cap() -> None:
    assert default_cap_s([300, 600]) == 3600 + 900


# --- the pipeline with its guard -----------------------------------------------------------------------


def _grade(lab_root: Path, builder: FakeBuilder, options: RunOptions, gpu: GpuProbe = GPU):
    return run_labs(lab_root, discover(lab_root), builder, gpu, options, Progress(stream=io.StringIO()))


@pytest.fixture
def builder(lab_root: Path) -> FakeBuilder:
    return FakeBuilder(lab_root / "build" / "bin", {"lab01_student": spec(add_tests()), "lab01_solution": spec(add_tests())})


def test_refused_submission_is_a_clear_failure(lab_root: Path, builder: FakeBuilder, tmp_path: Path) -> None:
    lab = discover(lab_root)[0]
    sub = tmp_path / "sub"
    (sub / "labs" / lab.name).mkdir(parents=True)
    os.symlink("/etc/passwd", sub / "labs" / lab.name / "add.cu")
    staged = stage_submission([lab], sub, tmp_path / "staging")
    results = _grade(lab_root, builder, RunOptions(staged=staged))
    res = results.labs[0]
    assert builder.built == ["lab01_solution"]  # the student target is never built
    assert {t.status for t in res.tests} == {Status.NOT_RUN}
    assert {t.category for t in res.tests} == {Category.COMPILE_ERROR}
    assert "symbolic link" in res.tests[0].message and res.tests[0].hint
    assert any("refused" in m for m in res.messages) and res.score == 0
    assert exit_code(results) == 1


def test_a_static_refusal_stops_the_run(lab_root: Path, builder: FakeBuilder, monkeypatch) -> None:
    from grader.inspect import static_checks
    from grader.model.block import Block

    def refuse(lab, sources, build_dir, mode, progress):
        why = "the lab file was refused: exit: ends the process or runs code at its end"
        return static_checks.Inspection(block=Block(Category.FORBIDDEN_CALL, why, why))

    monkeypatch.setattr(static_checks, "inspect", refuse)
    builder.specs["lab01_student"] = spec([{"name": t["name"], "do": "segv"} for t in add_tests()])  # never runs
    results = _grade(lab_root, builder, RunOptions())
    res = results.labs[0]
    assert "lab01_student" not in builder.built  # never built, never run
    assert {t.category for t in res.tests} == {Category.FORBIDDEN_CALL}
    assert "exit: ends the process" in res.tests[0].message and res.tests[0].hint
    assert {t.status for t in res.tests} == {Status.NOT_RUN}


def test_global_cap_marks_remaining_labs_not_run(tmp_path: Path) -> None:
    from grader.tests.conftest import write_lab

    write_lab(tmp_path, "01-add")
    write_lab(tmp_path, "02-add")
    builder = FakeBuilder(tmp_path / "build" / "bin", {
        "lab01_student": spec([{"name": "AddCorrectness.Small/1", "do": "hang"}]),
        "lab01_solution": spec([{"name": "AddCorrectness.Small/1", "do": "pass"}]),
        "lab02_student": spec([{"name": "AddCorrectness.Small/1", "do": "pass"}]),
        "lab02_solution": spec([{"name": "AddCorrectness.Small/1", "do": "pass"}]),
    })
    make_binary(builder.bin_dir / "lab02_solution", builder.specs["lab02_solution"])  # built earlier: its list is known
    start = time.monotonic()
    results = _grade(tmp_path, builder, RunOptions(max_seconds=1.5))
    assert time.monotonic() - start < 10
    first, second = results.labs
    assert first.tests[0].category is Category.TIMEOUT
    assert second.tests and second.tests[0].status is Status.NOT_RUN and "global time limit" in second.tests[0].message
    assert any("global time limit" in m for m in second.messages)
    assert "lab02_student" not in builder.built


def test_gpu_unhealthy_after_a_crash_stops_the_grade(lab_root: Path, builder: FakeBuilder, tmp_path: Path) -> None:
    builder.bin_dir.mkdir(parents=True, exist_ok=True)
    probe = builder.bin_dir / "cudalab_health_probe"
    count = tmp_path / "probes"  # healthy after the first (full) run, broken after the crash's own re-run
    probe.write_text(f"#!/bin/sh\necho x >> {count}\n[ $(wc -l < {count}) -le 1 ] || {{ echo 'no device' >&2; exit 3; }}\n")
    probe.chmod(0o755)
    tests = add_tests()
    tests[1] = {"name": tests[1]["name"], "do": "segv"}
    builder.specs["lab01_student"] = spec(tests)
    from grader.execute import health

    monkey = health.RETRY_WAIT_S
    health.RETRY_WAIT_S = 0
    try:
        results = _grade(lab_root, builder, RunOptions(health=True))
    finally:
        health.RETRY_WAIT_S = monkey
    res = results.labs[0]
    by = {t.name: t for t in res.tests}
    assert by["AddCorrectness.Small/257"].category is Category.CRASH
    later = [t for t in res.tests if t.status is Status.NOT_RUN]
    assert later and all("GPU unhealthy" in t.message for t in later)
    assert any("GPU unhealthy" in n for n in results.run.notes)


def test_what_a_run_reads_under_tmp_is_bound_back(tmp_path: Path) -> None:
    """A checkout in /tmp (a CI workspace, a copy made for a long GPU run): the private /tmp would hide
    the test binary and the grader, so what the run reads is bound back read-only, before the writable
    folder (which may lie inside it). Paths outside /tmp are visible already."""
    tree = tmp_path / "checkout"
    bins, runs = tree / "build" / "bin", tree / "build" / "runs" / "cudalab-run-x"
    bins.mkdir(parents=True)
    runs.mkdir(parents=True)
    cmd = bwrap_prefix("/usr/bin/bwrap", runs, keep=[tree / "build", bins, "/usr", tmp_path / "gone"])
    joined = " ".join(cmd)
    real = os.path.realpath(tree / "build")
    assert f"--ro-bind {real} {real}" in joined
    assert f"--ro-bind {os.path.realpath(bins)}" not in joined  # inside one already bound
    assert "--ro-bind /usr /usr" not in joined and "gone" not in joined
    assert joined.index("--tmpfs /tmp") < joined.index(f"--ro-bind {real}") < joined.index(f"--bind {runs}")
    assert "--ro-bind /tmp /tmp" not in bwrap_prefix("/usr/bin/bwrap", runs, keep=["/tmp"])  # never the whole /tmp


def test_runs_tell_the_sandbox_what_they_read(tmp_path: Path) -> None:
    seen: list[list[str]] = []

    def sandbox(workdir: Path, keep) -> list[str]:
        seen.append([str(k) for k in keep])
        return []

    (tmp_path / "bin").mkdir()
    binary = _script(tmp_path / "bin" / "fake_tests", "exit 0\n")
    runs.launch(Path(binary), [], 5, policy=runs.RunPolicy(sandbox=sandbox), exec_roots=["/opt/tool"])
    keep = seen[0]
    assert str(tmp_path / "bin") in keep and "/opt/tool" in keep
    assert str(Path(runs.__file__).resolve().parents[1]) in keep  # the grader (isolate/confine.py)


def _linked_binary(tmp_path: Path) -> Path:
    """bin/app, linked to lib/libcode.so by RUNPATH: how a lab's test binary finds its code library."""
    if shutil.which("cc") is None or shutil.which("readelf") is None:
        pytest.skip("no C compiler or readelf here")
    (tmp_path / "lib").mkdir()
    (tmp_path / "bin").mkdir()
    (tmp_path / "code.c").write_text("int answer(void) { return 42; }\n")
    (tmp_path / "app.c").write_text('#include <stdio.h>\nint answer(void);\n'
                                    'int main(void) { printf("answer %d\\n", answer()); return 0; }\n')
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(tmp_path / "lib" / "libcode.so"), str(tmp_path / "code.c")],
                   check=True)
    subprocess.run(["cc", "-o", str(tmp_path / "bin" / "app"), str(tmp_path / "app.c"), f"-L{tmp_path / 'lib'}",
                    "-lcode", f"-Wl,-rpath,{tmp_path / 'lib'}", "-Wl,--enable-new-dtags"], check=True)
    return tmp_path / "bin" / "app"


def test_runs_keep_the_libraries_the_binary_loads(tmp_path: Path) -> None:
    """A lab's test binary loads its code from build/<preset>/lib (RUNPATH): under bubblewrap with the
    checkout in /tmp, a run that kept only bin/ ended 'error while loading shared libraries' (exit 127)
    on the GPU. The RUNPATH's folders are kept, $ORIGIN expanded."""
    binary = _linked_binary(tmp_path)
    assert runs.library_dirs(binary) == [tmp_path / "lib"]
    seen: list[list[str]] = []

    def sandbox(workdir: Path, keep) -> list[str]:
        seen.append([str(k) for k in keep])
        return []

    runs.launch(binary, [], 5, policy=runs.RunPolicy(sandbox=sandbox))
    assert str(tmp_path / "lib") in seen[0]
    origin = tmp_path / "origin"
    origin.mkdir()
    subprocess.run(["cc", "-o", str(origin / "app"), str(tmp_path / "app.c"), f"-L{tmp_path / 'lib'}", "-lcode",
                    "-Wl,-rpath,$ORIGIN/../lib"], check=True)
    assert runs.library_dirs(origin / "app") == [origin / ".." / "lib"]


def test_a_real_bubblewrap_runs_a_linked_binary_under_tmp(tmp_path: Path) -> None:
    box = probe_sandbox()
    if not box.active:
        pytest.skip(f"no working bubblewrap here: {box.reason}")
    binary = _linked_binary(tmp_path)
    run = runs.launch(binary, [], 10, policy=runs.RunPolicy(sandbox=box.wrapper))
    assert run.proc.returncode == 0, run.proc.output
    assert "answer 42" in run.proc.output


def test_a_real_bubblewrap_runs_a_binary_that_lives_under_tmp(tmp_path: Path) -> None:
    box = probe_sandbox()
    if not box.active:
        pytest.skip(f"no working bubblewrap here: {box.reason}")
    (tmp_path / "bin").mkdir()
    binary = _script(tmp_path / "bin" / "fake_tests", 'echo "ran in $PWD"; touch here; ls /tmp | wc -l\n')
    run = runs.launch(Path(binary), [], 10, policy=runs.RunPolicy(sandbox=box.wrapper))
    lines = run.proc.stdout.split("\n")
    assert run.proc.returncode == 0 and lines[0].startswith("ran in ") and "cudalab-run-" in lines[0], run.proc.output
    assert int(lines[1]) <= 2  # the private /tmp holds only what was bound back (the checkout, the run folder)
