"""Build, run and score labs: the path shared by `build`, `test` and `grade`.

The grade of one lab is a straight line of stages, each in a module of its own:

  stage          the submission's files, copied into a staging tree (grader/isolate/bwrap.py, before the grade)
  static checks  what the preprocessor reads and what the compiler made (grader/inspect/static_checks.py)
  build          the test binaries of the lab, and the reference's (grader/build/cmake.py)
  run            each binary in isolation, confined, its report checked (grader/execute/runs.py)
  sanitizer      compute-sanitizer over the graded binary (grader/execute/sanitizer.py)
  score          rubric, perf against the reference, plausibility, techniques (grader/score/scoring.py)

Nothing of the student's file runs before the static checks passed; each stage takes what the earlier
ones produced and none calls back into another.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from grader.model import hidden
from grader.score import hints
from grader.execute import runs
from grader.execute import sanitizer
from grader.score import scoring
from grader.inspect import static_checks
from grader.build.cmake import Builder
from grader.grade.context import Block, GradeContext, RunOptions
from grader.host.environment import GpuProbe, apply_gpu_properties, new_run_info, now_iso
from grader.model.errors import Exit
from grader.model.labs import Lab
from grader.model.progress import Progress
from grader.model.results import BuildResult, Category, LabResult, PerfSeries, Results, Status, TestResult

__all__ = ["PERF_FILTER", "BinarySet", "RunOptions", "binary_sets", "build_targets", "exit_code", "grade_lab",
           "has_solution", "run_labs"]

PERF_FILTER = "*Perf.*"
CORRECTNESS_FILTER = "-*Perf.*"


@dataclass(frozen=True)
class BinarySet:
    """One test binary of a lab and its reference counterpart (the same tests, linked with the solution)."""

    kind: str  # "student" or "hidden"
    target: str  # labNN_student / labNN_hidden_student
    reference: str | None  # labNN_solution / labNN_hidden_solution, when the solution exists


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
    """Every test binary a grade of this lab builds, in order."""
    targets: list[str] = []
    for bs in binary_sets(lab):
        if mode == "student":
            targets.append(bs.target)
        if bs.reference:
            targets.append(bs.reference)
    return targets


# --- stages ----------------------------------------------------------------------------------------------


def build(ctx: GradeContext, target: str, result: LabResult) -> BuildResult:
    """The build stage for one target (or, without building, the binary that is already there)."""
    builder = ctx.builder_for(target)
    if not ctx.options.build:
        path = builder.bin_dir / target
        if path.is_file():
            return BuildResult(target=target, ok=True)
        missing = BuildResult(target=target, ok=False, category=Category.HARNESS,
                              message=f"{path} does not exist (build it first)")
        result.builds.append(missing)
        return missing
    ctx.progress.step(f"building {target}")
    built = builder.build(target)
    result.builds.append(built)
    if built.ok:
        ctx.progress.ok(f"built {target} ({built.seconds:.1f} s)")
    else:
        ctx.progress.fail(f"{target}: {hidden.build_message(target, built.message, conceal=True)}")
    return built


def expected_tests(ctx: GradeContext, result: LabResult, *candidates: tuple[str, BuildResult | None]) -> list[str] | None:
    """The tests to expect: --gtest_list_tests of the first candidate binary that built (the reference first)."""
    for target, built in candidates:
        if not target or built is None or not built.ok:
            continue
        try:
            return runs.list_tests(ctx.builder_for(target).bin_dir / target, env=ctx.options.env)
        except Exception as err:  # noqa: BLE001 - GtestError and OS errors alike: try the next one
            result.messages.append(f"could not list the tests of {target}: {err}")
    return None


def not_built(names: list[str], label: str, built: BuildResult) -> list[TestResult]:
    category = built.category or Category.HARNESS
    why = built.message or "it did not build"
    return [
        TestResult(name=n, status=Status.NOT_RUN, kind="perf" if runs.is_perf_suite(n.split(".", 1)[0]) else "correctness",
                   binary=label, category=category, message=f"{built.target} did not build ({why})")
        for n in names
    ]


def _take_gpu_facts(ctx: GradeContext, properties: dict[str, str]) -> None:
    if not ctx._gpu_facts_taken and any(k.startswith("gpu_") for k in properties):
        apply_gpu_properties(ctx.info, properties)
        ctx._gpu_facts_taken = True


def reference_timings(ctx: GradeContext, target: str, expected: list[str] | None, timeout: float,
                      names: list[str]) -> dict[str, PerfSeries]:
    """The reference's own timings of the perf tests the student was timed in, measured in this run."""
    cached = ctx.options.reference_timings.get(target) if ctx.options.reference_timings is not None else None
    if cached is not None:
        return {n: s for n, s in cached.items() if n in names}
    gtest_filter = ":".join(sorted(names)) if names else PERF_FILTER
    ctx.progress.step(f"timing the reference ({target}, {len(names)} perf tests)")
    run = runs.run_binary(
        ctx.builder.bin_dir / target,
        [n for n in expected if n in names] if expected is not None else None,
        timeout, label="solution", gtest_filter=gtest_filter, env=ctx.options.env,
        max_consecutive_timeouts=ctx.options.max_consecutive_timeouts, policy=ctx.policy,
    )
    _take_gpu_facts(ctx, run.properties)
    return {t.name: t.perf.impl for t in run.tests
            if t.status is Status.PASSED and t.perf is not None and t.perf.impl is not None}


