"""What a grade was asked to do: RunOptions (commands.py and the batch fill it in), and the parts of it
each stage takes (build/stages.py's Builders, execute/runner.py's RunSettings, execute/lab_run.py's
RunRequest)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from grader.build.cmake import Builder
from grader.build.stages import COMPILE_MEMORY_MIB, COMPILE_TIMEOUT_S
from grader.execute import runs
from grader.execute.lab_run import RunRequest
from grader.execute.runner import RunSettings
from grader.intake.staging import StagedSubmission
from grader.isolate import process
from grader.model.labs import Lab
from grader.model.results import PerfSeries


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
    # Untrusted submissions (grader/intake/): the staged files and the build directory they build in.
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
    profile: bool = False  # after the grade, the scored perf tests under Nsight Compute (grader/profile/)
    compile_timeout_s: float = COMPILE_TIMEOUT_S
    compile_memory_mib: float = COMPILE_MEMORY_MIB
    # Reuse the reference's timings from an earlier grade on this GPU (grader/execute/reference_cache.py):
    # None: in a grade of this tree, not of a submission staged from elsewhere; False: time it every grade.
    reference_cache: bool | None = None
    grade_started: float = 0.0  # time.time() at the start of the grade (set by the pipeline)
    # While one lab runs, build the next (grader/grade/ahead.py). None: when several labs build on a
    # machine with cores to spare; its perf tests still time alone.
    prepare_ahead: bool | None = None
    before_timing: Callable[[], None] | None = None  # set by the pipeline when it prepares ahead

    def settings(self) -> RunSettings:
        return RunSettings(env=dict(self.env), max_seconds=self.max_seconds, sandbox=self.sandbox, confine=self.confine,
                           host_memory_mib=self.host_memory_mib, verify_results=self.verify_results,
                           limits=self.limits)

    def request(self, lab: Lab) -> RunRequest:
        return RunRequest(mode=self.mode, timeout_s=self.timeout_s or lab.timeout_s, perf=self.perf,
                          reference=self.reference, small=self.small, stop_at_first_failure=self.stop_at_first_failure,
                          max_consecutive_timeouts=self.max_consecutive_timeouts,
                          reference_timings=self.reference_timings,
                          reference_cache=self.reference_cache if self.reference_cache is not None
                          else self.staged is None,
                          grade_started=self.grade_started,
                          before_timing=self.before_timing)
