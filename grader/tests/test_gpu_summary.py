"""ci/gpu_summary.py and ci/gpu-check's exit status: a reference solution below full marks fails the check."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grader.model import results as r
from grader.tests.conftest import ci_script

REPO = Path(__file__).resolve().parents[2]


gpu_summary = ci_script("gpu_summary")


def reference_results(earned: float = 60.0, note: str = "") -> r.Results:
    """One lab graded in solution mode on a GPU: every test passed; the second task earned `earned` of 60."""
    tasks = [r.TaskScore(id="small", title="Small", points=40, earned=40, tests_passed=1, tests_total=1),
             r.TaskScore(id="large", title="Large", points=60, earned=earned, tests_passed=1, tests_total=1,
                       notes=[note] if note else [])]
    lab = r.LabResult(number=1, name="01-add", title="Add", max_score=100, score=40 + earned,
                    builds=[r.BuildResult(target="lab01_solution", ok=True)],
                    tests=[r.TestResult(name="AddCorrectness.Small/1", status=r.Status.PASSED),
                           r.TestResult(name="AddCorrectness.Large/1", status=r.Status.PASSED)],
                    tasks=tasks)
    run = r.RunInfo(started="2026-11-23T12:00:00+00:00", mode="solution", gpu_available=True,
                  gpu={"gpu_name": "NVIDIA H100"})
    return r.Results(run=run, labs=[lab])


def write(results: r.Results, path: Path) -> Path:
    results.save(path)
    return path


def test_full_marks_pass(tmp_path: Path, capsys) -> None:
    skeletons = tmp_path / "skeletons.tsv"
    skeletons.write_text("lab01\t2\t2\t0\t1\n")
    assert gpu_summary.main(str(write(reference_results(), tmp_path / "r.json")), str(skeletons)) == 0
    out = capsys.readouterr().out
    assert "fails 2/2" in out and "100/100" in out and out.rstrip().endswith("gpu-check: OK")


def test_below_full_marks_is_a_problem_and_says_where(tmp_path: Path, capsys) -> None:
    results = reference_results(earned=30.0, note="the tiled kernel uses shared memory (the task's points withheld)")
    assert gpu_summary.main(str(write(results, tmp_path / "r.json"))) == 1
    out = capsys.readouterr().out
    assert "reference solutions below full marks" in out
    assert ("01-add: the reference scores 70/100: large 30/60 (the tiled kernel uses shared memory (the task's "
            "points withheld))") in out
    assert out.rstrip().endswith("gpu-check: PROBLEMS FOUND")


def test_without_the_skeletons_stage_they_are_not_judged(tmp_path: Path, capsys) -> None:
    assert gpu_summary.main(str(write(reference_results(), tmp_path / "r.json"))) == 0
    assert "not checked" in capsys.readouterr().out


def test_a_skeleton_stage_missing_a_lab_is_a_problem(tmp_path: Path, capsys) -> None:
    skeletons = tmp_path / "skeletons.tsv"
    skeletons.write_text("")
    assert gpu_summary.main(str(write(reference_results(), tmp_path / "r.json")), str(skeletons)) == 1
    assert "not run" in capsys.readouterr().out


@pytest.mark.skipif(shutil.which("bash") is None or shutil.which("tar") is None, reason="needs bash and tar")
@pytest.mark.parametrize(("earned", "status"), [(60.0, 0), (30.0, 1)])
def test_gpu_check_exit_status_follows_the_summary(tmp_path: Path, earned: float, status: int) -> None:
    """gpu-check with no stage to run judges the reference results it finds (as after an earlier call)."""
    (tmp_path / "ci").mkdir()
    for name in ("gpu-check", "gpu_summary.py"):
        shutil.copy2(REPO / "ci" / name, tmp_path / "ci" / name)
    env_stub = tmp_path / "ci" / "python-env"  # picks this test's Python, as ci/python-env would
    env_stub.write_text(f"#!/bin/sh\nmkdir -p build && echo '{sys.executable}' > build/.python\n")
    env_stub.chmod(0o755)
    (tmp_path / "grader").symlink_to(REPO / "grader")
    write(reference_results(earned), tmp_path / "build" / "gpu-check-work" / "demo" / "results.json")
    env = {**os.environ, "GPU_CHECK_STAGES": "none", "OUT": str(tmp_path / "out")}
    proc = subprocess.run(["bash", str(tmp_path / "ci" / "gpu-check")], cwd=tmp_path, env=env, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
    assert proc.returncode == status, proc.stdout
    assert ("gpu-check: OK" if status == 0 else "gpu-check: PROBLEMS FOUND") in proc.stdout
    assert (tmp_path / "out" / "summary.txt").is_file()


def test_ratios_are_compared_with_the_gpus_recorded_baseline(tmp_path: Path) -> None:
    """Informational lines: how many headline ratios stay within the tolerance of the baseline recorded
    for this GPU model, and each one below it with its change; nothing for a GPU without a baseline."""
    import json

    base = tmp_path / "baseline.json"
    base.write_text(json.dumps({"tolerance": 0.02, "gpus": {"NVIDIA H100": {
        "recorded": "quiet run", "ratios": {"A.Fast/1": 1.00, "B.Slow/1": 0.50, "C.Gone/1": 0.9}}}}))
    lines = gpu_summary.against_baseline("NVIDIA H100", {"A.Fast/1": 0.99, "B.Slow/1": 0.45, "D.New/1": 2.0}, base)
    assert lines[0].startswith("perf against the baseline (NVIDIA H100; quiet run): 1 of 2 ratio(s) within 2%")
    assert lines[1:2] == ["  below: B.Slow/1 0.45x, was 0.50x (-10%)"]
    assert "bench/perf_ab.py --base REV" in lines[2] and len(lines) == 3
    assert gpu_summary.against_baseline("NVIDIA H200", {"A.Fast/1": 0.5}, base) == []
    # a baseline kept to two decimals: 0.117 may have been printed as 0.12 the time before
    base.write_text(json.dumps({"tolerance": 0.02, "rounding": 0.01, "gpus": {"NVIDIA H100": {
        "ratios": {"N.Naive/1": 0.12, "Q.Sort/1": 0.14}}}}))
    lines = gpu_summary.against_baseline("NVIDIA H100", {"N.Naive/1": 0.1167, "Q.Sort/1": 0.12}, base)
    assert [ln.split()[1] for ln in lines[1:] if ln.lstrip().startswith("below:")] == ["Q.Sort/1"]
    assert gpu_summary.against_baseline("NVIDIA H100", {}, tmp_path / "missing.json") == []


def test_the_committed_baseline_names_real_perf_tests() -> None:
    """Every test the committed baseline names is a perf test of some lab (a renamed test would silently
    drop out of the comparison)."""
    import json
    import re

    data = json.loads((REPO / "ci" / "perf-baseline.json").read_text())
    sources = "\n".join(p.read_text() for p in REPO.glob("labs/*/test_*.cu"))
    for gpu, entry in data["gpus"].items():
        for name in entry["ratios"]:
            suite, test = name.split(".", 1)
            assert re.search(rf"\b{re.escape(suite)}\b", sources), (gpu, name)
            assert "Perf" in suite, (gpu, name)