def run_binary(ctx: GradeContext, lab: Lab, target: str, label: str, expected: list[str] | None,
               timeout: float) -> runs.BinaryRun:
    """The run stage for one binary. Progress lines are student-facing (CI logs publish them): a hidden
    test whose visibility conceals it is never named there, nor in the GPU health check's notes."""
    ctx.progress.step(f"running {target}")
    conceal = label == hidden.BINARY and hidden.conceals(lab.hidden_visibility, ctx.mode)

    def shown(name: str) -> str:
        return hidden.progress_name(name, target, conceal)

    check = ctx.on_fault()
    gtest_filter = None
    if not ctx.options.perf:  # correctness only: perf tests are neither run nor expected
        gtest_filter = CORRECTNESS_FILTER
        expected = None if expected is None else [n for n in expected if not runs.is_perf_suite(n.split(".", 1)[0])]
    run = runs.run_binary(
        ctx.builder_for(target).bin_dir / target, expected, timeout, label=label, env=ctx.options.env,
        gtest_filter=gtest_filter, stop_at_first_failure=ctx.options.stop_at_first_failure,
        max_consecutive_timeouts=ctx.options.max_consecutive_timeouts,
        on_rerun=lambda name: ctx.progress.step(f"re-running {shown(name)} alone"),
        policy=ctx.policy, on_fault=(lambda what: check(shown(what))) if check is not None else None,
        small=ctx.options.small,
    )
    faults = (Category.CRASH, Category.TIMEOUT, Category.CUDA_ERROR, Category.HARNESS)
    if any(t.category in faults and t.status is not Status.PASSED for t in run.tests):
        ctx.after_fault(target)
    _take_gpu_facts(ctx, run.properties)
    ctx.note_confinement(run.confinement)
    counts = {s: sum(t.status is s for t in run.tests) for s in Status}
    line = (f"{target}: {counts[Status.PASSED]} passed, {counts[Status.FAILED]} failed, "
            f"{counts[Status.SKIPPED]} skipped, {counts[Status.NOT_RUN]} not run")
    (ctx.progress.fail if counts[Status.FAILED] or counts[Status.NOT_RUN] else ctx.progress.ok)(line)
    return run


def technique_missing(lab: Lab, checked: static_checks.StaticResult | None) -> bool:
    """Whether a technique check of lab.toml fails on the checked object (read once: scoring reuses it)."""
    checks = static_checks.technique_outcomes(lab, checked) if checked is not None else None
    return checks is not None and any(not o.found for o in checks[0])


def _correctness_failed(result: LabResult) -> bool:
    """Whether a correctness test has failed already (or could not run to its end)."""
    return any(t.status in (Status.FAILED, Status.NOT_RUN) and t.kind != "perf" for t in result.tests)


# --- one lab, stage after stage --------------------------------------------------------------------------


