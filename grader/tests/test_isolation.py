"""Running binaries in isolation: crashes and hangs are attributed to the right test (fake gtest binaries)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from grader.execute import gtest
from grader.isolate import process
from grader.execute import runs
from grader.model.results import Category, Status

from grader.tests.conftest import NO_GPU_REASON, NO_GPU_ROOT, make_binary, perf_properties, spec

TIMEOUT = 1.5


def by_name(run: runs.BinaryRun) -> dict[str, Any]:
    return {t.name: t for t in run.tests}


def test_clean_run_needs_no_rerun(tmp_path: Path) -> None:
    binary = make_binary(tmp_path / "bin", spec([
        {"name": "S.A", "do": "pass"},
        {"name": "S.B", "do": "fail", "message": "3 of 4 elements differ"},
        {"name": "SPerf.C", "do": "pass", "properties": perf_properties(2.0)},
    ]))
    expected = runs.list_tests(binary)
    assert expected == ["S.A", "S.B", "SPerf.C"]
    run = runs.run_binary(binary, expected, TIMEOUT)
    assert run.reran == [] and run.notes == []
    assert [t.status for t in run.tests] == [Status.PASSED, Status.FAILED, Status.PASSED]
    assert run.tests[2].kind == "perf" and run.tests[2].perf.impl.median_ms == 2.0
    assert run.properties["gpu_name"] == "NVIDIA Fake"


def test_segfault_is_attributed_to_its_test(tmp_path: Path) -> None:
    binary = make_binary(tmp_path / "bin", spec([
        {"name": "S.Before", "do": "pass"},
        {"name": "S.Crashes", "do": "segv"},
        {"name": "S.After", "do": "fail", "message": "wrong"},
    ]))
    run = runs.run_binary(binary, runs.list_tests(binary), TIMEOUT)
    tests = by_name(run)
    assert run.reran == ["S.Before", "S.Crashes", "S.After"]
    assert tests["S.Before"].status is Status.PASSED
    crashed = tests["S.Crashes"]
    assert crashed.status is Status.FAILED and crashed.category is Category.CRASH
    assert "SIGSEGV" in crashed.message and "[ RUN      ] S.Crashes" in crashed.message
    assert tests["S.After"].status is Status.FAILED and tests["S.After"].category is Category.WRONG_ANSWER
    assert any("SIGSEGV" in n for n in run.notes)


def test_hang_times_out_and_kills_the_process_group(tmp_path: Path) -> None:
    binary = make_binary(tmp_path / "bin", spec([
        {"name": "S.Ok", "do": "pass"},
        {"name": "S.Hangs", "do": "hang"},
    ]))
    start = time.monotonic()
    run = runs.run_binary(binary, runs.list_tests(binary), 1.0)
    assert time.monotonic() - start < 4.0  # the full run and the hang's own re-run, 1 s each
    tests = by_name(run)
    assert tests["S.Ok"].status is Status.PASSED
    assert tests["S.Hangs"].category is Category.TIMEOUT and tests["S.Hangs"].status is Status.FAILED
    assert "did not finish within 1 s" in tests["S.Hangs"].message
    assert any("did not finish" in n for n in run.notes)


def test_process_group_is_killed(tmp_path: Path) -> None:
    marker = tmp_path / "child.pid"
    script = tmp_path / "spawn.sh"
    script.write_text(f"#!/bin/sh\nsleep 30 &\necho $! > {marker}\nwait\n")
    script.chmod(0o755)
    res = process.run([script], 0.5)
    assert res.timed_out and res.returncode is None
    child = int(marker.read_text())
    time.sleep(0.1)
    assert not Path(f"/proc/{child}").exists() or "Z" in Path(f"/proc/{child}/stat").read_text().split()[2]


def test_consecutive_timeouts_stop_the_reruns(tmp_path: Path) -> None:
    tests = [{"name": f"S.Hang{i}", "do": "hang"} for i in range(4)] + [{"name": "S.Last", "do": "pass"}]
    binary = make_binary(tmp_path / "bin", spec(tests))
    run = runs.run_binary(binary, runs.list_tests(binary), 1.0, max_consecutive_timeouts=2)
    results = by_name(run)
    assert run.reran == ["S.Hang0", "S.Hang1"]
    assert results["S.Hang0"].category is Category.TIMEOUT and results["S.Hang0"].status is Status.FAILED
    for name in ("S.Hang2", "S.Hang3", "S.Last"):
        assert results[name].status is Status.NOT_RUN
        assert "timed out" in results[name].message
    assert any("2 timeouts in a row" in n for n in run.notes)


def test_sticky_cuda_error_is_rerun_alone(tmp_path: Path) -> None:
    binary = make_binary(tmp_path / "bin", spec([
        {"name": "S.Fine", "do": "pass"},
        {"name": "S.Faults", "do": "sticky", "error": "cudaErrorIllegalAddress"},
        {"name": "S.Victim1", "do": "pass"},
        {"name": "S.Victim2", "do": "fail", "message": "really wrong"},
    ]))
    run = runs.run_binary(binary, runs.list_tests(binary), TIMEOUT)
    results = by_name(run)
    assert run.reran == ["S.Victim1", "S.Victim2"]
    assert results["S.Faults"].category is Category.CUDA_ERROR
    assert results["S.Victim1"].status is Status.PASSED
    assert results["S.Victim2"].category is Category.WRONG_ANSWER


def test_exit_codes_without_results(tmp_path: Path) -> None:
    binary = make_binary(tmp_path / "bin", spec([
        {"name": "S.ExitsZero", "do": "exit0"},
        {"name": "S.ExitsThree", "do": "exit3"},
        {"name": "S.Aborts", "do": "abort"},
    ]))
    results = by_name(runs.run_binary(binary, runs.list_tests(binary), TIMEOUT))
    assert results["S.ExitsZero"].category is Category.HARNESS
    assert "without writing its results" in results["S.ExitsZero"].message
    assert results["S.ExitsThree"].category is Category.CRASH and "code 3" in results["S.ExitsThree"].message
    assert results["S.Aborts"].category is Category.CRASH and "SIGABRT" in results["S.Aborts"].message


def test_corrupt_results_are_a_harness_error(tmp_path: Path) -> None:
    binary = make_binary(tmp_path / "bin", spec([{"name": "S.A", "do": "pass"}], corrupt_output=True))
    run = runs.run_binary(binary, ["S.A"], TIMEOUT)
    assert run.tests[0].category is Category.HARNESS and run.tests[0].status is Status.FAILED
    assert "unreadable" in run.tests[0].message


def test_unexpected_tests_are_dropped_and_missing_ones_reported(tmp_path: Path) -> None:
    binary = make_binary(tmp_path / "bin", spec([{"name": "S.A", "do": "pass"}, {"name": "S.Sneaky", "do": "pass"}]))
    run = runs.run_binary(binary, ["S.A", "S.Gone"], TIMEOUT)
    results = by_name(run)
    assert "S.Sneaky" not in results
    assert any("S.Sneaky" in n for n in run.notes)
    assert results["S.Gone"].status is Status.NOT_RUN and results["S.Gone"].category is Category.HARNESS


def test_filter_runs_only_matching_tests(tmp_path: Path) -> None:
    binary = make_binary(tmp_path / "bin", spec([
        {"name": "SCorrectness.A", "do": "segv"},
        {"name": "SPerf.B", "do": "pass", "properties": perf_properties(1.0)},
    ]))
    run = runs.run_binary(binary, ["SCorrectness.A", "SPerf.B"], TIMEOUT, gtest_filter="*Perf.*", label="solution")
    assert [t.name for t in run.tests] == ["SPerf.B"] and run.reran == []
    assert run.tests[0].binary == "solution"


def test_no_expected_list_falls_back_to_listing(tmp_path: Path) -> None:
    binary = make_binary(tmp_path / "bin", spec([{"name": "S.A", "do": "pass"}, {"name": "S.B", "do": "segv"}]))
    run = runs.run_binary(binary, None, TIMEOUT)
    assert [t.name for t in run.tests] == ["S.A", "S.B"]
    assert run.tests[1].category is Category.CRASH


def test_no_gpu_skips(tmp_path: Path) -> None:
    binary = make_binary(tmp_path / "bin", spec([{"name": "S.A", "do": "skip", "reason": NO_GPU_REASON}], root=NO_GPU_ROOT))
    run = runs.run_binary(binary, ["S.A"], TIMEOUT)
    assert run.tests[0].status is Status.SKIPPED and run.tests[0].category is Category.NO_GPU
    assert run.properties["gpu_name"] == "none"


def test_output_is_bounded(tmp_path: Path) -> None:
    binary = make_binary(tmp_path / "bin", spec([{"name": "S.Spam", "do": "spam"}]))
    res = process.run([binary, "--gtest_filter=S.Spam"], 10)
    assert res.returncode == 0
    assert len(res.stdout) < process.HEAD_BYTES + process.TAIL_BYTES + 200
    assert "bytes of output left out" in res.stdout


def test_list_failure_is_an_error(tmp_path: Path) -> None:
    binary = make_binary(tmp_path / "bin", spec([{"name": "S.A"}], list_fails=True))
    try:
        runs.list_tests(binary)
    except gtest.GtestError as err:
        assert "exit code 1" in str(err)
    else:
        raise AssertionError("expected GtestError")


def test_gtest_env_is_scrubbed(monkeypatch) -> None:
    monkeypatch.setenv("GTEST_FILTER", "Nothing.*")
    env = runs.test_env({"CUDALAB_SMALL": "1"})
    assert "GTEST_FILTER" not in env and env["CUDALAB_SMALL"] == "1"


def test_stop_at_first_failure_runs_nothing_more(tmp_path: Path) -> None:
    """The mutation gate: the run stops at its first failure (--gtest_fail_fast) and nothing is re-run
    alone, not even after a crash; a run without failures is graded in full as usual."""
    binary = make_binary(tmp_path / "bin", spec([
        {"name": "S.A", "do": "pass"},
        {"name": "S.B", "do": "fail", "message": "wrong"},
        {"name": "S.C", "do": "pass"},
    ]))
    run = runs.run_binary(binary, runs.list_tests(binary), TIMEOUT, stop_at_first_failure=True)
    assert run.reran == []
    assert [t.status for t in run.tests] == [Status.PASSED, Status.FAILED, Status.SKIPPED]

    crashing = make_binary(tmp_path / "crash", spec([
        {"name": "S.Before", "do": "pass"},
        {"name": "S.Crashes", "do": "segv"},
        {"name": "S.After", "do": "pass"},
    ]))
    run = runs.run_binary(crashing, runs.list_tests(crashing), TIMEOUT, stop_at_first_failure=True)
    assert run.reran == [] and not any("re-run one by one" in n for n in run.notes)
    assert {t.status for t in run.tests} == {Status.NOT_RUN}
    assert "SIGSEGV" in run.tests[0].message and "decides the mutation gate" in run.tests[0].message

    clean = make_binary(tmp_path / "clean", spec([{"name": "S.A", "do": "pass"}, {"name": "S.B", "do": "pass"}]))
    run = runs.run_binary(clean, runs.list_tests(clean), TIMEOUT, stop_at_first_failure=True)
    assert [t.status for t in run.tests] == [Status.PASSED, Status.PASSED]


def test_stdout_lines_reach_a_watcher_as_they_come(tmp_path) -> None:
    """process.run's on_line: each line of stdout while the program runs (issue 28's live failures); a line
    longer than LINE_BYTES is skipped, and the output is kept as before."""
    import sys as _sys

    from grader.isolate import process as _process

    seen: list[tuple[str, float]] = []
    script = ("import sys, time\nprint('first', flush=True)\ntime.sleep(0.5)\n"
              f"print('x' * {_process.LINE_BYTES + 10})\nprint('last')\n")
    start = __import__("time").monotonic()
    res = _process.run([_sys.executable, "-c", script], 30,
                       on_line=lambda ln: seen.append((ln, __import__("time").monotonic() - start)))
    assert [ln for ln, _ in seen] == ["first", "last"]
    assert seen[0][1] < res.duration_s - 0.3  # said while the program still ran
    assert "first" in res.stdout and "last" in res.stdout


def test_a_long_line_split_across_reads_gives_the_watcher_no_fragment() -> None:
    """The end of a line longer than LINE_BYTES, arriving in a later read, is not a line of its own (make
    test once saw ['first', '', 'last']: the long line's newline came in the next read)."""
    import io

    from grader.isolate import process as _process

    seen: list[str] = []
    reader = _process._BoundedReader(io.BytesIO(), seen.append)
    long_line = b"x" * (_process.LINE_BYTES + 10)
    for chunk in (b"first\n" + long_line[:5000], long_line[5000:], b"[  FAILED  ] Not.A_line (1 ms)",
                  b"\nlast\n"):
        reader._lines(chunk)
    assert seen == ["first", "last"]
    seen.clear()
    reader = _process._BoundedReader(io.BytesIO(), seen.append)
    for chunk in (b"first\n" + long_line, b"\nlast\n"):  # the newline alone in the next read
        reader._lines(chunk)
    assert seen == ["first", "last"]
def test_wait_exit_returns_the_code_or_times_out() -> None:
    """process.run's wait: a pidfd tells it of the exit (no polling); the same contract as Popen.wait."""

    done = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    assert process.wait_exit(done, 30) == 3
    endless = subprocess.Popen([sys.executable, "-c", "raise SystemExit(4)"])
    assert process.wait_exit(endless, float("inf")) == 4  # no limit: poll()'s milliseconds must not overflow
    slow = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            process.wait_exit(slow, 0.2)
    finally:
        slow.kill()
        slow.wait()
    gone = subprocess.Popen(["true"])
    gone.wait()  # reaped already: the pidfd cannot be opened, Popen.wait answers
    assert process.wait_exit(gone, 1) == 0
