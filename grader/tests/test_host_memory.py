"""Each lab's host-memory limit (issue 29): set from the reference's measured peak, given to that lab's runs
(test binaries and sanitizer tools), named when it stops a run, and overridden by --max-host-memory."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

import pytest

from grader.execute import runs
from grader.execute.runner import Runner
from grader.grade.options import RunOptions
from grader.grade.pipeline import run_labs
from grader.host.environment import GpuProbe
from grader.model.labs import discover
from grader.model.progress import Progress
from grader.model.results import Category, Status
from grader.tests.conftest import LAB_TOML, FakeBuilder, spec, write_lab

ROOT = Path(__file__).resolve().parents[2]
PEAKS = Path(__file__).parent / "fixtures" / "host-memory-h200.json"
GPU = GpuProbe(True, "NVIDIA Fake", "9.0")


def expected_limit(peak_mib: float) -> int:
    """The margin: half again the peak, at least 3 GiB more (a CUDA context and a student's own buffers
    vary by driver and GPU), rounded up to whole GiB."""
    return math.ceil(max(1.5 * peak_mib, peak_mib + 3072) / 1024) * 1024


def test_every_lab_sets_its_limit_from_the_measured_peak() -> None:
    peaks = json.loads(PEAKS.read_text())["peaks_mib"]
    labs = discover(ROOT)
    assert sorted(lab.name[:2] for lab in labs) == sorted(peaks)
    for lab in labs:
        assert lab.host_memory_mib == expected_limit(peaks[lab.name[:2]]), lab.name
        assert lab.host_memory_mib < runs.DEFAULT_HOST_MEMORY_MIB, lab.name  # tighter than the default
    # Lab 04 touches a few hundred MiB: a submission that takes 32 GiB is stopped long before.
    assert next(lab for lab in labs if lab.name.startswith("04")).host_memory_mib <= 4096


def _runner(memory_mib: float, fixed: bool = False) -> Runner:
    confine = runs.ConfineSettings(memory_mib=memory_mib)
    return Runner(runs.RunPolicy(confine=confine), Progress(stream=io.StringIO()), memory_fixed=fixed)


def test_a_runner_for_a_lab_carries_the_labs_limit() -> None:
    base = _runner(32768)
    mine = base.for_lab(4096)
    assert mine.policy.confine is not None and mine.policy.confine.memory_mib == 4096
    assert base.policy.confine is not None and base.policy.confine.memory_mib == 32768  # unchanged
    assert mine.notes is base.notes and mine.policy.deadline == base.policy.deadline  # one grade's state
    assert base.for_lab(None) is base  # a lab that sets none keeps the grade's
    fixed = _runner(8192, fixed=True)
    assert fixed.for_lab(4096) is fixed  # --max-host-memory: one limit for every lab
    unconfined = Runner(runs.RunPolicy(confine=None), Progress(stream=io.StringIO()))
    assert unconfined.for_lab(4096) is unconfined


def _hog_lab(root: Path, limit_mib: int) -> FakeBuilder:
    toml = LAB_TOML.replace("timeout_s = 20\n", f"timeout_s = 20\nmax_host_memory_mib = {limit_mib}\n")
    write_lab(root, toml=toml)
    tests = [{"name": "AddCorrectness.Small/1", "do": "pass"},
             {"name": "AddCorrectness.Small/257", "do": "hog", "mib": 400}]
    return FakeBuilder(root / "build" / "bin", {"lab01_student": spec(tests), "lab01_solution": spec(tests)})


def _grade(root: Path, builder: FakeBuilder, **options):
    return run_labs(root, discover(root), builder, GPU, RunOptions(perf=False, **options),
                    Progress(stream=io.StringIO())).labs[0]


def test_a_run_past_the_labs_limit_is_stopped_and_the_limit_named(tmp_path: Path) -> None:
    builder = _hog_lab(tmp_path, 150)
    lab = _grade(tmp_path, builder)
    if not lab.host_memory_mib:
        pytest.skip("runs are not confined here, so nothing counts their memory")
    hog = next(t for t in lab.tests if t.name == "AddCorrectness.Small/257")
    assert hog.status is Status.FAILED and hog.category is Category.CRASH, hog.message
    assert "than the 150 MiB this lab allows a run" in hog.message
    assert next(t for t in lab.tests if t.name == "AddCorrectness.Small/1").status is Status.PASSED


def test_max_host_memory_overrides_the_labs_limit(tmp_path: Path) -> None:
    builder = _hog_lab(tmp_path, 150)
    lab = _grade(tmp_path, builder, host_memory_mib=2048)
    if not lab.host_memory_mib:
        pytest.skip("runs are not confined here, so nothing counts their memory")
    assert all(t.status is Status.PASSED for t in lab.tests if t.kind != "sanitizer"), \
        [(t.name, t.message) for t in lab.tests]
