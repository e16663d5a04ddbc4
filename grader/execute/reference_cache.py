"""The reference's timings kept between grades on one GPU, so a student's next grade of an edited file
does not time the unchanged reference again (about 30 s a course on an H200).

A kept timing is reused only when nothing it depends on changed and the GPU still runs as it did then:
  - the same reference binary (its SHA-256), GPU (name, compute capability, SMs, memory, clock), driver
    and runtime, host and visible devices, perf test and grader version;
  - at most MAX_AGE_S old, and written before this grade began (nothing this grade ran can have made it);
  - every *anchor* the test times, a variant whose code is neither the student's nor the reference's (a
    library, a driver copy), ran within DRIFT of its kept time in the student's run just now. A GPU that
    clocks lower, a neighbour on the device, another driver: the anchors move, and the reference is
    timed again. A test without an anchor is always timed again.
The grade says which perf tests used kept timings, and how old they are; `grade --fresh-reference`
never reuses one. A grade of a submission staged from elsewhere (untrusted code) neither reads nor
writes the cache unless asked, and a batch times the reference once for its whole class anyway.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import time
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path

from grader import __version__
from grader.model.results import Perf, PerfSeries

CACHE_VERSION = 1
MAX_AGE_S = 12 * 3600
# An anchor's kept and new medians may differ by this share (or by three times their combined noise,
# when that is more) before the kept reference timing is thrown away.
DRIFT = 0.03
# Variants no submission's code runs in: the libraries the labs compare against and the driver's copies.
ANCHORS = frozenset({"cub", "thrust", "thrust_merge", "thrust_radix", "cublas", "memcpy", "memcpy2d", "h2d", "d2h"})
GPU_FACTS = ("gpu_name", "gpu_compute_capability", "gpu_sm_count", "gpu_memory_mib", "gpu_sm_clock_mhz",
             "cuda_driver_version", "cuda_runtime_version")


@dataclass
class Reuse:
    """What the cache gave for one reference binary: kept timings by test, and what to say about them."""

    timings: dict[str, PerfSeries] = field(default_factory=dict)
    age_s: float = 0.0
    why: dict[str, str] = field(default_factory=dict)  # the tests to time now, and why each cannot be reused

    @property
    def missing(self) -> list[str]:
        return list(self.why)


def cache_path(reference: Path) -> Path:
    """Beside the reference binary: a rebuild in another tree or preset has a cache of its own."""
    return reference.with_name(f".{reference.name}.timings.json")


def binary_key(reference: Path) -> str:
    """The SHA-256 of the reference binary and of the lab code libraries it loads from its own folders
    (a release's compiled reference is such a library: a new one leaves the executable as it was)."""
    from grader.inspect.elf import ElfError, own_libraries

    try:  # the lab's code libraries (CudaLab.cmake names them lib<target>_code.so), not the toolkit's
        libraries = [p for p in own_libraries(reference) if p.name.endswith("_code.so")]
    except ElfError:
        libraries = sorted(reference.parent.parent.glob("lib/*_solution_code.so"))
    digest = hashlib.sha256()
    for path in [reference, *libraries]:
        digest.update(path.name.encode() + b"\0")
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def gpu_key(properties: Mapping[str, str], env: Mapping[str, str]) -> dict[str, str]:
    key = {k: str(properties.get(k, "")) for k in GPU_FACTS}
    key["host"] = socket.gethostname()
    key["visible_devices"] = env.get("CUDA_VISIBLE_DEVICES", os.environ.get("CUDA_VISIBLE_DEVICES", ""))
    key["grader"] = __version__
    key["version"] = str(CACHE_VERSION)
    return key


def anchors(perf: Perf) -> dict[str, PerfSeries]:
    return {v.name: v for v in perf.variants if v.name in ANCHORS}


def drifted(kept: PerfSeries, now: PerfSeries) -> float | None:
    """The relative difference of two medians when it is past the tolerance, else None."""
    if kept.median_ms <= 0 or now.median_ms <= 0:
        return 1.0
    diff = abs(now.median_ms - kept.median_ms) / kept.median_ms
    allowed = max(DRIFT, 3 * (kept.noise_pct + now.noise_pct) / 100)
    return diff if diff > allowed else None


def _series(data: object) -> PerfSeries | None:
    if not isinstance(data, dict):
        return None
    try:
        return PerfSeries(**{k: data[k] for k in PerfSeries.__dataclass_fields__ if k in data})
    except (TypeError, ValueError):
        return None


def _read(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def load(reference: Path, key: Mapping[str, str], perfs: Mapping[str, Perf], *, started: float,
         now: float | None = None) -> Reuse:
    """The kept timings of these perf tests (the student's run of each, for its anchors) that may be reused."""
    now = time.time() if now is None else now
    out = Reuse()
    path = cache_path(reference)
    data = _read(path)
    entry = data.get("entry") if isinstance(data.get("entry"), dict) else {}
    measured = entry.get("measured_at")
    stale = ""
    if not entry:
        stale = "not timed on this GPU before"
    elif entry.get("key") != {**key, "binary": binary_key(reference)}:
        stale = "the reference, the GPU or its driver changed since it was timed"
    elif not isinstance(measured, (int, float)) or now - measured > MAX_AGE_S:
        stale = "its last timing is more than 12 hours old"
    elif measured >= started or path.stat().st_mtime >= started:
        stale = "its timing was written during this grade"
    tests = entry.get("tests") if isinstance(entry.get("tests"), dict) else {}
    for name, perf in perfs.items():
        why = stale or _reusable(tests.get(name), perf)
        if why:
            out.why[name] = why
            continue
        kept = _series(tests[name].get("impl"))
        assert kept is not None  # _reusable checked it
        out.timings[name] = kept
    if out.timings and isinstance(measured, (int, float)):
        out.age_s = max(0.0, now - measured)
    return out


def _reusable(kept: object, perf: Perf) -> str:
    """'' when the kept timing of one test may stand for a new one, else why not."""
    if not isinstance(kept, dict) or _series(kept.get("impl")) is None:
        return "not timed on this GPU before"
    mine = anchors(perf)
    if not mine:
        return "the test times no library to check the GPU against"
    kept_anchors = kept.get("anchors") if isinstance(kept.get("anchors"), dict) else {}
    for name, series in mine.items():
        old = _series(kept_anchors.get(name))
        if old is None:
            return f"no kept time of {name} to compare with"
        moved = drifted(old, series)
        if moved is not None:
            return f"{name} ran {moved:.0%} apart from when the reference was timed"
    return ""


def store(reference: Path, key: Mapping[str, str], timed: Mapping[str, Perf], *, now: float | None = None) -> None:
    """Keep the reference's timings just measured (its own run's anchors with them). Tests kept earlier and
    not timed now stay when the key is the same; a write that fails loses only the cache."""
    now = time.time() if now is None else now
    path = cache_path(reference)
    full_key = {**key, "binary": binary_key(reference)}
    old = _read(path).get("entry")
    tests: dict[str, object] = {}
    if isinstance(old, dict) and old.get("key") == full_key and isinstance(old.get("tests"), dict):
        tests.update(old["tests"])
    for name, perf in timed.items():
        if perf.impl is None:
            continue
        tests[name] = {"impl": asdict(perf.impl), "anchors": {n: asdict(s) for n, s in anchors(perf).items()}}
    entry = {"key": full_key, "measured_at": now, "tests": tests}
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    try:
        tmp.write_text(json.dumps({"entry": entry}, indent=1))
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)


def age_text(seconds: float) -> str:
    minutes = int(seconds // 60)
    if minutes < 1:
        return "less than a minute ago"
    if minutes < 120:
        return f"{minutes} min ago"
    return f"{minutes // 60} h ago"


def reuse_note(names: Iterable[str], age_s: float) -> str:
    count = len(list(names))
    tests = "perf test" if count == 1 else "perf tests"
    return (f"the reference's timings of {count} {tests} were reused from a grade {age_text(age_s)} on this GPU: "
            "the library kernels your perf tests also time ran within 3 % of their times then "
            "(python3 -m grader grade --fresh-reference times the reference again)")
