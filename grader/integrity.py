"""Everything the grade pipeline does to stay correct on the worst submission, in one place.

grader/pipeline.py calls a Guard at a few points of each lab:
  lab_blocked()   before a lab: the grade's global time limit passed, or the GPU stopped working
  refusal()       before building the student target: the submission's file was refused at staging
                  (grader/sandbox.py), or its #includes leave the lab
  builder_for()   the student target of a submission builds in a build directory of its own
  gate()          after building: forbidden symbols in the student object (grader/techniques.py), the
                  time limit, GPU health; a hit means the binary never runs
  run_kwargs()    limits, sandbox, deadline and results-file checks of every run, and the GPU health
                  check after a fault (grader/health.py)
  after_runs()    the compute-sanitizer stage (grader/sanitizer.py)
  after_scoring() techniques: missing ones withhold points; sanitizer points
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import gtest, hints, process, sanitizer
from .cmake import Builder, CMakeBuilder
from .environment import GpuProbe
from .health import HealthMonitor, default_cap_s, probe_locator
from .labs import Lab
from .progress import Progress
from .results import BuildResult, Category, LabResult, RunInfo, Status, TestResult
from .sandbox import Sandbox, StagedSubmission, check_source, probe_sandbox
from .techniques import Inspection, Inspector, apply_techniques


@dataclass
class GuardOptions:
    staged: StagedSubmission | None = None  # a submission's staging (stage_submission)
    student_builder: Builder | None = None  # where student targets build (default: the main builder)
    max_seconds: float | None = None  # global limit of the grade (None: health.default_cap_s)
    sanitizer_tools: list[str] | None = None  # override lab.toml's [sanitizer] tools ([]: none)
    sandbox: str = "auto"  # "auto": bubblewrap when it works; "off"
    inspect: bool | None = None  # forbidden symbols and techniques (None: with a real CMake build)
    health: bool | None = None  # GPU health probe after faults (None: with a real CMake build and a GPU)
    verify_results: bool = True  # believe only results files that look written by the harness
    limits: process.Limits | None = None  # None: process.Limits() with an NPROC margin


@dataclass
class Block:
    """Why a binary (or a whole lab) does not run, and what its tests then say."""

    category: Category
    message: str  # a lab message
    test_message: str  # each test's message
    label: str = "student"
    target: str = ""

    def tests(self, names: list[str]) -> list[TestResult]:
        return [
            TestResult(
                name=n,
                status=Status.NOT_RUN,
                kind="perf" if gtest.is_perf_suite(n.split(".", 1)[0]) else "correctness",
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


@dataclass
class _Graded:
    target: str
    sources: list[Path]
    build_dir: Path | None
    bin_dir: Path
    ran: bool = False
    blocked: Block | None = None
    inspection: Inspection | None = None
    label: str = "student"


class Guard:
    def __init__(self, root: Path, builder: Builder, gpu: GpuProbe, mode: str, progress: Progress,
                 options: GuardOptions | None = None, build: bool = True, timeout_s: float | None = None) -> None:
        self.root = root
        self.builder = builder
        self.gpu = gpu
        self.mode = mode
        self.progress = progress
        self.options = options or GuardOptions()
        self.build_enabled = build
        self.timeout_s = timeout_s
        real = isinstance(builder, CMakeBuilder)
        self.inspect = self.options.inspect if self.options.inspect is not None else real
        use_health = self.options.health if self.options.health is not None else (real and gpu.available)
        self.health = HealthMonitor(probe_locator(builder, build), gpu_available=gpu.available,
                                    on_step=progress.step) if use_health else None
        self.inspector = Inspector(root) if self.inspect else None
        self.sandbox: Sandbox = Sandbox(None, "not started")
        self.policy = gtest.RunPolicy(verify=self.options.verify_results)
        self._graded: dict[str, _Graded] = {}
        self._forbidden: dict[str, Block | None] = {}
        self._notes: dict[str, list[str]] = {}  # per lab: what could not be checked

    # --- the grade as a whole ----------------------------------------------------------------------

    def start(self, info: RunInfo, labs: list[Lab]) -> None:
        """Before the first lab: configure a submission's build, probe the sandbox, set the limits."""
        student_builder = self.options.student_builder
        if student_builder is not None and student_builder is not self.builder and self.build_enabled:
            self.progress.step("configuring the submission's build")
            student_builder.configure([lab.name for lab in labs])
        cap = self.options.max_seconds
        if cap is None:
            cap = default_cap_s([self.timeout_s or lab.timeout_s for lab in labs])
        self.sandbox = probe_sandbox(self.options.sandbox)
        limits = self.options.limits or process.Limits(nproc=process.nproc_margin())
        self.policy = gtest.RunPolicy(
            limits=limits,
            sandbox=self.sandbox.wrapper if self.sandbox.active else None,
            deadline=time.monotonic() + cap if cap and cap > 0 else None,
            verify=self.options.verify_results,
            cap_s=cap,
        )
        info.sandboxed = self.sandbox.active
        if not self.sandbox.active and self.sandbox.reason:
            info.notes.append(f"sandbox: {self.sandbox.reason}")
        elif self.sandbox.active:
            info.notes.append("sandbox: test binaries ran under bubblewrap (read-only tree, private /tmp, no network)")
        if cap and cap > 0:
            info.notes.append(f"global time limit of this grade: {cap:g} s")
        if self.options.staged is not None:
            info.notes.append(f"submission staged from {self.options.staged.source}")

    def finish(self, info: RunInfo) -> None:
        if self.health is not None:
            for note in self.health.notes:
                if note not in info.notes:
                    info.notes.append(note)

    # --- where targets build -----------------------------------------------------------------------

    def _is_student_target(self, target: str) -> bool:
        return self.mode == "student" and target.endswith("_student")

    def builder_for(self, target: str) -> Builder:
        if self.options.student_builder is not None and self._is_student_target(target):
            return self.options.student_builder
        return self.builder

    def sources(self, lab: Lab) -> list[Path]:
        """The files the graded binary compiles from the student's side (the solution's in solution mode)."""
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

    # --- before and after building -------------------------------------------------------------------

    def lab_blocked(self, lab: Lab) -> Block | None:
        if self.policy.expired():
            return Block(Category.TIMEOUT, f"not graded: the grade reached its global time limit ({self.policy.cap_s:g} s)",
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
                    return gtest.list_tests(path)
                except gtest.GtestError:
                    continue
        return []

    def refusal(self, lab: Lab, kind: str, target: str, label: str) -> Block | None:
        """Before building a student target: the staged file was refused, or its includes are not allowed."""
        if self.mode != "student":
            return None
        staged = self.options.staged.lab(lab.name) if self.options.staged else None
        if staged is not None and staged.refused:
            what = "refused" if staged.category is Category.COMPILE_ERROR else "rejected"
            reasons = "; ".join(staged.errors)
            return Block(staged.category or Category.COMPILE_ERROR, f"the submission's file was {what}: {reasons}",
                         f"the submission's file was {what}: {reasons}", label, target)
        if staged is None:  # grading the working tree: the same include rules
            problems = []
            for src in self.sources(lab):
                try:
                    problems += [f"{src.name}: {p}" for p in check_source(src.read_text(errors="replace"), lab)]
                except OSError:
                    continue
            if problems:
                reasons = "; ".join(problems)
                return Block(Category.FORBIDDEN_CALL, f"the lab file was rejected: {reasons}",
                             f"the lab file was rejected: {reasons}", label, target)
        return None

    def gate(self, lab: Lab, kind: str, target: str, built: BuildResult, label: str) -> Block | None:
        """After building: may the binary run? Forbidden symbols, the time limit, GPU health."""
        builder = self.builder_for(target)
        graded = kind == "student" and (self.mode == "solution" or self._is_student_target(target))
        if graded:
            self._graded[lab.name] = _Graded(target, self.sources(lab), getattr(builder, "build_dir", None),
                                             Path(builder.bin_dir), label=label)
        link_failed = not built.ok and built.category is Category.LINK_ERROR
        if not built.ok and not link_failed:
            return None
        block = self._forbidden_block(lab, target, builder, label) if self.inspect else None
        if block is None and not built.ok:
            return None
        if block is None:
            if self.policy.expired():
                block = Block(Category.TIMEOUT, f"{target} not run: the grade reached its global time limit",
                              self.policy.cap_message(), label, target)
            elif self.health is not None and self.health.unhealthy:
                block = Block(Category.HARNESS, f"{target} not run: {self.health.unhealthy}",
                              self.health.unhealthy, label, target)
        if block is not None and graded:
            self._graded[lab.name].blocked = block
        return block

    def _forbidden_block(self, lab: Lab, target: str, builder: Builder, label: str) -> Block | None:
        key = f"{lab.name}:{self.mode}"
        if key in self._forbidden:
            cached = self._forbidden[key]
            return None if cached is None else Block(cached.category, cached.message, cached.test_message, label, target)
        assert self.inspector is not None
        self.progress.step(f"checking the symbols of {target}")
        hits, inspection = self.inspector.forbidden(lab, self.sources(lab), target, getattr(builder, "build_dir", None))
        graded = self._graded.get(lab.name)
        if graded is not None and graded.target == target:
            graded.inspection = inspection
        block = None
        if hits:
            shown = "; ".join(hits[:6]) + (f"; and {len(hits) - 6} more" if len(hits) > 6 else "")
            block = Block(Category.FORBIDDEN_CALL, f"{target} was not run: forbidden symbols in the compiled lab file: {shown}",
                          f"the compiled lab file uses forbidden symbols: {shown}", label, target)
            self.progress.fail(f"{target}: forbidden symbols: {shown}")
        self._forbidden[key] = block
        for note in inspection.notes:
            if note not in self._notes.setdefault(lab.name, []):
                self._notes[lab.name].append(note)
        return block

    # --- running ------------------------------------------------------------------------------------

    def run_kwargs(self) -> dict[str, Any]:
        return {"policy": self.policy, "on_fault": self.health.check if self.health is not None else None}

    def after_binary(self, target: str, tests: list[TestResult]) -> None:
        """After a binary's run: if its last process faulted, check the GPU before anything else runs."""
        faults = (Category.CRASH, Category.TIMEOUT, Category.CUDA_ERROR, Category.HARNESS)
        if self.health is not None and any(t.category in faults and t.status is not Status.PASSED for t in tests):
            self.health.check(target)
        graded = next((g for g in self._graded.values() if g.target == target), None)
        if graded is not None:
            graded.ran = True

    # --- after the runs -----------------------------------------------------------------------------

    def after_runs(self, lab: Lab, result: LabResult) -> None:
        """The compute-sanitizer stage over the graded binary."""
        tools = sanitizer.tools_for(lab, self.options.sanitizer_tools)
        graded = self._graded.get(lab.name)
        if not tools or graded is None:
            return
        label = graded.label
        if graded.blocked is not None or not graded.ran:
            why = graded.blocked.test_message if graded.blocked else "the binary did not build"
            result.tests += sanitizer.not_run(tools, why, label=label)
            return
        if not self.gpu.available or self.info_gpu_missing(result):
            for t in sanitizer.not_run(tools, "no GPU on this machine", Category.NO_GPU, label):
                t.status = Status.SKIPPED
                result.tests.append(t)
            return
        tool_path = sanitizer.find_sanitizer()
        if tool_path is None:
            for t in sanitizer.not_run(tools, "compute-sanitizer is not installed (it comes with the CUDA toolkit)",
                                       label=label):
                t.status = Status.SKIPPED
                result.tests.append(t)
            return
        timeout = float(lab.sanitizer.get("timeout_s", 0) or 0) or (3 * self.timeout_s if self.timeout_s else lab.timeout_s)
        for tool in tools:
            stop = self.lab_blocked(lab)
            if stop is not None:
                result.tests += sanitizer.not_run([tool], stop.test_message, stop.category, label)
                continue
            self.progress.step(f"compute-sanitizer {tool} on {graded.target} (small sizes)")
            run = sanitizer.run_tool(tool_path, tool, graded.bin_dir / graded.target, timeout, policy=self.policy,
                                     label=label)
            (self.progress.ok if run.result.status is Status.PASSED else self.progress.fail)(
                f"{run.result.name}: {run.result.status.value}"
                + (f" ({len(run.findings)} distinct finding(s))" if run.findings else "")
            )
            result.tests.append(run.result)
            if run.result.status is not Status.PASSED and self.health is not None:
                self.health.check(f"compute-sanitizer {tool}")

    @staticmethod
    def info_gpu_missing(result: LabResult) -> bool:
        """Every test of the lab skipped for lack of a GPU: the binary saw none."""
        gpu_tests = [t for t in result.tests if t.category is Category.NO_GPU]
        return bool(gpu_tests) and len(gpu_tests) == len([t for t in result.tests if not t.name.startswith("sanitizer.")])

    def after_scoring(self, lab: Lab, result: LabResult) -> None:
        """Techniques (points withheld when missing), sanitizer points, hints for the new entries."""
        result.messages += [n for n in self._notes.pop(lab.name, []) if n not in result.messages]
        staged = self.options.staged.lab(lab.name) if self.options.staged else None
        if staged is not None:
            result.messages += [n for n in staged.notes() if n not in result.messages]
        graded = self._graded.get(lab.name)
        checkable = graded is not None and graded.blocked is None and self.inspector is not None and lab.techniques
        if checkable and (graded.ran or self._built_ok(result, graded.target)):
            self.progress.step(f"checking techniques of {graded.target}")
            outcomes, notes = self.inspector.techniques(lab, graded.sources, graded.target, graded.build_dir,
                                                        graded.inspection)
            result.messages += notes
            withheld = apply_techniques(lab, result, outcomes, graded.label)
            missing = [o for o in outcomes if not o.found]
            if missing:
                self.progress.fail(f"{len(missing)} technique(s) missing: {withheld:g} point(s) withheld")
            elif outcomes:
                self.progress.ok(f"{len(outcomes)} technique(s) found")
        sanitizer.apply_points(lab, result, [t for t in result.tests if t.name.startswith(f"{sanitizer.SUITE}.")])
        hints.annotate(result)

    @staticmethod
    def _built_ok(result: LabResult, target: str) -> bool:
        return any(b.target == target and b.ok for b in result.builds) or not any(b.target == target for b in result.builds)
