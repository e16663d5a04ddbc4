"""The compute-sanitizer stage: runs through a stand-in tool, points, and the stage inside the grade
pipeline (no GPU needed). Its reports' parsing: test_sanitizer_logs.py."""

from __future__ import annotations

import io
import shlex
import stat
import threading
import time
from pathlib import Path

import pytest

from grader.execute import sanitizer, sanitizer_log
from grader.host.environment import GpuProbe

from grader.score import penalties
from grader.model.labs import discover
from grader.grade.options import RunOptions
from grader.grade.pipeline import run_labs
from grader.model.progress import Progress
from grader.model.results import Category, LabResult, Status

from grader.tests.conftest import FakeBuilder, add_tests, spec
from grader.tests.test_sanitizer_logs import INLINED, LOGS

GPU = GpuProbe(True, "NVIDIA Fake", "9.0")


def _tool(path: Path, log: str | None, code: int = 0, sleep: float = 0.0) -> str:
    """A stand-in compute-sanitizer: writes LOG to --log-file, maybe sleeps, exits with CODE."""
    body = ['log=""', 'while [ $# -gt 0 ]; do case "$1" in --log-file) log="$2"; shift;; esac; shift; done']
    if log is not None:
        body.append(f"cat {shlex.quote(str(LOGS / log))} > \"$log\"")
    if sleep:
        body.append(f"sleep {sleep}")
    body.append(f"exit {code}")
    path.write_text("#!/bin/sh\n" + "\n".join(body) + "\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def test_run_tool_reports_findings(tmp_path: Path) -> None:
    tool = _tool(tmp_path / "cs", "memcheck_oob.log", sanitizer.ERROR_EXITCODE)
    run = sanitizer.run_tool(tool, "memcheck", Path("/bin/true"), 10)
    r = run.result
    assert r.name == "sanitizer.memcheck" and r.status is Status.FAILED and r.category is Category.SANITIZER
    assert "reported 256 error(s)" in r.message and "oob_kernel at probe.cu:4" in r.message
    assert r.properties["sanitizer_kernel"] == "oob_kernel" and r.properties["sanitizer_location"] == "probe.cu:4"


def test_run_tool_names_the_kernel_and_the_inlined_function(tmp_path: Path) -> None:
    (tmp_path / "inlined.log").write_text(INLINED)
    tool = tmp_path / "cs-inlined"
    tool.write_text(_stand_in(tmp_path / "inlined.log", attached="true").replace("exit 1", f"exit {sanitizer.ERROR_EXITCODE}"))
    tool.chmod(0o755)
    r = sanitizer.run_tool(str(tool), "memcheck", Path("/bin/true"), 10, own_files=["scan.cu"]).result
    assert r.status is Status.FAILED and "in decoupled_scan_kernel<false, 256, 4> at scan.cu:512" in r.message
    assert r.properties["sanitizer_location"] == "scan.cu:512"
    assert r.properties["sanitizer_kernels"] == \
        "cuda::std::__4::__cuda_atomic_store<unsigned long>>decoupled_scan_kernel<false, 256, 4>"


def test_what_the_tool_cannot_watch_is_a_note_not_a_finding(tmp_path: Path) -> None:
    """racecheck on a program with dynamic parallelism warns that it does not support it (and then watches
    no kernel at all, as probed on an H200), and counts that warning in its summary and exit code: the run
    passes, with a note that says its silence proves nothing."""
    log = ("========= COMPUTE-SANITIZER\n"
           "========= Warning: CUDA Dynamic Parallelism is not supported by the selected tool\n"
           "========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)\n"
           "========= ERROR SUMMARY: 1 error\n")
    assert sanitizer_log.parse_log(log, "racecheck") == ([], 1)
    assert sanitizer_log.unsupported(log) == ["CUDA Dynamic Parallelism"]
    (tmp_path / "cdp.log").write_text(log)
    tool = tmp_path / "cs-cdp"
    tool.write_text(_stand_in(tmp_path / "cdp.log", attached="true").replace("exit 1", f"exit {sanitizer.ERROR_EXITCODE}"))
    tool.chmod(0o755)
    r = sanitizer.run_tool(str(tool), "racecheck", Path("/bin/true"), 10).result
    assert r.status is Status.PASSED, r.message
    assert r.properties["sanitizer_unsupported"] == "CUDA Dynamic Parallelism" and "could not check" in r.message
    assert "proves nothing" in r.message and "checked the rest" not in r.message
    # A real race beside the warning still fails.
    race = log.replace("RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)",
                       "Error: Race reported between Write access at k()+0x10 in a.cu:3\n"
                       "=========     and Read access at k()+0x20 in a.cu:4 [2 hazards]\n"
                       "========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)")
    (tmp_path / "cdp.log").write_text(race)
    r = sanitizer.run_tool(str(tool), "racecheck", Path("/bin/true"), 10).result
    assert r.status is Status.FAILED and "Shared-memory race" in r.message


def _stand_in(log: Path, attached: str) -> str:
    """A compute-sanitizer stand-in: copies log to --log-file and writes a harness-like report that
    echoes the run's nonce, with sanitizer_attached as given."""
    report = ('{"tests": 0, "failures": 0, "testsuites": [], "gpu_name": "x", "small_mode": "true", '
              f'"sanitizer_attached": "{attached}", "run_nonce": "\'"$CUDALAB_RUN_NONCE"\'"}}')
    return (f'#!/bin/sh\nwhile [ $# -gt 0 ]; do [ "$1" = --log-file ] && cp {log} "$2"; '
            f'case "$1" in --gtest_output=json:*) echo \'{report}\' > "${{1#--gtest_output=json:}}";; esac; shift; done\n'
            'exit 1\n')


def test_run_tool_clean_timeout_and_no_verdict(tmp_path: Path) -> None:
    clean = tmp_path / "clean.log"
    clean.write_text("========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n")
    tool = tmp_path / "cs-clean"
    tool.write_text(_stand_in(clean, attached="true"))  # tests failing under the tool are not its business: exit 1
    tool.chmod(0o755)
    assert sanitizer.run_tool(str(tool), "racecheck", Path("/bin/true"), 10).result.status is Status.PASSED
    # The harness must have seen the tool attached (and small mode on): a report that says otherwise was
    # not written under the tool the grader asked for.
    unwatched = tmp_path / "cs-unwatched"
    unwatched.write_text(_stand_in(clean, attached="false"))
    unwatched.chmod(0o755)
    r = sanitizer.run_tool(str(unwatched), "racecheck", Path("/bin/true"), 10).result
    assert r.status is Status.NOT_RUN and "no verdict" in r.message and "was not attached" in r.message
    slow = _tool(tmp_path / "cs-slow", None, 0, sleep=5)
    r = sanitizer.run_tool(slow, "racecheck", Path("/bin/true"), 0.5).result
    assert r.status is Status.NOT_RUN and r.category is Category.TIMEOUT and "did not finish within 0.5 s" in r.message
    dead = _tool(tmp_path / "cs-dead", None, 139)
    r = sanitizer.run_tool(dead, "memcheck", Path("/bin/true"), 10).result
    assert r.status is Status.NOT_RUN and r.category is Category.HARNESS and "no verdict" in r.message
    # A clean log but no results file: the program never ran its tests (a missing binary, say).
    quiet = tmp_path / "cs-quiet"
    quiet.write_text(f'#!/bin/sh\nwhile [ $# -gt 0 ]; do [ "$1" = --log-file ] && cp {clean} "$2"; shift; done\nexit 0\n')
    quiet.chmod(0o755)
    r = sanitizer.run_tool(str(quiet), "memcheck", Path("/bin/true"), 10).result
    assert r.status is Status.NOT_RUN and "no verdict" in r.message


def test_a_program_that_crashes_under_the_tool_is_no_finding(tmp_path: Path) -> None:
    """The H200 gate: host crashes (lab 04's pitch bugs, lab 09's stream index) made memcheck say only
    "Error: process didn't terminate successfully", which read as a finding of 0 errors, topped the
    report and hid the crash's own hint. It is no verdict now, and no finding."""
    log = tmp_path / "died.log"
    log.write_text("========= COMPUTE-SANITIZER\n========= Error: process didn't terminate successfully\n"
                   "========= No CUDA-MEMCHECK results found\n========= ERROR SUMMARY: 0 errors\n")
    tool = tmp_path / "cs-died"
    tool.write_text(f'#!/bin/sh\nwhile [ $# -gt 0 ]; do [ "$1" = --log-file ] && cp {log} "$2"; shift; done\n'
                    f"exit {sanitizer.ERROR_EXITCODE}\n")
    tool.chmod(0o755)
    assert sanitizer_log.parse_log(log.read_text(), "memcheck") == ([], 0)
    r = sanitizer.run_tool(str(tool), "memcheck", Path("/bin/true"), 10).result
    assert r.status is Status.NOT_RUN and r.category is Category.CRASH
    assert "crashed under the tool" in r.message and "sanitizer_kernel" not in r.properties


def test_sanitizer_argv_and_small_mode() -> None:
    argv = sanitizer.sanitizer_argv("cs", "memcheck", Path("/x/log"))
    assert argv[:3] == ["cs", "--tool", "memcheck"] and "--log-file" in argv and "--report-api-errors" in argv
    assert "--report-api-errors" not in sanitizer.sanitizer_argv("cs", "racecheck", Path("/x/log"))
    assert sanitizer.CORRECTNESS_FILTER == "-*Perf.*"


def test_tools_for() -> None:
    labs = {lab.name: lab for lab in discover(Path(__file__).resolve().parents[2])}
    assert sanitizer.tools_for(labs["05-tiled-matmul"]) == ["memcheck", "racecheck", "synccheck"]
    assert sanitizer.tools_for(labs["03-vector-add"]) == ["memcheck"]  # issue 12: memcheck in every lab
    assert all("memcheck" in sanitizer.tools_for(lab) for lab in labs.values())
    assert sanitizer.tools_for(labs["03-vector-add"], ["racecheck", "bogus"]) == ["racecheck"]


def test_apply_points() -> None:
    from grader.model.labs import Lab

    lab = Lab(number=1, slug="x", path=Path("."), root=Path("."), title="x", student_files=("x.cu",), timeout_s=1,
              tasks=(), perf=(), sanitizer={"tools": ["memcheck", "racecheck"], "points": 10})
    result = LabResult(number=1, name="01-x", title="x", max_score=90, score=50)
    tests = sanitizer.not_run(["memcheck"], "why") + sanitizer.not_run(["racecheck"], "why")
    tests[0].status, tests[1].status = Status.PASSED, Status.FAILED
    penalties.apply_points(lab, result, tests)
    task = result.tasks[-1]
    assert task.id == "sanitizer" and task.points == 10 and task.earned == 5
    assert result.max_score == 100 and result.score == 55 and all(t.task == "sanitizer" for t in tests)


# --- the stage in the pipeline -------------------------------------------------------------------------


def _grade(lab_root: Path, builder: FakeBuilder, gpu: GpuProbe, tools: list[str]):
    options = RunOptions(sanitizer_tools=tools)
    return run_labs(lab_root, discover(lab_root), builder, gpu, options, Progress(stream=io.StringIO()))


@pytest.fixture
def builder(lab_root: Path) -> FakeBuilder:
    return FakeBuilder(lab_root / "build" / "bin", {"lab01_student": spec(add_tests()), "lab01_solution": spec(add_tests())})


def test_stage_runs_each_tool(lab_root: Path, builder: FakeBuilder, tmp_path: Path, monkeypatch) -> None:
    tool = _tool(tmp_path / "cs", "racecheck_warning.log", sanitizer.ERROR_EXITCODE)
    monkeypatch.setattr(sanitizer, "find_sanitizer", lambda: tool)
    lab = _grade(lab_root, builder, GPU, ["racecheck"]).labs[0]
    race = next(t for t in lab.tests if t.name == "sanitizer.racecheck")
    assert race.status is Status.FAILED and race.category is Category.SANITIZER
    assert "intra_warp_race_kernel" in race.message and "__syncthreads()" in race.hint
    assert lab.passed == 5  # the correctness tests are untouched


def test_in_the_gate_after_a_tool_runs_out_of_time_the_others_are_not_run(lab_root: Path, builder: FakeBuilder,
                                                                          tmp_path: Path, monkeypatch) -> None:
    """The mutation gate runs the tools one after another: a kernel that hangs under one tool (a spin-wait
    that needs blocks to run side by side, say) hangs under the next as well, so one timeout, not three."""
    slow = _tool(tmp_path / "cs-slow", None, 0, sleep=5)
    monkeypatch.setattr(sanitizer, "find_sanitizer", lambda: slow)
    options = RunOptions(sanitizer_tools=["memcheck", "racecheck", "synccheck"], timeout_s=0.3,
                         stop_at_first_failure=True)
    start = time.monotonic()
    lab = run_labs(lab_root, discover(lab_root), builder, GPU, options, Progress(stream=io.StringIO())).labs[0]
    tools = {t.name: t for t in lab.tests if t.name.startswith("sanitizer.")}
    assert tools["sanitizer.memcheck"].category is Category.TIMEOUT
    for name in ("sanitizer.racecheck", "sanitizer.synccheck"):
        assert tools[name].status is Status.NOT_RUN and "memcheck did not finish in time" in tools[name].message
    assert time.monotonic() - start < 4.5  # one slow tool, not three


def test_a_students_grade_runs_the_tools_side_by_side(lab_root: Path, builder: FakeBuilder, tmp_path: Path,
                                                      monkeypatch) -> None:
    """A student's grade runs every tool (no early stop), all at once: three hangs cost one time limit,
    each tool still has its own verdict, and the results keep the lab's order of tools."""
    slow = _tool(tmp_path / "cs-slow", None, 0, sleep=5)
    monkeypatch.setattr(sanitizer, "find_sanitizer", lambda: slow)
    tools = ["memcheck", "racecheck", "synccheck"]
    options = RunOptions(sanitizer_tools=tools, timeout_s=0.3)
    start = time.monotonic()
    lab = run_labs(lab_root, discover(lab_root), builder, GPU, options, Progress(stream=io.StringIO())).labs[0]
    got = [t for t in lab.tests if t.name.startswith("sanitizer.")]
    assert [t.name for t in got] == [f"sanitizer.{t}" for t in tools]
    assert all(t.category is Category.TIMEOUT and "did not finish within" in t.message for t in got)
    assert time.monotonic() - start < 4.5  # at once: one time limit, not three


def test_side_by_side_tools_overlap_in_time(lab_root: Path, builder: FakeBuilder, monkeypatch) -> None:
    """Each tool waits until the other two have started: run one after another, this would never end
    (the barrier's timeout breaks it and the test fails)."""
    started = threading.Barrier(3, timeout=10)

    def fake_run_tool(path, tool, binary, timeout_s, *, env, policy, label, gtest_filter, kernels=(), own_files=()):
        started.wait()
        result = sanitizer.not_run([tool], "stand-in")[0]
        result.status = Status.FAILED if tool == "racecheck" else Status.PASSED
        return sanitizer.ToolRun(tool, result, [])

    monkeypatch.setattr(sanitizer, "find_sanitizer", lambda: "/bin/true")
    monkeypatch.setattr(sanitizer, "run_tool", fake_run_tool)
    stream = io.StringIO()
    lab = run_labs(lab_root, discover(lab_root), builder, GPU,
                   RunOptions(sanitizer_tools=["memcheck", "racecheck", "synccheck"]), Progress(stream=stream)).labs[0]
    got = {t.name: t.status for t in lab.tests if t.name.startswith("sanitizer.")}
    assert got == {"sanitizer.memcheck": Status.PASSED, "sanitizer.racecheck": Status.FAILED,
                   "sanitizer.synccheck": Status.PASSED}
    assert "compute-sanitizer memcheck, racecheck, synccheck on lab01_student, side by side" in stream.getvalue()


def test_in_the_mutation_gate_the_first_finding_ends_the_stage(lab_root: Path, builder: FakeBuilder, tmp_path: Path,
                                                              monkeypatch) -> None:
    """stop_at_first_failure: once one tool reports a problem the verdict is decided, so racecheck and
    synccheck (the slow ones) are not run after a memcheck finding; without the option all three run."""
    tool = _tool(tmp_path / "cs", "racecheck_warning.log", sanitizer.ERROR_EXITCODE)
    monkeypatch.setattr(sanitizer, "find_sanitizer", lambda: tool)
    tools = ["memcheck", "racecheck", "synccheck"]
    gated = RunOptions(sanitizer_tools=tools, stop_at_first_failure=True)
    lab = run_labs(lab_root, discover(lab_root), builder, GPU, gated, Progress(stream=io.StringIO())).labs[0]
    got = {t.name: t for t in lab.tests if t.name.startswith("sanitizer.")}
    assert got["sanitizer.memcheck"].status is Status.FAILED
    for name in ("sanitizer.racecheck", "sanitizer.synccheck"):
        assert got[name].status is Status.NOT_RUN and "memcheck found a problem already" in got[name].message
    lab = _grade(lab_root, builder, GPU, tools).labs[0]
    assert [t.status for t in lab.tests if t.name.startswith("sanitizer.")] == [Status.FAILED] * 3


def test_in_the_mutation_gate_a_missing_technique_skips_the_sanitizer(lab_root: Path, builder: FakeBuilder,
                                                                      tmp_path: Path, monkeypatch) -> None:
    """A bug mutant whose tests pass but whose technique check fails (a missing barrier that only the PTX
    shows) is decided: the slow tools are not run for it. Without the gate's option they run."""
    from grader.inspect import static_checks

    tool = _tool(tmp_path / "cs", None, 0)
    monkeypatch.setattr(sanitizer, "find_sanitizer", lambda: tool)
    monkeypatch.setattr(static_checks.Inspection, "technique_missing", property(lambda self: True))
    tools = ["memcheck", "racecheck"]
    gated = RunOptions(sanitizer_tools=tools, stop_at_first_failure=True, sanitize_failing=False)
    lab = run_labs(lab_root, discover(lab_root), builder, GPU, gated, Progress(stream=io.StringIO())).labs[0]
    got = [t for t in lab.tests if t.name.startswith("sanitizer.")]
    assert [t.status for t in got] == [Status.NOT_RUN] * 2
    assert all("a technique check failed already" in t.message for t in got)
    lab = _grade(lab_root, builder, GPU, tools).labs[0]  # the stand-in tool ran (and reported nothing)
    assert all("gave no verdict" in t.message for t in lab.tests if t.name.startswith("sanitizer."))


def test_the_inspect_stage_reads_the_techniques_once(monkeypatch) -> None:
    """The mutation gate (before the sanitizer) and scoring read the same outcomes, made once."""
    from types import SimpleNamespace as NS

    from grader.inspect import static_checks, techniques
    from grader.model.block import Block
    from grader.model.results import Category

    lab = NS(techniques=[object()])
    calls = []

    def check_all(*args):
        calls.append(args)
        return [NS(found=True), NS(found=False)], []

    monkeypatch.setattr(techniques, "check_all", check_all)
    quiet = Progress(quiet=True)
    found = static_checks.inspect(lab, [], None, "student", quiet)
    assert found.technique_missing and len(calls) == 1
    monkeypatch.setattr(techniques, "check_all", lambda *a: ([NS(found=True)], []))
    assert found.technique_missing and len(calls) == 1  # nothing reads them again
    assert not static_checks.inspect(lab, [], None, "student", quiet).technique_missing
    assert static_checks.inspect(NS(techniques=[]), [], None, "student", quiet).techniques is None
    refused = static_checks.Inspection(block=Block(Category.FORBIDDEN_CALL, "no", "no"))
    assert not refused.technique_missing and refused.techniques is None


def test_stage_without_the_tool_or_gpu_is_skipped_with_the_reason(lab_root: Path, builder: FakeBuilder, monkeypatch) -> None:
    monkeypatch.setattr(sanitizer, "find_sanitizer", lambda: None)
    lab = _grade(lab_root, builder, GPU, ["memcheck"]).labs[0]
    t = next(t for t in lab.tests if t.name == "sanitizer.memcheck")
    assert t.status is Status.SKIPPED and "not installed" in t.message
    lab = _grade(lab_root, builder, GpuProbe(False, reason="no driver"), ["memcheck"]).labs[0]
    t = next(t for t in lab.tests if t.name == "sanitizer.memcheck")
    assert t.status is Status.SKIPPED and t.category is Category.NO_GPU


def test_stage_is_not_run_when_the_binary_did_not_build(lab_root: Path, builder: FakeBuilder, monkeypatch) -> None:
    monkeypatch.setattr(sanitizer, "find_sanitizer", lambda: "/nonexistent")
    builder.failures["lab01_student"] = "add.cu(3): error: expected a ';'\n"
    lab = _grade(lab_root, builder, GPU, ["memcheck"]).labs[0]
    t = next(t for t in lab.tests if t.name == "sanitizer.memcheck")
    assert t.status is Status.NOT_RUN and "did not build" in t.message


def test_the_mutation_gate_skips_the_tools_once_a_test_failed(lab_root: Path, tmp_path: Path, monkeypatch) -> None:
    """sanitize_failing=False: a failed correctness test already decides; the tools are listed as not run
    with that reason, and a passing binary still gets every tool."""
    tool = _tool(tmp_path / "cs", "racecheck_warning.log", sanitizer.ERROR_EXITCODE)
    monkeypatch.setattr(sanitizer, "find_sanitizer", lambda: tool)
    failing = FakeBuilder(lab_root / "build" / "bin", {"lab01_student": spec(add_tests(fail_small=True)),
                                                        "lab01_solution": spec(add_tests())})
    options = RunOptions(sanitizer_tools=["racecheck"], sanitize_failing=False)
    lab = run_labs(lab_root, discover(lab_root), failing, GPU, options, Progress(stream=io.StringIO())).labs[0]
    race = next(t for t in lab.tests if t.name == "sanitizer.racecheck")
    assert race.status is Status.NOT_RUN and "a correctness test failed already" in race.message
    passing = FakeBuilder(lab_root / "build" / "bin2", {"lab01_student": spec(add_tests()),
                                                         "lab01_solution": spec(add_tests())})
    lab = run_labs(lab_root, discover(lab_root), passing, GPU, options, Progress(stream=io.StringIO())).labs[0]
    assert next(t for t in lab.tests if t.name == "sanitizer.racecheck").status is Status.FAILED
