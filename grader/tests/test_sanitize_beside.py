"""The sanitize stage beside the lab's first run (grader/grade/pipeline.py): in a full grade on a GPU with
memory for both, the tools start with the correctness tests, every later run waits for them, and the
results are those the stage gives after the run. No GPU needed: stand-in binaries and tools."""

from __future__ import annotations

import io
import threading
from pathlib import Path

import pytest

from grader.execute import runs, sanitizer
from grader.grade.options import RunOptions
from grader.grade.pipeline import BESIDE_MIN_GPU_MIB, SANITIZE_BESIDE, run_labs
from grader.host.environment import GpuProbe
from grader.model.labs import discover
from grader.model.progress import Progress
from grader.model.results import Category, Status
from grader.tests.conftest import NO_GPU_REASON, NO_GPU_ROOT, FakeBuilder, add_tests, spec

BIG = GpuProbe(True, "NVIDIA Fake", "9.0", memory_mib=BESIDE_MIN_GPU_MIB)
SMALL = GpuProbe(True, "NVIDIA Fake", "9.0", memory_mib=BESIDE_MIN_GPU_MIB - 1)
TOOLS = ["memcheck", "racecheck"]


@pytest.fixture
def builder(lab_root: Path) -> FakeBuilder:
    return FakeBuilder(lab_root / "build" / "bin", {"lab01_student": spec(add_tests()), "lab01_solution": spec(add_tests())})


def _recorded(monkeypatch, meet: threading.Barrier | None = None) -> list[str]:
    """Stand-ins that log what starts and ends: every test binary run (by filter) and every tool. meet:
    the first run and each tool wait there for one another (they can only pass it at the same time)."""
    log: list[str] = []
    lock = threading.Lock()
    real_run = runs.run_binary

    def note(what: str) -> None:
        with lock:
            log.append(what)

    def run_binary(path, expected, timeout_s, **kw):
        what = f"run {kw.get('gtest_filter')}"
        note(f"start {what}")
        if meet is not None and kw.get("gtest_filter") == "-*Perf.*":
            meet.wait()
        out = real_run(path, expected, timeout_s, **kw)
        note(f"end {what}")
        return out

    def run_tool(path, tool, binary, timeout_s, *, env, policy, label, gtest_filter, kernels=(), own_files=()):
        note(f"start {tool}")
        if meet is not None:
            meet.wait()
        result = sanitizer.not_run([tool], "stand-in")[0]
        result.status, result.category, result.message = Status.PASSED, None, "no problems"
        result.duration_s = 0.01
        note(f"end {tool}")
        return sanitizer.ToolRun(tool, result, [])

    monkeypatch.setattr(runs, "run_binary", run_binary)
    monkeypatch.setattr(sanitizer, "find_sanitizer", lambda: "/bin/true")
    monkeypatch.setattr(sanitizer, "run_tool", run_tool)
    return log


def test_the_tools_run_beside_the_correctness_tests(lab_root: Path, builder: FakeBuilder, monkeypatch) -> None:
    """Both tools and the first run must be under way at once to pass the barrier: run one after the
    other, the barrier times out and the grade fails. The perf run and the reference's timing start only
    after both tools ended; the results are in the lab's order of tools, after the tests."""
    meet = threading.Barrier(1 + len(TOOLS), timeout=10)
    log = _recorded(monkeypatch, meet)
    lab = run_labs(lab_root, discover(lab_root), builder, BIG, RunOptions(sanitizer_tools=TOOLS),
                   Progress(stream=io.StringIO())).labs[0]
    events = log
    assert not meet.broken
    assert [t.name for t in lab.tests if t.name.startswith("sanitizer.")] == ["sanitizer.memcheck", "sanitizer.racecheck"]
    assert all(t.status is Status.PASSED for t in lab.tests), [(t.name, t.status) for t in lab.tests]
    perf = events.index("start run *Perf.*")
    assert max(events.index("end memcheck"), events.index("end racecheck")) < perf
    assert events.index("start memcheck") < events.index("end run -*Perf.*")
    assert SANITIZE_BESIDE in lab.seconds and "sanitize" not in lab.seconds
    assert lab.score == lab.max_score


@pytest.mark.parametrize("gpu, options", [
    (SMALL, RunOptions(sanitizer_tools=TOOLS)),  # too little memory for both
    (BIG, RunOptions(sanitizer_tools=TOOLS, stop_at_first_failure=True)),  # the gate: a failure decides
    (BIG, RunOptions(sanitizer_tools=TOOLS, sanitize_failing=False)),  # runs only when every test passed
    (BIG, RunOptions(sanitizer_tools=TOOLS, perf=False)),  # correctness only (the diagnosing gate)
], ids=["small-gpu", "gate", "not-when-failing", "no-perf"])
def test_otherwise_the_stage_runs_after_the_run(lab_root: Path, builder: FakeBuilder, monkeypatch, gpu,
                                                options) -> None:
    log = _recorded(monkeypatch)
    lab = run_labs(lab_root, discover(lab_root), builder, gpu, options, Progress(stream=io.StringIO())).labs[0]
    events = log
    last_run = max(i for i, e in enumerate(events) if e.startswith("end run"))
    assert events.index("start memcheck") > last_run
    assert SANITIZE_BESIDE not in lab.seconds and "sanitize" in lab.seconds


def test_a_binary_that_did_not_build_is_not_sanitized_beside(lab_root: Path, builder: FakeBuilder,
                                                            monkeypatch) -> None:
    log = _recorded(monkeypatch)
    builder.failures["lab01_student"] = "add.cu(3): error: expected a ';'"
    lab = run_labs(lab_root, discover(lab_root), builder, BIG, RunOptions(sanitizer_tools=TOOLS),
                   Progress(stream=io.StringIO())).labs[0]
    assert not any(e.endswith(("memcheck", "racecheck")) for e in log)
    got = [t for t in lab.tests if t.name.startswith("sanitizer.")]
    assert [t.status for t in got] == [Status.NOT_RUN] * 2


def test_a_binary_that_saw_no_gpu_gets_the_stages_no_gpu_skip(lab_root: Path, builder: FakeBuilder,
                                                             monkeypatch) -> None:
    """The tools ran beside a run whose binary found no GPU: the stage says what it says after such a run."""
    _recorded(monkeypatch)
    builder.specs["lab01_student"] = spec([{"name": t["name"], "do": "skip", "reason": NO_GPU_REASON} for t in add_tests()],
                                          root=NO_GPU_ROOT)
    lab = run_labs(lab_root, discover(lab_root), builder, BIG, RunOptions(sanitizer_tools=TOOLS),
                   Progress(stream=io.StringIO())).labs[0]
    got = [t for t in lab.tests if t.name.startswith("sanitizer.")]
    assert [(t.status, t.category) for t in got] == [(Status.SKIPPED, Category.NO_GPU)] * 2
