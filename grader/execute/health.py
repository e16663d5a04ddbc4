"""GPU health between runs, and the grade's global time limit.

After a test crashed, hung or hit a CUDA error, the next run could inherit a GPU in a bad state and
its failures would be blamed on the wrong test. HealthMonitor.check() runs cudalab_health_probe
(common/src/health_probe.cu: allocate, launch, copy back, check) first; when it fails it waits and
tries once more, and when that fails too, every later GPU run of this grade is reported not run
with "GPU unhealthy after <test>" instead. env pins the probe to the GPU the grade's runs are pinned
to (a batch with --gpus: CUDA_VISIBLE_DEVICES), so it checks the GPU that faulted.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from grader.isolate import process
from grader.model.text import tail_lines

PROBE_TARGET = "cudalab_health_probe"
PROBE_TIMEOUT_S = 60.0
RETRY_WAIT_S = 5.0
DEFAULT_CAP_BASE_S = 3600.0


def default_cap_s(lab_timeouts: list[float]) -> float:
    """The global limit of a grade when none is given: an hour plus each selected lab's run timeout."""
    return DEFAULT_CAP_BASE_S + sum(lab_timeouts)


@dataclass
class HealthMonitor:
    """locate(): the probe binary (building it when needed), or None when there is none."""

    locate: Callable[[], Path | None]
    gpu_available: bool = True
    retry_wait_s: float | None = None  # None: RETRY_WAIT_S
    on_step: Callable[[str], None] | None = None
    env: Mapping[str, str] | None = None  # over the grader's environment: the GPU the runs are pinned to
    unhealthy: str | None = None  # set once the probe failed twice
    checks: int = 0
    notes: list[str] = field(default_factory=list)
    _binary: Path | None = None
    _located: bool = False

    def locate_probe(self) -> Path | None:
        return self._probe()

    def _probe(self) -> Path | None:
        if not self._located:
            self._located = True
            try:
                self._binary = self.locate()
            except Exception as err:  # noqa: BLE001 - a failed build of the probe must not stop the grade
                self.notes.append(f"the GPU health probe could not be built: {err}")
                self._binary = None
            if self._binary is None and not self.notes:
                self.notes.append("no GPU health probe was available; runs after a fault were not preceded by a check")
        return self._binary

    def probe_env(self) -> dict[str, str] | None:
        """The probe's environment: the grader's, with env over it (None: the grader's as it is)."""
        return {**os.environ, **self.env} if self.env else None

    def check(self, after: str) -> str | None:
        """None when the GPU works (or cannot be checked); otherwise why the next runs must not start."""
        if self.unhealthy:
            return self.unhealthy
        if not self.gpu_available:
            return None
        binary = self._probe()
        if binary is None:
            return None
        if self.on_step:
            self.on_step(f"checking the GPU after {after}")
        output = ""
        for attempt in range(2):
            self.checks += 1
            res = process.run([binary], PROBE_TIMEOUT_S, env=self.probe_env())
            if res.returncode == 0 and not res.timed_out:
                return None
            output = tail_lines(res.output, 3) or ("timed out" if res.timed_out else f"exit code {res.returncode}")
            if attempt == 0:
                time.sleep(RETRY_WAIT_S if self.retry_wait_s is None else self.retry_wait_s)
        self.unhealthy = f"GPU unhealthy after {after} (health probe: {output})"
        self.notes.append(self.unhealthy)
        return self.unhealthy


def probe_locator(builder, build: bool) -> Callable[[], Path | None]:
    """Finds cudalab_health_probe in the builder's bin directory, building it first when allowed."""

    def locate() -> Path | None:
        path = Path(builder.bin_dir) / PROBE_TARGET
        if build and not path.is_file():
            result = builder.build(PROBE_TARGET)
            if not result.ok:
                raise RuntimeError(result.message or "build failed")
        return path if path.is_file() else None

    return locate
