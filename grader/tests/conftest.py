"""Shared helpers: a tiny fake lab tree, fake test binaries, a fake builder. No GPU, no nvcc."""

from __future__ import annotations

import json
import stat
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from grader.build.cmake import failed_build
from grader.model.results import BuildResult

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "fixtures"
FAKE_GTEST = HERE / "fake_gtest.py"

GPU_ROOT = {
    "gpu_name": "NVIDIA Fake", "gpu_compute_capability": "9.0", "gpu_sm_count": "132",
    "cuda_runtime_version": "13000", "cuda_driver_version": "13000", "small_mode": "false",
}
NO_GPU_ROOT = {"gpu_name": "none", "gpu_unavailable_reason": "no NVIDIA driver is installed on this machine"}
NO_GPU_REASON = "no CUDA device (no NVIDIA driver is installed on this machine)"


def ci_script(name: str) -> Any:
    """One of ci/'s Python scripts (ci/gpu_summary.py: "gpu_summary"), loaded as a module."""
    import importlib.util

    path = Path(__file__).resolve().parents[2] / "ci" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def perf_properties(impl_ms: float, baseline_ms: float = 1.0) -> dict[str, str]:
    return {
        "perf_metric": "GB/s", "perf_work": "1.2e+07", "perf_variants": "impl,lib", "perf_baseline": "lib",
        "perf_label": "N = 2^20", "perf_floor_ms": "0.5",
        "impl.median_ms": str(impl_ms), "impl.min_ms": str(impl_ms), "impl.mean_ms": str(impl_ms),
        "impl.noise_pct": "0.5", "impl.samples": "10", "impl.calls": "12", "impl.verified": "12",
        "impl.tail_ms": "0.012",
        "lib.median_ms": str(baseline_ms), "lib.min_ms": str(baseline_ms), "lib.mean_ms": str(baseline_ms),
        "lib.noise_pct": "0.4", "lib.samples": "10", "lib.tail_ms": "0.011",
    }


def make_binary(path: Path, spec: dict[str, Any]) -> Path:
    """An executable at path that behaves like a gtest binary as spec says (see fake_gtest.py)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    spec_path = path.with_name(path.name + ".spec.json")
    spec_path.write_text(json.dumps(spec))
    path.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE_GTEST}" "{spec_path}" "$@"\n')
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


LAB_TOML = """
[lab]
title = "Add: a fake lab"
student_files = ["add.cu"]
timeout_s = 20

[[task]]
id = "small"
title = "Small sizes"
points = 40
tests = ["AddCorrectness.Small/*"]

[[task]]
id = "large"
title = "Large sizes"
points = 40
tests = ["AddCorrectness.Large/*"]

[[perf]]
test = "AddPerf.Fast/*"
task = "large"
points = 20
full_at = 0.9
zero_at = 0.5
"""

SOLUTION = """// header
int add(int a, int b) {
  // TODO(student): add (1 line).
  // BEGIN SOLUTION
  return a + b;
  // END SOLUTION
  // STUB: return 0;
}
"""


def write_lab(root: Path, dirname: str = "01-add", toml: str = LAB_TOML, solution: str | None = SOLUTION) -> Path:
    lab = root / "labs" / dirname
    lab.mkdir(parents=True, exist_ok=True)
    (lab / "lab.toml").write_text(toml)
    if solution is not None:
        sol = root / "solutions" / dirname
        sol.mkdir(parents=True, exist_ok=True)
        (sol / "add.cu").write_text(solution)
        from grader.authoring.skeleton import make_skeleton

        (lab / "add.cu").write_text(make_skeleton(solution))
    else:
        (lab / "add.cu").write_text("int add(int a, int b) { return 0; }\n")
    return lab


@pytest.fixture
def lab_root(tmp_path: Path) -> Path:
    write_lab(tmp_path)
    return tmp_path


@dataclass
class FakeBuilder:
    """Builds by writing fake binaries: specs[target] is the binary's spec; failures[target] a build log."""

    bin_dir: Path
    specs: dict[str, dict[str, Any]] = field(default_factory=dict)
    failures: dict[str, str] = field(default_factory=dict)
    built: list[str] = field(default_factory=list)
    configured: bool = False
    configured_labs: list[str] = field(default_factory=list)

    def configure(self, labs: list[str]) -> None:
        self.configured = True
        self.configured_labs = list(labs)

    def build(self, target: str) -> BuildResult:
        self.built.append(target)
        if target in self.failures:
            return failed_build(target, self.failures[target], 0.1)
        make_binary(self.bin_dir / target, self.specs[target])
        return BuildResult(target=target, ok=True, seconds=0.1)


def spec(tests: list[dict[str, Any]], root: dict[str, str] | None = None, **extra: Any) -> dict[str, Any]:
    return {"root": GPU_ROOT if root is None else root, "tests": tests, **extra}


def add_tests(fail_small: bool = False, impl_ms: float = 1.0) -> list[dict[str, Any]]:
    """The fake lab's tests: 2 small, 2 large, 1 perf."""
    small2 = {"do": "fail", "message": "add.cu:3\n3 of 257 elements differ (seed 7, exact); mismatches span indices 254..256"} if fail_small else {"do": "pass"}
    return [
        {"name": "AddCorrectness.Small/1", "do": "pass"},
        {"name": "AddCorrectness.Small/257", **small2},
        {"name": "AddCorrectness.Large/1048576", "do": "pass"},
        {"name": "AddCorrectness.Large/16777216", "do": "pass"},
        {"name": "AddPerf.Fast/16777216", "do": "pass", "properties": perf_properties(impl_ms)},
    ]
