"""Build, run and score labs: the path shared by `build`, `test` and `grade`.

Per lab: build the binary under test (labNN_student, or labNN_solution with --solution) and the
instructor's reference binary, each target on its own; take the list of tests the lab must report
from the reference build; run the binary under test in isolation (grader/gtest.py); run the
reference's perf tests in the same run for the reference timings; attach hints; score.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from . import gtest, hidden, hints
from .cmake import Builder
from .environment import GpuProbe, apply_gpu_properties, new_run_info, now_iso
from .errors import Exit
from .integrity import Guard, GuardOptions
from .labs import Lab
from .progress import Progress
from .results import BuildResult, Category, LabResult, PerfSeries, Results, RunInfo, Status, TestResult
from .scoring import score_lab

PERF_FILTER = "*Perf.*"


@dataclass(frozen=True)
class BinarySet:
    """One test binary of a lab and its reference counterpart (the same tests, linked with the solution)."""

    kind: str  # "student" or "hidden"
    target: str  # labNN_student / labNN_hidden_student
    reference: str | None  # labNN_solution / labNN_hidden_solution, when the solution exists


@dataclass
class RunOptions:
    mode: str = "student"  # "student": grade the student's files; "solution": grade the reference
    build: bool = True  # False: use the binaries already in the build directory
    reference: bool = True  # run the reference's perf tests for reference timings
    env: dict[str, str] = field(default_factory=dict)  # extra environment for the test binaries
    timeout_s: float | None = None  # override every lab's timeout_s
    max_consecutive_timeouts: int = gtest.MAX_CONSECUTIVE_TIMEOUTS
    submission: str = ""
    # Staging, sandbox, limits, forbidden symbols, techniques, sanitizer, GPU health, global time limit
    # (grader/integrity.py). None: the defaults (inspection and health checks only with a real CMake build).
    guard: GuardOptions | None = None
    # Reference timings measured once and reused, {reference target: {test: series}} (grader/batch.py); None: time it here.
    reference_timings: Mapping[str, Mapping[str, PerfSeries]] | None = None


def has_solution(lab: Lab) -> bool:
    return all((lab.solution_dir / f).is_file() for f in lab.student_files)


def binary_sets(lab: Lab) -> list[BinarySet]:
    prefix = lab.target_prefix
    solution = has_solution(lab)
    sets = [BinarySet("student", f"{prefix}_student", f"{prefix}_solution" if solution else None)]
    if (lab.solution_dir / f"test_hidden_{lab.topic}.cu").is_file():
        sets.append(BinarySet("hidden", f"{prefix}_hidden_student", f"{prefix}_hidden_solution" if solution else None))
    return sets


def build_targets(lab: Lab, mode: str = "student") -> list[str]:
    """Every target a grade of this lab builds, in order."""
    targets: list[str] = []
    for bs in binary_sets(lab):
        if mode == "student":
            targets.append(bs.target)
        if bs.reference:
            targets.append(bs.reference)
    return targets


class LabRunner:
    def __init__(self, builder: Builder, gpu: GpuProbe, options: RunOptions, progress: Progress, info: RunInfo,
                 guard: Guard | None = None) -> None:
        self.builder = builder
        self.gpu = gpu
        self.options = options
        self.progress = progress
        self.info = info
        self._gpu_facts_taken = False
        self.guard = guard or Guard(getattr(builder, "root", Path.cwd()), builder, gpu, options.mode, progress,
                                    options.guard, options.build, options.timeout_s)

    # --- building ----------------------------------------------------------------------------------

    def build(self, target: str, lab_result: LabResult) -> BuildResult:
        builder = self.guard.builder_for(target)  # a submission's student targets build apart
        if not self.options.build:
            path = builder.bin_dir / target
            if path.is_file():
                return BuildResult(target=target, ok=True)
            missing = BuildResult(target=target, ok=False, category=Category.HARNESS,
                                  message=f"{path} does not exist (build it first)")
            lab_result.builds.append(missing)
            return missing
        self.progress.step(f"building {target}")
        result = builder.build(target)
        lab_result.builds.append(result)
        if result.ok:
            self.progress.ok(f"built {target} ({result.seconds:.1f} s)")
        else:
            self.progress.fail(f"{target}: {result.message}")
        return result

    # --- running -----------------------------------------------------------------------------------

    def _expected(self, lab_result: LabResult, *candidates: tuple[str, BuildResult | None]) -> list[str] | None:
        """The tests to expect: --gtest_list_tests of the first candidate binary that built."""
        for target, built in candidates:
            if built is None or not built.ok:
                continue
            try:
                return gtest.list_tests(self.builder.bin_dir / target, env=self.options.env)
            except gtest.GtestError as err:
                lab_result.messages.append(f"could not list the tests of {target}: {err}")
        return None

    def _take_gpu_facts(self, properties: dict[str, str]) -> None:
        if not self._gpu_facts_taken and any(k.startswith("gpu_") for k in properties):
            apply_gpu_properties(self.info, properties)
            self._gpu_facts_taken = True

    def _not_run(self, names: list[str], label: str, built: BuildResult) -> list[TestResult]:
        category = built.category or Category.HARNESS
        why = built.message or "it did not build"
        return [
            TestResult(
                name=n,
                status=Status.NOT_RUN,
                kind="perf" if gtest.is_perf_suite(n.split(".", 1)[0]) else "correctness",
                binary=label,
                category=category,
                message=f"{built.target} did not build ({why})",
            )
            for n in names
        ]

    def _reference_timings(
        self, target: str, expected: list[str] | None, timeout: float, names: list[str]
    ) -> dict[str, PerfSeries]:
        cached = self.options.reference_timings.get(target) if self.options.reference_timings is not None else None
        if cached is not None:
            return {n: s for n, s in cached.items() if n in names}
        # Time only the perf tests the student's code was timed in: the others earn nothing anyway.
        gtest_filter = ":".join(sorted(names)) if names else PERF_FILTER
        self.progress.step(f"timing the reference ({target}, {len(names)} perf tests)")
        run = gtest.run_binary(
            self.builder.bin_dir / target,
            [n for n in expected if n in names] if expected is not None else None,
            timeout,
            label="solution",
            gtest_filter=gtest_filter,
            env=self.options.env,
            max_consecutive_timeouts=self.options.max_consecutive_timeouts,
        )
        self._take_gpu_facts(run.properties)
        return {
            t.name: t.perf.impl
            for t in run.tests
            if t.status is Status.PASSED and t.perf is not None and t.perf.impl is not None
        }

    def run_lab(self, lab: Lab) -> LabResult:
        opts = self.options
        result = LabResult(number=lab.number, name=lab.name, title=lab.title, max_score=lab.total_points)
        timeout = opts.timeout_s or lab.timeout_s
        self.progress.heading(f"lab {lab.name}: {lab.title}")
        early = self.guard.lab_blocked(lab)  # the global time limit passed, or the GPU stopped working
        if early is not None:
            result.messages.append(early.message)
            result.tests += early.tests(self.guard.known_tests(lab))
            score_lab(lab, result)
            return result
        hidden_from: int | None = None  # where the hidden binary's lab messages start
        for bs in binary_sets(lab):
            if bs.kind == "hidden":
                hidden_from = len(result.messages)
            if opts.mode == "solution":
                if bs.reference is None:
                    result.messages.append(f"no reference solution in {lab.solution_dir}: nothing to grade in solution mode")
                    continue
                target, reference, label = bs.reference, None, "hidden" if bs.kind == "hidden" else "solution"
            else:
                target, reference, label = bs.target, bs.reference, bs.kind
            refused = self.guard.refusal(lab, bs.kind, target, label)  # staging refused the student's file
            built = self.build(target, result) if refused is None else refused.build
            ref_built = self.build(reference, result) if reference else None
            expected = self._expected(result, (reference or "", ref_built), (target, built))
            blocked = refused or self.guard.gate(lab, bs.kind, target, built, label)  # forbidden symbols, ...
            if blocked is not None:
                result.messages.append(blocked.message)
                result.tests += blocked.tests(expected or [])
                continue
            if not built.ok:
                result.messages.append(f"{target} did not build: {built.message}")
                result.tests += self._not_run(expected or [], label, built)
                continue
            self.progress.step(f"running {target}")
            run = gtest.run_binary(
                self.guard.builder_for(target).bin_dir / target,
                expected,
                timeout,
                label=label,
                env=opts.env,
                max_consecutive_timeouts=opts.max_consecutive_timeouts,
                on_rerun=lambda name: self.progress.step(f"re-running {name} alone"),
                **self.guard.run_kwargs(),
            )
            self.guard.after_binary(target, run.tests)
            self._take_gpu_facts(run.properties)
            result.messages += run.notes
            self._report_counts(target, run.tests)

            perfs = {t.name: t.perf for t in run.tests if t.perf is not None}
            if perfs and opts.mode == "solution":
                for perf in perfs.values():
                    perf.reference = perf.impl  # the reference is itself: ratio 1.0
            elif perfs and opts.reference and reference and ref_built is not None and ref_built.ok:
                refs = self._reference_timings(reference, expected, timeout, list(perfs))
                for name, perf in perfs.items():
                    perf.reference = refs.get(name)
            elif perfs and opts.reference and reference is None:
                result.messages.append("no reference solution in this tree: perf points cannot be scored")
            result.tests += run.tests
        if hidden_from is not None:  # before later stages add messages of their own
            hidden.mark(result, lab.hidden_visibility, hidden_from)
        self.guard.after_runs(lab, result)  # the compute-sanitizer stage
        hints.annotate(result)
        score_lab(lab, result)
        self.guard.after_scoring(lab, result)  # techniques withhold points; sanitizer points
        return result

    def _report_counts(self, target: str, tests: list[TestResult]) -> None:
        counts = {s: sum(t.status is s for t in tests) for s in Status}
        line = (
            f"{target}: {counts[Status.PASSED]} passed, {counts[Status.FAILED]} failed, "
            f"{counts[Status.SKIPPED]} skipped, {counts[Status.NOT_RUN]} not run"
        )
        (self.progress.fail if counts[Status.FAILED] or counts[Status.NOT_RUN] else self.progress.ok)(line)


def run_labs(
    root: Path, labs: list[Lab], builder: Builder, gpu: GpuProbe, options: RunOptions, progress: Progress
) -> Results:
    """Build, run and score each lab. Raises GraderError when the project does not configure."""
    info = new_run_info(root, options.mode, gpu, options.submission)
    if options.build:
        progress.step("configuring")
        builder.configure([lab.name for lab in labs])
    guard = Guard(root, builder, gpu, options.mode, progress, options.guard, options.build, options.timeout_s)
    guard.start(info, labs)  # also configures a submission's own build directory
    runner = LabRunner(builder, gpu, options, progress, info, guard)
    results = Results(run=info)
    for lab in labs:
        results.labs.append(runner.run_lab(lab))
    guard.finish(info)
    if not info.gpu_available and not info.gpu_reason:
        info.gpu_reason = gpu.reason
    info.finished = now_iso()
    return results


def exit_code(results: Results) -> Exit:
    """3 if a target did not build; 1 if a test failed or did not run; 4 if tests could not run for
    lack of a GPU; else 0."""
    labs = results.labs
    if any(not b.ok for lab in labs for b in lab.builds):
        return Exit.BUILD
    tests = [t for lab in labs for t in lab.tests]
    no_gpu = [t for t in tests if t.category is Category.NO_GPU]
    failed = [t for t in tests if t.status in (Status.FAILED, Status.NOT_RUN) and t.category is not Category.NO_GPU]
    if failed:
        return Exit.TEST_FAILURES
    if no_gpu or (not results.run.gpu_available and not any(t.status is Status.PASSED for t in tests)):
        return Exit.ENVIRONMENT
    return Exit.OK
