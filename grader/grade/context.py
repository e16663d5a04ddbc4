"""What one grade holds across its labs: the options, where targets build, how runs are confined, the
global time limit and the GPU's health. The stages (grader/grade/pipeline.py) read it; none of them calls back
into another.

  RunOptions     what the caller asked for (commands.py, batch.py)
  GradeContext   the grade in progress: builders, the run policy, the health monitor, notes
  Block          why a binary or a lab does not run, and what its tests then say
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from grader.isolate import process
from grader.execute import runs
from grader.build.cmake import Builder, CMakeBuilder
from grader.host.environment import GpuProbe
from grader.execute.health import HealthMonitor, default_cap_s, probe_locator
from grader.model.labs import Lab
from grader.model.progress import Progress
from grader.model.results import BuildResult, Category, PerfSeries, RunInfo, Status, TestResult
from grader.isolate.bwrap import StagedSubmission, probe_sandbox

_CONFINEMENT_VERDICTS: dict[str, runs.ConfineSettings] = {}  # per probe binary: what works here, once per process
COMPILE_TIMEOUT_S = 120.0  # a student file that takes longer to compile is a compile error
COMPILE_MEMORY_MIB = 8192.0  # virtual memory of each compiler process


@dataclass
class RunOptions:
    mode: str = "student"  # "student": grade the student's files; "solution": grade the reference
    build: bool = True  # False: use the binaries already in the build directory
    reference: bool = True  # run the reference's perf tests for reference timings
    env: dict[str, str] = field(default_factory=dict)  # extra environment for the test binaries
    timeout_s: float | None = None  # override every lab's timeout_s
    max_consecutive_timeouts: int = runs.MAX_CONSECUTIVE_TIMEOUTS
    submission: str = ""
    small: bool = False  # small sizes only, perf tests off (quick checks; never for a real grade)
    perf: bool = True  # False: correctness only, every size, no perf test run (the mutation gate)
    # False: no sanitizer run once a correctness test failed (the mutation gate: the bug is caught already).
    sanitize_failing: bool = True
    # True: a binary's run stops at its first failing test and nothing is re-run alone (the mutation gate).
    stop_at_first_failure: bool = False
    # Reference timings measured once and reused, {reference target: {test: series}} (grader/course/batch/runner.py); None: time it here.
    reference_timings: Mapping[str, Mapping[str, PerfSeries]] | None = None
    # Untrusted submissions (grader/isolate/bwrap.py): the staged files and the build directory they build in.
    staged: StagedSubmission | None = None
    student_builder: Builder | None = None  # where student targets build (default: the main builder)
    max_seconds: float | None = None  # global limit of the grade (None: health.default_cap_s)
    sanitizer_tools: list[str] | None = None  # override lab.toml's [sanitizer] tools ([]: none)
    sandbox: str = "auto"  # bubblewrap: "auto" (when it works) or "off"
    confine: bool = True  # runs under grader/isolate/confine.py (PID namespace, Landlock, memory limit)
    host_memory_mib: float | None = None  # per run, all its processes (None: lab.toml's, else the default)
    checks: bool | None = None  # the static checks (None: with a real CMake build)
    health: bool | None = None  # GPU health probe after faults (None: with a real CMake build and a GPU)
    verify_results: bool = True  # believe only reports written by the harness for the run that asked
    limits: process.Limits | None = None  # None: process.Limits() with an NPROC margin
    compile_timeout_s: float = COMPILE_TIMEOUT_S
    compile_memory_mib: float = COMPILE_MEMORY_MIB


@dataclass
class Block:
    """Why a binary (or a whole lab) does not run, and what its tests then say."""

    category: Category
    message: str  # a lab message
    test_message: str  # each test's message
    label: str = "student"
    target: str = ""

    def tests(self, names: list[str]) -> list[TestResult]:
        from grader.execute.gtest import is_perf_suite

        return [
            TestResult(
                name=n,
                status=Status.NOT_RUN,
                kind="perf" if is_perf_suite(n.split(".", 1)[0]) else "correctness",
                binary=self.label,
                category=self.category,
                message=self.test_message,
            )
            for n in names
        ]

    @property
    def build(self) -> BuildResult:
        """A stand-in for a build that was never attempted."""
        return BuildResult(target=self.target, ok=False, category=self.category, message=self.test_message)


class GradeContext:
    def __init__(self, root: Path, builder: Builder, gpu: GpuProbe, options: RunOptions, progress: Progress,
                 info: RunInfo) -> None:
        self.root = root
        self.builder = builder
        self.gpu = gpu
        self.options = options
        self.mode = options.mode
        self.progress = progress
        self.info = info
        real = isinstance(builder, CMakeBuilder)
        self.real = real
        self.checks = options.checks if options.checks is not None else real
        use_health = options.health if options.health is not None else (real and gpu.available)
        self.health = HealthMonitor(probe_locator(builder, options.build), gpu_available=gpu.available,
                                    on_step=progress.step, env=options.env) if use_health else None
        self.policy = runs.RunPolicy(verify=options.verify_results)
        self._gpu_facts_taken = False

    # --- the grade as a whole ----------------------------------------------------------------------

    def start(self, labs: list[Lab]) -> None:
        """Before the first lab: configure a submission's build, the sandbox, confinement and limits."""
        opts = self.options
        student_builder = opts.student_builder
        if student_builder is not None and student_builder is not self.builder and opts.build:
            self.progress.step("configuring the submission's build")
            student_builder.configure([lab.name for lab in labs])
        cap = opts.max_seconds
        if cap is None:
            cap = default_cap_s([opts.timeout_s or lab.timeout_s for lab in labs])
        sandbox = probe_sandbox(opts.sandbox)
        limits = opts.limits or process.Limits(nproc=process.nproc_margin())
        confine = self._confinement(labs) if opts.confine else None
        if confine is not None and self.health is not None and self.gpu.available and self.real:
            confine = self._self_check(confine)
        self.policy = runs.RunPolicy(
            limits=limits,
            sandbox=sandbox.wrapper if sandbox.active else None,
            confine=confine,
            deadline=time.monotonic() + cap if cap and cap > 0 else None,
            verify=opts.verify_results,
            cap_s=cap,
        )
        info = self.info
        info.sandboxed = sandbox.active
        if not sandbox.active and sandbox.reason and not opts.confine:
            info.notes.append(f"sandbox: {sandbox.reason}")
        elif sandbox.active:
            info.notes.append("sandbox: test binaries ran under bubblewrap (read-only tree, private /tmp, no network)")
        if confine is None:
            info.notes.append("confinement: off (runs were not supervised: no PID namespace, Landlock or memory limit)")
        if cap and cap > 0:
            info.notes.append(f"global time limit of this grade: {cap:g} s")
        if opts.staged is not None:
            info.notes.append(f"submission staged from {opts.staged.source}")
        if opts.small:
            info.notes.append("small mode: only small sizes ran and perf tests were off (not a full grade)")
        if not opts.perf:
            info.notes.append("correctness only: perf tests were not run and earn nothing (not a full grade)")

    def _confinement(self, labs: list[Lab]) -> runs.ConfineSettings:
        lab_memory = max((lab.host_memory_mib for lab in labs if lab.host_memory_mib), default=None)
        memory = self.options.host_memory_mib or lab_memory or runs.DEFAULT_HOST_MEMORY_MIB
        roots = [str(Path(self.builder.bin_dir).resolve().parent)]
        student = self.options.student_builder
        if student is not None:
            roots.append(str(Path(student.bin_dir).resolve().parent))
        from grader.build.cmake import find_nvcc

        nvcc = find_nvcc()
        if nvcc:
            roots.append(str(Path(nvcc).resolve().parent.parent))
        roots.append(sys.base_prefix)  # the grader's own Python (stand-in test binaries are Python scripts)
        build_dir = getattr(self.builder, "build_dir", None)
        if build_dir is None:
            return runs.ConfineSettings(memory_mib=memory, executable=tuple(roots))
        # Each run's directory lies in the build tree, outside /tmp, so each run can get a /tmp of its own.
        return runs.ConfineSettings(memory_mib=memory, executable=tuple(roots), run_dir=str(Path(build_dir) / "runs"),
                                    private_tmp=not str(Path(build_dir).resolve()).startswith("/tmp/"))

    def _self_check(self, confine: runs.ConfineSettings) -> runs.ConfineSettings:
        """The GPU health probe, run confined: a kernel or driver that refuses CUDA under Landlock or a
        namespace must not turn every test into "no CUDA device". When the probe fails confined but works
        without, the layer that breaks it is left out for this grade, and the report says so."""
        try:
            probe = self.health.locate_probe() if self.health is not None else None
        except Exception:  # noqa: BLE001 - no probe: nothing to check with
            probe = None
        if probe is None:
            return confine
        verdict = _CONFINEMENT_VERDICTS.get(str(probe))
        if verdict is None:
            verdict = confine
            for candidate in (confine, replace(confine, landlock=False), replace(confine, landlock=False, namespaces=False)):
                work = Path(tempfile.mkdtemp(prefix="cudalab-probe-"))
                try:
                    res = process.run([probe], 60, confine=candidate.for_run(work, Path(probe)),
                                      env=self.health.probe_env() if self.health is not None else None)
                finally:
                    shutil.rmtree(work, ignore_errors=True)
                if res.returncode == 0:
                    verdict = candidate
                    break
            _CONFINEMENT_VERDICTS[str(probe)] = verdict
        if verdict != confine:
            left = [what for what, on in (("Landlock", verdict.landlock), ("namespaces", verdict.namespaces)) if not on]
            self.info.notes.append(f"confinement: the GPU did not work under {' and '.join(left)} on this machine; "
                                   f"runs went without {' and '.join(left)}")
        return verdict

    def note_confinement(self, proc_status: dict | None) -> None:
        """Say once how runs were confined (from the first supervised run's status line)."""
        confine = self.policy.confine
        if not proc_status or confine is None or any(n.startswith("confinement:") for n in self.info.notes):
            return
        self.info.notes.append(f"confinement: {proc_status.get('isolation', '?')}, Landlock "
                               f"{proc_status.get('landlock', '?')}, host memory limit {confine.memory_mib:g} MiB")

    def finish(self) -> None:
        if self.health is not None:
            for note in self.health.notes:
                if note not in self.info.notes:
                    self.info.notes.append(note)

    # --- where targets build -----------------------------------------------------------------------

    def is_student_target(self, target: str) -> bool:
        return self.mode == "student" and ("_student" in target)

    def builder_for(self, target: str) -> Builder:
        if self.options.student_builder is not None and self.is_student_target(target):
            return self.options.student_builder
        return self.builder

    def sources(self, lab: Lab) -> list[Path]:
        """The files the graded code compiles from (the solution's in solution mode)."""
        files = [f for f in lab.student_files if f.endswith(".cu")] or list(lab.student_files)
        if self.mode == "solution":
            return [lab.solution_dir / f for f in files]
        staged = self.options.staged.lab(lab.name) if self.options.staged else None
        out = []
        for f in files:
            if staged is not None and f in staged.files:
                out.append(self.options.staged.path_of(lab, f))  # type: ignore[union-attr]
            else:
                out.append(lab.path / f)
        return out

    # --- stop conditions ---------------------------------------------------------------------------

    def stopped(self) -> Block | None:
        """Why nothing more may run: the global time limit passed, or the GPU stopped working."""
        if self.policy.expired():
            return Block(Category.TIMEOUT,
                         f"not graded: the grade reached its global time limit ({self.policy.cap_s:g} s)",
                         self.policy.cap_message())
        if self.health is not None and self.health.unhealthy:
            return Block(Category.HARNESS, f"not graded: {self.health.unhealthy}", self.health.unhealthy)
        return None

    def known_tests(self, lab: Lab) -> list[str]:
        """The lab's tests from a reference binary already built (no build), or []."""
        for target in (f"{lab.target_prefix}_solution", f"{lab.target_prefix}_student"):
            path = Path(self.builder.bin_dir) / target
            if path.is_file():
                try:
                    return runs.list_tests(path)
                except Exception:  # noqa: BLE001 - any failure: the names are not known
                    continue
        return []

    def on_fault(self):
        return self.health.check if self.health is not None else None

    def after_fault(self, what: str) -> None:
        if self.health is not None:
            self.health.check(what)
