"""What runs a grade's test binaries: how each run is confined (grader/isolate/), the grade's global time
limit and the GPU's health. The run and sanitize stages are handed one Runner; it calls nothing above
itself, and what it learns for the report (how runs were confined, the health monitor's notes) it keeps
in notes for the assemble stage.

open_runner() works out the confinement once per grade: bubblewrap where it starts, the supervisor's
PID namespace, Landlock and memory limit, and, with a GPU, a trial of the health probe under them (a
kernel that refuses CUDA under Landlock or a namespace must not turn every test into "no CUDA device").
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from grader.execute import runs
from grader.execute.health import HealthMonitor, default_cap_s
from grader.host.toolkit import find_nvcc
from grader.isolate import process
from grader.isolate.bwrap import probe_sandbox
from grader.model.block import Block
from grader.model.progress import Progress
from grader.model.results import Category

# Per probe binary, once per process: which layers the GPU works under here, (Landlock, namespaces). Only the
# layers are kept: each grade's own settings (its memory limit, its executables, its run folder) stay its own.
_CONFINEMENT_VERDICTS: dict[str, tuple[bool, bool]] = {}


@dataclass(frozen=True)
class RunSettings:
    """What the caller asked of the runs (grader/grade/options.py's RunOptions gives these)."""

    env: Mapping[str, str] = field(default_factory=dict)
    max_seconds: float | None = None  # the grade's global limit (None: health.default_cap_s)
    sandbox: str = "auto"  # bubblewrap: "auto" (when it works) or "off"
    confine: bool = True
    host_memory_mib: float | None = None
    verify_results: bool = True
    limits: process.Limits | None = None


@dataclass
class Runner:
    """Runs binaries under one policy; stopped() says when nothing more may run."""

    policy: runs.RunPolicy
    progress: Progress
    env: Mapping[str, str] = field(default_factory=dict)
    health: HealthMonitor | None = None
    notes: list[str] = field(default_factory=list)  # for the report's run notes, in order
    memory_fixed: bool = False  # the grade set one host-memory limit for every lab (--max-host-memory)

    def for_lab(self, memory_mib: float | None) -> Runner:
        """This runner with a lab's own host-memory limit (lab.toml's max_host_memory_mib) on its runs; the
        same runner where the lab sets none, the grade fixed one for all, or runs are not confined. The
        copy shares the notes, the health monitor and the deadline."""
        confine = self.policy.confine
        if memory_mib is None or self.memory_fixed or confine is None or confine.memory_mib == memory_mib:
            return self
        return replace(self, policy=replace(self.policy, confine=replace(confine, memory_mib=memory_mib)))

    def stopped(self) -> Block | None:
        """Why nothing more may run: the global time limit passed, or the GPU stopped working."""
        if self.policy.expired():
            return Block(Category.TIMEOUT, f"not graded: the grade reached its global time limit ({self.policy.cap_s:g} s)",
                         self.policy.cap_message())
        if self.health is not None and self.health.unhealthy:
            return Block(Category.HARNESS, f"not graded: {self.health.unhealthy}", self.health.unhealthy)
        return None

    def check_health(self, what: str) -> None:
        """After a crash, hang or CUDA error: is the GPU still well? (The health monitor decides.)"""
        if self.health is not None:
            self.health.check(what)

    def fault_check(self, shown: Callable[[str], str]) -> Callable[[str], str | None] | None:
        """The health check runs.run_binary calls after a faulted run, naming what it says in progress as
        shown() renders it."""
        check = self.health.check if self.health is not None else None
        return (lambda what: check(shown(what))) if check is not None else None

    def note_confinement(self, proc_status: dict | None) -> None:
        """Say once how runs were confined (from the first supervised run's status line)."""
        confine = self.policy.confine
        if not proc_status or confine is None or any(n.startswith("confinement:") for n in self.notes):
            return
        limit = (f"{confine.memory_mib:g} MiB" if self.memory_fixed
                 else f"each lab's max_host_memory_mib (else {runs.DEFAULT_HOST_MEMORY_MIB:g} MiB)")
        self.notes.append(f"confinement: {proc_status.get('isolation', '?')}, Landlock "
                          f"{proc_status.get('landlock', '?')}, host memory limit {limit}")

    def finish(self) -> list[str]:
        """The notes for the report, the health monitor's last."""
        out = list(self.notes)
        if self.health is not None:
            out += [n for n in self.health.notes if n not in out]
        return out


def open_runner(settings: RunSettings, *, timeouts: list[float], roots: list[Path], run_dir: Path | None,
                health: HealthMonitor | None, gpu_available: bool, real: bool, progress: Progress) -> Runner:
    """The Runner of one grade. timeouts: each lab's run timeout (the global cap follows from them); roots:
    what a confined run may execute (the build trees); run_dir: where each run gets its folder (None: under
    /tmp); real: a CMake build (not the tests' fakes). Its host-memory limit is --max-host-memory's, else
    the default; Runner.for_lab gives each lab's runs the lab's own."""
    cap = settings.max_seconds if settings.max_seconds is not None else default_cap_s(timeouts)
    sandbox = probe_sandbox(settings.sandbox)
    limits = settings.limits or process.Limits(nproc=process.nproc_margin())
    notes: list[str] = []
    confine = _confinement(settings, roots, run_dir) if settings.confine else None
    if confine is not None and health is not None and gpu_available and real:
        confine = _self_check(confine, health, notes)
    policy = runs.RunPolicy(limits=limits, sandbox=sandbox.wrapper if sandbox.active else None, confine=confine,
                            deadline=time.monotonic() + cap if cap and cap > 0 else None,
                            verify=settings.verify_results, cap_s=cap)
    if not sandbox.active and sandbox.reason and not settings.confine:
        notes.append(f"sandbox: {sandbox.reason}")
    elif sandbox.active:
        notes.append("sandbox: test binaries ran under bubblewrap (read-only tree, private /tmp, no network)")
    if confine is None:
        notes.append("confinement: off (runs were not supervised: no PID namespace, Landlock or memory limit)")
    if cap and cap > 0:
        notes.append(f"global time limit of this grade: {cap:g} s")
    return Runner(policy, progress, dict(settings.env), health, notes,
                  memory_fixed=settings.host_memory_mib is not None)


def _confinement(settings: RunSettings, roots: list[Path], run_dir: Path | None) -> runs.ConfineSettings:
    memory = settings.host_memory_mib or runs.DEFAULT_HOST_MEMORY_MIB
    executable = [str(Path(r).resolve()) for r in roots]
    nvcc = find_nvcc()
    if nvcc:
        executable.append(str(Path(nvcc).resolve().parent.parent))
    executable.append(sys.base_prefix)  # the grader's own Python (stand-in test binaries are Python scripts)
    if run_dir is None:
        return runs.ConfineSettings(memory_mib=memory, executable=tuple(executable))
    # Each run's directory lies in the build tree, outside /tmp, so each run can get a /tmp of its own.
    return runs.ConfineSettings(memory_mib=memory, executable=tuple(executable), run_dir=str(run_dir),
                                private_tmp=not str(run_dir.parent.resolve()).startswith("/tmp/"))


def _self_check(confine: runs.ConfineSettings, health: HealthMonitor, notes: list[str]) -> runs.ConfineSettings:
    """The GPU health probe, run confined. When it fails confined but works without, the layer that breaks
    it is left out for this grade, and the report says so."""
    try:
        probe = health.locate_probe()
    except Exception:  # noqa: BLE001 - no probe: nothing to check with
        probe = None
    if probe is None:
        return confine
    layers = _CONFINEMENT_VERDICTS.get(str(probe))
    if layers is None:
        layers = (True, True)
        for candidate in (confine, replace(confine, landlock=False), replace(confine, landlock=False, namespaces=False)):
            work = Path(tempfile.mkdtemp(prefix="cudalab-probe-"))
            try:
                res = process.run([probe], 60, confine=candidate.for_run(work, Path(probe)), env=health.probe_env())
            finally:
                shutil.rmtree(work, ignore_errors=True)
            if res.returncode == 0:
                layers = (candidate.landlock or not confine.landlock, candidate.namespaces or not confine.namespaces)
                break
        _CONFINEMENT_VERDICTS[str(probe)] = layers
    verdict = replace(confine, landlock=confine.landlock and layers[0], namespaces=confine.namespaces and layers[1])
    if verdict != confine:
        left = [what for what, on in (("Landlock", verdict.landlock), ("namespaces", verdict.namespaces)) if not on]
        notes.append(f"confinement: the GPU did not work under {' and '.join(left)} on this machine; "
                     f"runs went without {' and '.join(left)}")
    return verdict
