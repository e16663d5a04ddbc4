"""The reference's timings, measured once for a whole batch (grader/course/batch/runner.py) and reused for every
student, instead of once per student: {reference target: {perf test: the reference's "impl" series}}.
Kept in OUT/.reference-timings.json while the reference binary (its sha256) and the GPU stay the same.
A batch on several GPUs (--gpus) times the reference on each GPU its students are graded on, pinned
like their runs, and keeps each GPU's in OUT/.reference-timings.gpu<index>.json (reference_file)."""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from grader.execute import runs
from grader.host.environment import GpuProbe, now_iso
from grader.execute.lab_run import PERF_FILTER
from grader.model.progress import Progress
from grader.model.results import PerfSeries, Status

REFERENCE_FILE = ".reference-timings.json"


def reference_file(gpu_index: int | None) -> str:
    """The cache file of one GPU's reference timings (None: the batch without --gpus)."""
    return REFERENCE_FILE if gpu_index is None else f".reference-timings.gpu{gpu_index}.json"


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


class ReferenceTimings(Mapping[str, Mapping[str, PerfSeries]]):
    """The perf series of each reference binary ({target: {test: impl series}}), measured on first use
    (holding the batch's GPU: ahead, while the slots build, BatchGrader.time_references_ahead, or else
    inside the first student's grade) and reused for every student. Kept in
    cache_file while the binary's sha256 and the GPU's name (and device, when pinned) are the same;
    --force measures again. env pins the runs to one GPU (CUDA_VISIBLE_DEVICES); device names it."""

    def __init__(
        self,
        bin_dir: Path,
        timeouts: Mapping[str, float],
        gpu: GpuProbe,
        cache_file: Path | None,
        force: bool = False,
        progress: Progress | None = None,
        env: Mapping[str, str] | None = None,
        device: str = "",
    ) -> None:
        self.env = dict(env or {})
        self.device = device  # "GPU 2 (NVIDIA H100)" or its UUID: which GPU these timings are of
        self.bin_dir = Path(bin_dir)
        self.timeouts = dict(timeouts)  # reference target -> its lab's run timeout
        self.gpu = gpu
        self.cache_file = cache_file
        self.progress = progress or Progress(quiet=True)
        self.measured: list[str] = []  # targets timed by this batch (the others came from the cache)
        self._known: dict[str, dict[str, PerfSeries]] = {}
        self._lock = threading.Lock()
        self._disk: dict[str, Any] = {} if force else self._load()

    def _load(self) -> dict[str, Any]:
        if self.cache_file is None:
            return {}
        try:
            data = json.loads(self.cache_file.read_text())
        except (OSError, ValueError):
            return {}
        if (
            not isinstance(data, dict)
            or data.get("gpu") != self.gpu.name
            or data.get("device", "") != self.device
            or not isinstance(data.get("targets"), dict)
        ):
            return {}
        return data["targets"]

    def _save(self) -> None:
        if self.cache_file is None:
            return
        self.cache_file.parent.mkdir(parents=True, exist_ok=True)
        data: dict[str, Any] = {"gpu": self.gpu.name, "targets": self._disk}
        if self.device:
            data["device"] = self.device
        tmp = self.cache_file.with_name(self.cache_file.name + ".tmp")
        tmp.write_text(json.dumps(data, indent=2) + "\n")
        tmp.replace(self.cache_file)

    def __getitem__(self, target: str) -> Mapping[str, PerfSeries]:
        got = self.get(target)
        if got is None:
            raise KeyError(target)
        return got

    def __iter__(self) -> Iterator[str]:
        return iter(list(self.timeouts))

    def __len__(self) -> int:
        return len(self.timeouts)

    def get(self, target: str, default: Any = None) -> Any:  # type: ignore[override]
        """The target's series; None (the pipeline then times it itself) for an unknown target or no GPU."""
        if target not in self.timeouts or not self.gpu.available:
            return default
        with self._lock:
            if target not in self._known:
                self._known[target] = self._from_disk(target) or self._measure(target)
            return self._known[target]

    def _from_disk(self, target: str) -> dict[str, PerfSeries] | None:
        entry = self._disk.get(target)
        path = self.bin_dir / target
        if (
            not isinstance(entry, dict)
            or not path.is_file()
            or entry.get("binary_sha256") != _sha256_file(path)
        ):
            return None
        try:
            return {name: PerfSeries(**s) for name, s in entry.get("series", {}).items()}
        except TypeError:
            return None

    def _measure(self, target: str) -> dict[str, PerfSeries]:
        path = self.bin_dir / target
        where = f" on {self.device}" if self.device else ""
        self.progress.step(f"timing the reference {target} once for the whole batch{where}")
        run = runs.run_binary(path, None, self.timeouts[target], label="solution", gtest_filter=PERF_FILTER,
                              **({"env": self.env} if self.env else {}))
        series = {
            t.name: t.perf.impl
            for t in run.tests
            if t.status is Status.PASSED and t.perf is not None and t.perf.impl is not None
        }
        self.measured.append(target)
        if series and path.is_file():
            self._disk[target] = {
                "binary_sha256": _sha256_file(path),
                "measured": now_iso(),
                "series": {name: vars(s) for name, s in series.items()},
            }
            self._save()
        return series


__all__ = ["REFERENCE_FILE", "ReferenceTimings", "reference_file"]