def grade_lab(ctx: GradeContext, lab: Lab) -> LabResult:
    opts = ctx.options
    result = LabResult(number=lab.number, name=lab.name, title=lab.title, max_score=lab.total_points)
    timeout = opts.timeout_s or lab.timeout_s
    ctx.progress.heading(f"lab {lab.name}: {lab.title}")
    stop = ctx.stopped()  # the global time limit passed, or the GPU stopped working
    if stop is not None:
        result.messages.append(stop.message)
        result.tests += stop.tests(ctx.known_tests(lab))
        return scoring.score(ctx, lab, result, None)

    checked = static_checks.run(ctx, lab)
    result.messages += [n for n in checked.notes if n not in result.messages]
    staged = opts.staged.lab(lab.name) if opts.staged is not None and ctx.mode == "student" else None
    if staged is not None:
        result.messages += [n for n in staged.notes() if n not in result.messages]
    if checked.build is not None:
        result.builds.append(checked.build)
    graded: sanitizer.Graded | None = None
    hidden_from: int | None = None  # where the hidden binary's lab messages start
    for bs in binary_sets(lab):
        if bs.kind == "hidden":
            hidden_from = len(result.messages)
        if ctx.mode == "solution":
            if bs.reference is None:
                result.messages.append(f"no reference solution in {lab.solution_dir}: nothing to grade in solution mode")
                continue
            target, reference, label = bs.reference, None, "hidden" if bs.kind == "hidden" else "solution"
        else:
            target, reference, label = bs.target, bs.reference, bs.kind
        failed_compile = checked.build if checked.build is not None and not checked.build.ok else None
        blocked: Block | None = checked.block
        if blocked is None and failed_compile is None:
            built = build(ctx, target, result)
        else:
            built = blocked.build if blocked is not None else failed_compile  # type: ignore[assignment]
        ref_built = build(ctx, reference, result) if reference else None
        expected = expected_tests(ctx, result, (reference or "", ref_built), (target, built))
        if opts.stop_at_first_failure and _correctness_failed(result):
            # The mutation gate: a failure in an earlier binary decides; the hidden binary of a mutant
            # that hangs would only wait out its timeout again.
            result.tests += [runs.not_run_test(n, label, Category.HARNESS, "not run: an earlier binary's test "
                                               "failed, which decides the mutation gate") for n in expected or []]
            continue
        if blocked is None and built.ok:
            blocked = ctx.stopped()
        if bs.kind == "student":
            graded = sanitizer.Graded(target, ctx.builder_for(target).bin_dir, label, blocked=blocked, built=built.ok)
        if blocked is not None:
            blocked = Block(blocked.category, blocked.message, blocked.test_message, label, target)
            if blocked.message not in result.messages:
                result.messages.append(blocked.message)
            result.tests += blocked.tests(expected or [])
            continue
        if not built.ok:
            result.messages.append(f"{target} did not build: {built.message}")
            result.tests += not_built(expected or [], label, built)
            continue
        run = run_binary(ctx, lab, target, label, expected, timeout)
        result.messages += run.notes
        if graded is not None and bs.kind == "student":
            graded.ran = True
        perfs = {t.name: t.perf for t in run.tests if t.perf is not None}
        if perfs and ctx.mode == "solution":
            for perf in perfs.values():
                perf.reference = perf.impl  # the reference is itself: ratio 1.0
        elif perfs and opts.reference and reference and ref_built is not None and ref_built.ok:
            refs = reference_timings(ctx, reference, expected, timeout, list(perfs))
            for name, perf in perfs.items():
                perf.reference = refs.get(name)
        elif perfs and opts.reference and reference is None:
            result.messages.append("no reference solution in this tree: perf points cannot be scored")
        result.tests += run.tests
    if hidden_from is not None:  # before later stages add messages of their own
        hidden.mark(result, lab.hidden_visibility, hidden_from)
    if not opts.sanitize_failing and graded is not None and _correctness_failed(result):
        result.tests += sanitizer.not_run(sanitizer.tools_for(lab, opts.sanitizer_tools),
                                          "not run: a correctness test failed already", label=graded.label)
    elif opts.stop_at_first_failure and graded is not None and technique_missing(lab, checked):
        # The mutation gate: a missing technique withholds points already (scored below), so the
        # sanitizer's slow tools cannot change the verdict.
        result.tests += sanitizer.not_run(sanitizer.tools_for(lab, opts.sanitizer_tools),
                                          "not run: a technique check failed already, which decides the "
                                          "mutation gate", label=graded.label)
    else:
        result.tests += sanitizer.stage(ctx, lab, result, graded)
    hints.annotate(result)
    return scoring.score(ctx, lab, result, checked)


def internal_error(ctx: GradeContext, lab: Lab, err: Exception) -> LabResult:
    """A lab the grader itself failed on: every test not run, the error said plainly, no points."""
    import traceback

    where = traceback.extract_tb(err.__traceback__)[-1] if err.__traceback__ else None
    at = f" at {Path(where.filename).name}:{where.lineno}" if where else ""
    why = f"the grader failed on this lab ({type(err).__name__}: {err}{at}); please report it"
    ctx.progress.fail(f"lab {lab.name}: {why}")
    result = LabResult(number=lab.number, name=lab.name, title=lab.title, max_score=lab.total_points)
    result.messages.append(why)
    result.tests += Block(Category.HARNESS, why, why).tests(ctx.known_tests(lab))
    scoring.score_lab(lab, result)
    return result


def run_labs(
    root: Path, labs: list[Lab], builder: Builder, gpu: GpuProbe, options: RunOptions, progress: Progress
) -> Results:
    """Build, run and score each lab. Raises GraderError when the project does not configure."""
    info = new_run_info(root, options.mode, gpu, options.submission)
    if options.build:
        progress.step("configuring")
        builder.configure([lab.name for lab in labs])
    ctx = GradeContext(root, builder, gpu, options, progress, info)
    ctx.start(labs)  # also configures a submission's own build directory
    results = Results(run=info)
    for lab in labs:
        try:
            results.labs.append(grade_lab(ctx, lab))
        except Exception as err:  # noqa: BLE001 - a grader bug in one lab must not lose the others' reports
            results.labs.append(internal_error(ctx, lab, err))
    ctx.finish()
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
