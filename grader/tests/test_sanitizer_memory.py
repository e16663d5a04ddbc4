"""The compute-sanitizer stage and host memory: a tool run stopped for what it held, the tool's allowance
beyond the lab's limit, and the retry one test suite at a time (no GPU needed)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from grader.execute import sanitizer, sanitizer_log
from grader.grade.options import RunOptions
from grader.grade.pipeline import run_labs
from grader.host.environment import GpuProbe
from grader.model.labs import discover
from grader.model.progress import Progress
from grader.model.results import Category, Status
from grader.tests.conftest import FakeBuilder, add_tests, spec

GPU = GpuProbe(True, "NVIDIA Fake", "9.0")


@pytest.fixture
def builder(lab_root: Path) -> FakeBuilder:
    return FakeBuilder(lab_root / "build" / "bin", {"lab01_student": spec(add_tests()), "lab01_solution": spec(add_tests())})


def _grade(lab_root: Path, builder: FakeBuilder, tools: list[str]):
    return run_labs(lab_root, discover(lab_root), builder, GPU, RunOptions(sanitizer_tools=tools),
                    Progress(stream=io.StringIO()))


def test_a_tool_run_stopped_for_host_memory_says_so(monkeypatch) -> None:
    """The supervisor stops a run whose processes hold more host memory than the lab allows; under a tool
    the report says that, with both numbers, rather than a bare signal."""
    from grader.execute import runs
    from grader.isolate import process

    def launch(binary, args, timeout_s, env=None, policy=None, **kwargs):
        proc = process.ProcessResult(argv=[], returncode=-9, timed_out=False, duration_s=3.0, stdout="", stderr="",
                                     confinement={"peak_rss_mib": 4100.0, "memory_mib": 4096.0}, killed_for="memory")
        return runs.Launch(proc, b"", False, runs.Expected("n", small_mode=True, sanitizer=True), [b""])

    monkeypatch.setattr(runs, "launch", launch)
    r = sanitizer.run_tool("cs", "racecheck", Path("/bin/true"), 10).result
    assert r.status is Status.NOT_RUN and r.category is Category.HARNESS
    assert "more host memory (4100 MiB) than the 4096 MiB it may hold under the tool" in r.message
    # A supervisor status without the limit still gives the message, not a formatting error.
    monkeypatch.setattr(runs, "launch", lambda *a, **k: runs.Launch(
        process.ProcessResult(argv=[], returncode=-9, timed_out=False, duration_s=3.0, stdout="", stderr="",
                              confinement={"peak_rss_mib": 4100.0}, killed_for="memory"),
        b"", False, runs.Expected("n", small_mode=True, sanitizer=True), [b""]))
    r = sanitizer.run_tool("cs", "racecheck", Path("/bin/true"), 10).result
    assert r.status is Status.NOT_RUN and "than it may hold under the tool" in r.message


def _memory_stopped(tool: str) -> sanitizer.ToolRun:
    result = sanitizer.not_run([tool], f"compute-sanitizer {tool} gave no verdict: the run held more host memory")[0]
    result.properties[sanitizer.STOPPED] = "memory"
    result.duration_s = 20.0
    return sanitizer.ToolRun(tool, result, [])


def _race(count: int) -> sanitizer.ToolRun:
    finding = sanitizer_log.Finding("racecheck", "Race reported between Write access and Read access", "vector_add_kernel",
                      "vector_add.cu:32", count=count)
    result = sanitizer.not_run(["racecheck"], "")[0]
    sanitizer.report_findings(result, "racecheck", [finding], count)
    return sanitizer.ToolRun("racecheck", result, [finding])


def test_a_tool_stopped_for_host_memory_runs_again_a_suite_at_a_time() -> None:
    """The tools keep their records for the whole process: a suite alone holds a part of them. Every part's
    findings count, merged by place; the adversarial race case (lab 03, racecheck) got no verdict without."""
    asked: list[str] = []

    def run_of(gtest_filter: str) -> sanitizer.ToolRun:
        asked.append(gtest_filter)
        if gtest_filter.startswith("A."):
            return _race(3)
        if gtest_filter.startswith("B."):
            return _memory_stopped("racecheck")
        return _race(2)

    got = sanitizer.in_parts("racecheck", _memory_stopped("racecheck"), ["A", "B", "C"], "-*Perf.*:*Huge*", run_of)
    assert asked == ["A.*-*Perf.*:*Huge*", "B.*-*Perf.*:*Huge*", "C.*-*Perf.*:*Huge*"]
    r = got.result
    assert r.status is Status.FAILED and r.category is Category.SANITIZER
    assert [f.count for f in got.findings] == [5]  # one place, found in two parts
    assert "reported 5 error(s)" in r.message and "one test suite at a time (3 runs)" in r.message
    assert sanitizer.STOPPED not in r.properties and r.properties["sanitizer_parts"] == "3"


def test_a_tool_run_in_parts_passes_or_says_which_part_got_no_verdict() -> None:
    clean = sanitizer.not_run(["racecheck"], "")[0]
    clean.status = Status.PASSED
    got = sanitizer.in_parts("racecheck", _memory_stopped("racecheck"), ["A", "B"], "-*Perf.*",
                             lambda f: sanitizer.ToolRun("racecheck", clean, []))
    assert got.result.status is Status.PASSED and "nothing found, run one test suite at a time" in got.result.message
    got = sanitizer.in_parts("racecheck", _memory_stopped("racecheck"), ["A", "B"], "-*Perf.*",
                             lambda f: sanitizer.ToolRun("racecheck", clean, []) if f.startswith("A.")
                             else _memory_stopped("racecheck"))
    assert got.result.status is Status.NOT_RUN and got.result.properties[sanitizer.STOPPED] == "memory"
    assert "no verdict on B" in got.result.message
    # One suite (or none listed): nothing smaller to run, the whole run's result stands.
    whole = _memory_stopped("racecheck")
    assert sanitizer.in_parts("racecheck", whole, ["A"], "-*Perf.*", lambda f: _race(1)) is whole


def test_the_stage_retries_a_tool_stopped_for_memory(lab_root: Path, builder: FakeBuilder, monkeypatch) -> None:
    filters: list[str] = []

    def fake_run_tool(path, tool, binary, timeout_s, *, env, policy, label, gtest_filter, kernels=(), own_files=()):
        filters.append(gtest_filter)
        return _memory_stopped(tool) if not gtest_filter.startswith("Suite") else _race(1)

    monkeypatch.setattr(sanitizer, "find_sanitizer", lambda: "/bin/true")
    monkeypatch.setattr(sanitizer, "run_tool", fake_run_tool)
    monkeypatch.setattr(sanitizer, "suites_of", lambda binary, env, gtest_filter: ["SuiteA", "SuiteB"])
    lab = _grade(lab_root, builder, ["racecheck"]).labs[0]
    race = next(t for t in lab.tests if t.name == "sanitizer.racecheck")
    assert race.status is Status.FAILED and race.category is Category.SANITIZER
    assert filters == ["-*Perf.*", "SuiteA.*-*Perf.*", "SuiteB.*-*Perf.*"]


def test_the_suites_of_a_binary_are_those_the_tools_filter_keeps(monkeypatch) -> None:
    from grader.execute import runs

    monkeypatch.setattr(runs, "list_tests", lambda binary, env=None: [
        "VectorAddCorrectness.HostFlow/7", "VectorAddCorrectness.Fast/1", "VectorAddPerf.Fast/268435456",
        "Hidden/VectorAddHiddenCorrectness.Fast/7", "VectorAddHugeCorrectness.GridStrideBeyond2To31"])
    assert sanitizer.suites_of(Path("/bin/true"), None, "-*Perf.*") == [
        "VectorAddCorrectness", "Hidden/VectorAddHiddenCorrectness", "VectorAddHugeCorrectness"]
    # A suite the tool's own filter leaves out whole (a [sanitizer] skip glob in lab.toml) gets
    # no part of its own: it would run no test.
    assert sanitizer.suites_of(Path("/bin/true"), None, "-*Perf.*:*Huge*") == [
        "VectorAddCorrectness", "Hidden/VectorAddHiddenCorrectness"]

    def broken(binary, env=None):
        raise runs.GtestError("no listing")

    monkeypatch.setattr(runs, "list_tests", broken)
    assert sanitizer.suites_of(Path("/bin/true"), None, "-*Perf.*") == []


def test_a_run_under_a_tool_may_hold_more_host_memory_than_the_program() -> None:
    """On the H200, racecheck held 4,170 MiB over lab 03's small tests (the program alone: 183 MiB), past the
    lab's 4,096 MiB: the tool's own memory is allowed on top of the lab's limit."""
    from grader.execute.policy import TOOL_HOST_MEMORY_MIB, ConfineSettings, RunPolicy

    policy = RunPolicy(confine=ConfineSettings(memory_mib=4096.0))
    _, tool = policy.for_tool(60)
    assert tool.confine.memory_mib == 4096.0 + TOOL_HOST_MEMORY_MIB >= 8192.0
    assert policy.confine.memory_mib == 4096.0  # the program's own runs keep the lab's limit
    assert RunPolicy().for_tool(60)[1].confine is None  # unconfined stays unconfined
