"""The GPUs of a batch (grader/course/batch/runner.py, `--gpus all|0,2,3`): which devices, and the pool that lends them.

Without --gpus a batch runs its tests on whatever GPU the CUDA runtime picks (the machine's first, or
what CUDA_VISIBLE_DEVICES names), one student's runs at a time: the pool then holds one unpinned
device (None). With --gpus it holds each chosen GPU: a worker whose student is built takes a free GPU,
runs that student's whole grade on it (every test binary pinned with CUDA_VISIBLE_DEVICES, the health
probe too), and gives it back. Each GPU runs one grade at a time (clean timings), or gpu_runs side by
side in a correctness-only batch (the mutation gate), as the single GPU does today.

`--gpus` takes nvidia-smi's indices (PCI bus order), whatever CUDA_VISIBLE_DEVICES says; `all` takes
every GPU nvidia-smi lists, or, when CUDA_VISIBLE_DEVICES is set (a scheduler's allocation), those of
them it names (by index or UUID).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from grader.host.environment import GpuDevice, list_gpus
from grader.model.errors import Exit, GraderError

GpuLister = Callable[[], list[GpuDevice]]
ANY = object()  # GpuPool.take(): whichever GPU is free first
USAGE = "--gpus takes 'all' or GPU indices as nvidia-smi numbers them, comma-separated (e.g. 0,2,3)"


def _indices(spec: str) -> list[int]:
    """'0,2,3' -> [0, 2, 3]; a usage error for anything else (empty items, names, negatives, repeats)."""
    parts = [p.strip() for p in spec.split(",")]
    if not parts or any(not p.isdigit() for p in parts):
        raise GraderError(f"--gpus {spec!r}: {USAGE}", Exit.USAGE)
    indices = [int(p) for p in parts]
    repeated = sorted({i for i in indices if indices.count(i) > 1})
    if repeated:
        raise GraderError(f"--gpus {spec!r}: GPU {', '.join(map(str, repeated))} named twice", Exit.USAGE)
    return indices


def _visible(devices: list[GpuDevice], visible: str) -> list[GpuDevice]:
    """The devices CUDA_VISIBLE_DEVICES names (by index or UUID), in its order."""
    chosen: list[GpuDevice] = []
    for entry in (e.strip() for e in visible.split(",")):
        match = next((d for d in devices if entry in (str(d.index), d.uuid) and d not in chosen), None)
        if match is not None:
            chosen.append(match)
    return chosen


def parse_gpus(spec: str | Sequence[GpuDevice] | None, lister: GpuLister | None = None,
               environ: dict[str, str] | None = None) -> list[GpuDevice] | None:
    """The devices --gpus names; None without --gpus (the batch as before). Raises GraderError: usage
    (exit 2) for a malformed value or an index the machine lacks; environment (exit 4) when there is no
    GPU at all."""
    if spec is None:
        return None
    if not isinstance(spec, str):
        devices = list(spec)
        if not devices:
            raise GraderError(f"--gpus: no GPU given; {USAGE}", Exit.USAGE)
        return devices
    text = spec.strip()
    wanted = None if text.lower() == "all" else _indices(text)  # syntax first: no nvidia-smi for a typo
    found = (lister or list_gpus)()
    if not found:
        raise GraderError(f"--gpus {spec}: no GPU found (nvidia-smi lists none)", Exit.ENVIRONMENT)
    if wanted is None:
        visible = (os.environ if environ is None else environ).get("CUDA_VISIBLE_DEVICES")
        if visible is None:
            return found
        chosen = _visible(found, visible)
        if not chosen:
            raise GraderError(
                f"--gpus all: CUDA_VISIBLE_DEVICES={visible!r} names none of this machine's GPUs "
                f"({', '.join(str(d.index) for d in found)}); unset it or name the GPUs with --gpus 0,1,...",
                Exit.USAGE,
            )
        return chosen
    by_index = {d.index: d for d in found}
    missing = [i for i in wanted if i not in by_index]
    if missing:
        raise GraderError(
            f"--gpus {spec}: no GPU {', '.join(map(str, missing))} here; this machine has "
            + ", ".join(d.label for d in found),
            Exit.USAGE,
        )
    return [by_index[i] for i in wanted]


@dataclass
class GpuPool:
    """Lends the batch's GPUs to its workers, each `per_gpu` times at once. devices [None]: one unpinned
    GPU (no --gpus)."""

    devices: list[GpuDevice | None]
    per_gpu: int = 1
    _free: list[GpuDevice | None] = field(default_factory=list, init=False, repr=False)
    _changed: threading.Condition = field(default_factory=threading.Condition, init=False, repr=False)

    def __post_init__(self) -> None:
        self.per_gpu = max(1, self.per_gpu)
        for _ in range(self.per_gpu):  # round-robin: the first grades spread over every GPU
            self._free.extend(self.devices)

    @property
    def pinned(self) -> bool:
        return any(d is not None for d in self.devices)

    @property
    def capacity(self) -> int:
        """How many grades may run at once."""
        return len(self.devices) * self.per_gpu

    @contextmanager
    def take(self, device: GpuDevice | None | object = ANY) -> Iterator[GpuDevice | None]:
        """A free GPU for one student's runs (waiting for one), given back afterwards; `device`: that one
        GPU of the pool (the batch's reference timings, one per GPU)."""
        with self._changed:
            if device is ANY:
                self._changed.wait_for(lambda: bool(self._free))
                taken = self._free.pop(0)
            else:
                if device not in self.devices:
                    raise ValueError(f"{device!r} is not a GPU of this pool")
                self._changed.wait_for(lambda: device in self._free)
                self._free.remove(device)
                taken = device  # type: ignore[assignment]
        try:
            yield taken
        finally:
            with self._changed:
                self._free.append(taken)
                self._changed.notify_all()


__all__ = ["USAGE", "GpuLister", "GpuPool", "parse_gpus"]
