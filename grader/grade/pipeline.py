"""A grade, stage after stage (grader/grade/stages.py declares the list; docs/design.md draws it).

    run_labs:  open → for each lab: prepare (build, inspect) → finish (run, sanitize, score) → assemble
               (the other labs' prepare under way while the first finishes: grader/grade/ahead.py)

A batch calls the same halves: it prepares a student's labs in a build slot (grader/grade/prepare.py)
and finishes them under the GPU's lock. Each stage takes what it needs as arguments and returns what it
made; none calls back into another.
"""

from __future__ import annotations

import time
import traceback
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, replace
from pathlib import Path

from grader.build.cmake import Builder, CMakeBuilder
from grader.build.stages import Builders
from grader.execute import runs, sanitizer
from grader.execute.health import HealthMonitor, probe_locator
from grader.execute.lab_run import Graded, correctness_failed, run_lab
from grader.execute.runner import Runner, open_runner
from grader.grade import ahead
from grader.grade.options import RunOptions
from grader.grade.prepare import PreparedLab, prepare
from grader.host.environment import GpuProbe, apply_gpu_properties, new_run_info, now_iso
from grader.model import hidden
from grader.model.block import Block
from grader.model.errors import Exit
from grader.model.labs import Lab
from grader.model.answers import ANSWERS_FILE
from grader.model.profile import LabProfile
from grader.model.progress import Progress
from grader.model.results import Category, LabResult, Results, RunInfo, Status
from grader.inspect.static_checks import kept_ptx, object_dir, ptx_of
from grader.profile.stage import access_widths, profile_lab, ptx_kernels
from grader.score import answers, scoring


@dataclass
class Grade:
    """A grade under way: its run info (assembled at the end), the runner, and the GPU facts its binaries
    reported (the first run that had any fills in the report's GPU)."""

    info: RunInfo
    runner: Runner
    builders: Builders
    gpu: GpuProbe
    facts_taken: bool = False


def builders_for(builder: Builder, options: RunOptions, jobs: int = 1) -> Builders:
    return Builders(main=builder, code=options.student_builder or builder, mode=options.mode, build=options.build,
                    jobs=jobs, compile_timeout_s=options.compile_timeout_s,
                    compile_memory_mib=options.compile_memory_mib)


def open_grade(root: Path, labs: list[Lab], builders: Builders, gpu: GpuProbe, options: RunOptions,
               progress: Progress) -> Grade:
    """Before the first lab: the run info, the health monitor and the runner (confinement, time limit)."""
    info = new_run_info(root, options.mode, gpu, options.submission)
    real = isinstance(builders.main, CMakeBuilder)
    use_health = options.health if options.health is not None else (real and gpu.available)
    health = HealthMonitor(probe_locator(builders.main, options.build), gpu_available=gpu.available,
                           on_step=progress.step, env=options.env) if use_health else None
    roots = [Path(builders.main.bin_dir).resolve().parent]
    if builders.code is not builders.main:
        roots.append(Path(builders.code.bin_dir).resolve().parent)
    build_dir = getattr(builders.main, "build_dir", None)
    runner = open_runner(
        options.settings(), timeouts=[options.timeout_s or lab.timeout_s for lab in labs], roots=roots,
        run_dir=Path(build_dir) / "runs" if build_dir is not None else None, health=health,
        gpu_available=gpu.available, real=real, progress=progress)
    return Grade(info, runner, builders, gpu)


def known_tests(builders: Builders, lab: Lab) -> list[str]:
    """The lab's tests from a binary already built (no build), or []."""
    for target in (f"{lab.target_prefix}_solution", f"{lab.target_prefix}_student"):
        path = Path(builders.main.bin_dir) / target
        if path.is_file():
            try:
                return runs.list_tests(path)
            except Exception:  # noqa: BLE001 - any failure: the names are not known
                continue
    return []


def finish_lab(grade: Grade, prepared: PreparedLab, options: RunOptions, progress: Progress) -> LabResult:
    """The second half of one lab: run → sanitize → score."""
    lab = prepared.lab
    result = LabResult(number=lab.number, name=lab.name, title=lab.title, max_score=lab.total_points)
    result.messages += prepared.notes
    result.builds += prepared.builds
    label = "solution" if options.mode == "solution" else "student"
    stop = grade.runner.stopped()  # the global time limit passed, or the GPU stopped working
    if stop is not None:
        result.messages.append(stop.message)
        result.tests += stop.tests(known_tests(grade.builders, lab))
        return scoring.score(lab, result, techniques=None, gpu=grade.info.gpu, label=label, progress=progress)
    runner = grade.runner.for_lab(lab.host_memory_mib)  # the lab's host-memory limit on its runs
    tools = sanitizer.tools_for(lab, options.sanitizer_tools)
    request = options.request(lab)
    beside = _sanitize_beside(grade, prepared, options, runner, tools)
    if beside is not None:  # every later run of the lab waits for it: the huge tests, the timed ones
        request = replace(request, settle=lambda: wait([beside]))
    ran = run_lab(lab, prepared.binaries, runner, request, result.tests)
    result.seconds.update(ran.seconds)
    result.host_memory_mib.update(ran.host_memory_mib)
    _take_gpu_facts(grade, ran.gpu_properties)
    base = len(result.messages)
    result.messages += [m for m in ran.messages if m not in result.messages]
    result.tests += ran.tests
    if ran.hidden_from is not None:  # before later stages add messages of their own
        hidden.mark(result, lab.hidden_visibility, base + ran.hidden_from)
    techniques = prepared.inspection.techniques
    if beside is not None:
        # Its seconds lie inside the run's (its later runs waited for it), so a key of their own.
        sanitized, result.seconds[SANITIZE_BESIDE] = beside.result()
        if sanitizer.saw_no_gpu(result.tests):  # as the stage would have said after the run
            sanitized = sanitizer.skipped(tools, "no GPU on this machine", Category.NO_GPU, sanitized[0].binary)
        result.tests += sanitized
    elif not options.sanitize_failing and ran.graded is not None and correctness_failed(result.tests):
        result.tests += sanitizer.not_run(tools, "not run: a correctness test failed already", label=ran.graded.label)
    elif options.stop_at_first_failure and ran.graded is not None and prepared.inspection.technique_missing:
        # The mutation gate: a missing technique withholds points already (scored below), so the
        # sanitizer's slow tools cannot change the verdict.
        result.tests += sanitizer.not_run(tools, "not run: a technique check failed already, which decides the "
                                          "mutation gate", label=ran.graded.label)
    else:
        started = time.monotonic()
        result.tests += sanitizer.sanitize(
            lab, ran.graded, runner, tools=tools, timeout_s=sanitizer.timeout_for(lab, options.timeout_s),
            gpu_available=grade.gpu.available, tests=result.tests, stop_at_first_failure=options.stop_at_first_failure,
            own_kernels=ptx_kernels(ptx_of(prepared.inspection)))
        result.seconds["sanitize"] = round(time.monotonic() - started, 3)  # the tools side by side: not their sum
    result.seconds.update({t.name: round(t.duration_s, 3) for t in result.tests
                           if t.name.startswith(f"{sanitizer.SUITE}.") and t.duration_s})
    started = time.monotonic()
    scored = scoring.score(lab, result, techniques=techniques, gpu=grade.info.gpu, label=label, progress=progress)
    scored.seconds["score"] = round(time.monotonic() - started, 3)
    if options.mode != "solution":  # the chapter's questions: checked and shown, no points
        scored.answers = answers.check(lab, _answers_text(lab, options))
    if options.profile:  # after the score: a profile never changes it
        started = time.monotonic()
        scored.profile = _profile(grade, lab, prepared, scored, options, progress)
        scored.seconds["profile"] = round(time.monotonic() - started, 3)
    return scored


# A GPU with at least this much memory runs the sanitize stage beside the lab's first run: the small-size
# tools hold well under a GiB, and the one test outside a huge suite that asks for memory wants 1.5 GiB.
BESIDE_MIN_GPU_MIB = 8 * 1024
SANITIZE_BESIDE = "sanitize beside run"  # LabResult.seconds: the stage's wall time, within "run <target>"


def _sanitize_beside(grade: Grade, prepared: PreparedLab, options: RunOptions, runner: Runner,
                     tools: list[str]) -> Future[tuple[list, float]] | None:
    """The sanitize stage started now, beside the lab's first run (its correctness tests at every size
    but the huge ones), when nothing it decides waits for that run: a student's or a solution's full
    grade (every tool runs whatever the tests say; not the mutation gate), a binary that built, and a
    GPU with memory for both. Its results are the same as after the run; what changes is that its
    seconds and the correctness tests' overlap. The lab's later runs wait for it (RunRequest.settle):
    the huge tests want the memory, the perf tests a quiet GPU. None: the stage runs after the run."""
    student = next((b for b in prepared.binaries if b.kind == "student"), None)
    if (not tools or student is None or student.block is not None or not student.built.ok
            or not options.sanitize_failing or options.stop_at_first_failure or not options.perf
            or not grade.gpu.available or grade.gpu.memory_mib < BESIDE_MIN_GPU_MIB or runner.stopped() is not None):
        return None
    lab = prepared.lab
    graded = Graded(student.target, student.path, student.label, built=True, ran=True)

    def stage() -> tuple[list, float]:
        started = time.monotonic()
        tests = sanitizer.sanitize(
            lab, graded, runner, tools=tools, timeout_s=sanitizer.timeout_for(lab, options.timeout_s),
            gpu_available=True, tests=[], own_kernels=ptx_kernels(ptx_of(prepared.inspection)))
        return tests, round(time.monotonic() - started, 3)

    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"sanitize-{lab.name}")
    future = pool.submit(stage)
    pool.shutdown(wait=False)  # the thread ends with the stage
    return future


def _answers_text(lab: Lab, options: RunOptions) -> str | None:
    """The graded answers.md: the submission's when one is staged (blank when it sent none), else the tree's."""
    if not (lab.path / ANSWERS_FILE).is_file():
        return None  # the lab asks no questions in a file
    if options.staged is not None:
        staged = options.staged.lab(lab.name)
        if staged is None or not staged.answers:
            return ""
        return answers.answers_text(options.staged.path_of(lab, ANSWERS_FILE))
    return answers.answers_text(lab.path / ANSWERS_FILE)


def _profile(grade: Grade, lab: Lab, prepared: PreparedLab, result: LabResult, options: RunOptions,
             progress: Progress) -> LabProfile:
    """The profile stage's inputs from the run: the graded binary and its reference counterpart."""
    graded = next((b for b in prepared.binaries if b.kind == "student" and b.built.ok and b.block is None), None)
    reference = graded.reference if graded is not None and graded.reference_built is not None \
        and graded.reference_built.ok and options.mode != "solution" else None
    # The kernels each binary's lab code defines, from the PTX nvcc kept: only those are profiled as its own.
    ptx = ptx_of(prepared.inspection)
    own = {"yours": ptx_kernels(ptx)}
    main_dir = getattr(grade.builders.main, "build_dir", None)
    if reference is not None and main_dir is not None:
        own["reference"] = ptx_kernels(kept_ptx(object_dir(Path(main_dir), lab, "solution")))
    progress.step(f"profiling the timed kernels of {lab.name} (Nsight Compute)")
    return profile_lab(lab, result.tests, graded.path if graded is not None else None, reference, grade.runner,
                       gpu_available=grade.gpu.available, timeout_s=options.timeout_s, own=own,
                       widths=access_widths(ptx))


def _take_gpu_facts(grade: Grade, properties: list[dict[str, str]]) -> None:
    """The report's GPU: what the first binary that reported any said of it."""
    for found in properties:
        if not grade.facts_taken and any(k.startswith("gpu_") for k in found):
            apply_gpu_properties(grade.info, found)
            grade.facts_taken = True


def internal_error(grade: Grade, lab: Lab, err: Exception, progress: Progress) -> LabResult:
    """A lab the grader itself failed on: every test not run, the error said plainly, no points."""
    where = traceback.extract_tb(err.__traceback__)[-1] if err.__traceback__ else None
    at = f" at {Path(where.filename).name}:{where.lineno}" if where else ""
    why = f"the grader failed on this lab ({type(err).__name__}: {err}{at}); please report it"
    progress.fail(f"lab {lab.name}: {why}")
    result = LabResult(number=lab.number, name=lab.name, title=lab.title, max_score=lab.total_points)
    result.messages.append(why)
    result.tests += Block(Category.HARNESS, why, why).tests(known_tests(grade.builders, lab))
    scoring.score_lab(lab, result)
    return result


def assemble(grade: Grade, labs: list[LabResult], options: RunOptions) -> Results:
    """The assemble stage: the lab results under the run's facts and notes."""
    info = grade.info
    info.sandboxed = grade.runner.policy.sandbox is not None
    info.notes += [n for n in grade.runner.finish() if n not in info.notes]
    if options.staged is not None:
        info.notes.append(f"submission staged from {options.staged.source}")
    if options.small:
        info.notes.append("small mode: only small sizes ran and perf tests were off (not a full grade)")
    if not options.perf:
        info.notes.append("correctness only: perf tests were not run and earn nothing (not a full grade)")
    if not info.gpu_available and not info.gpu_reason:
        info.gpu_reason = grade.gpu.reason
    info.finished = now_iso()
    return Results(run=info, labs=labs)


def grade_labs(grade: Grade, labs: list[Lab], options: RunOptions, progress: Progress,
               prepared: dict[str, PreparedLab] | None = None) -> list[LabResult]:
    """Each lab prepared (unless it was already) and finished, in order; a grader error in one lab is
    that lab's result, and the others still grade. With several labs to build, the others are prepared
    while the first one runs (grader/grade/ahead.py); a lab's "prepare" seconds are then what it waited."""
    out = []
    real = isinstance(grade.builders.main, CMakeBuilder) and options.build
    early = ahead.Ahead(grade.builders, options.staged, options.checks) \
        if prepared is None and ahead.wanted(options.prepare_ahead, labs, real) else None
    if early is not None:
        options = replace(options, before_timing=early.quiet)
        early.start(labs[:1])  # the first lab alone, so its tests start soonest; then all the others
        early.start(labs[1:])
    try:
        for lab in labs:
            progress.heading(f"lab {lab.name}: {lab.title}")
            try:
                mine = prepared[lab.name] if prepared is not None else None
                started = time.monotonic()
                took = 0.0
                if mine is None and grade.runner.stopped() is None:
                    if early is not None:
                        mine, took = early.take(lab, progress)
                    else:
                        mine = prepare([lab], grade.builders, staged=options.staged, checks=options.checks,
                                       progress=progress)[lab.name]
                        took = time.monotonic() - started
                finished = finish_lab(grade, mine or PreparedLab(lab), options, progress)
                if prepared is None or lab.name not in prepared:
                    finished.seconds = {"prepare": round(took, 3), **finished.seconds}
                out.append(finished)
            except Exception as err:  # noqa: BLE001 - a grader bug in one lab must not lose the others' reports
                out.append(internal_error(grade, lab, err, progress))
    finally:
        if early is not None:
            early.close()
    return out


def run_labs(root: Path, labs: list[Lab], builder: Builder, gpu: GpuProbe, options: RunOptions,
             progress: Progress) -> Results:
    """The grade of these labs in the tree at root (or of options.staged, a submission's files, built by
    options.student_builder). Raises GraderError when the project does not configure."""
    names = [lab.name for lab in labs]
    if options.build:
        progress.step("configuring")
        builder.configure(names)
    builders = builders_for(builder, options)
    if options.student_builder is not None and options.student_builder is not builder and options.build:
        progress.step("configuring the submission's build")
        options.student_builder.configure(names)
    options = replace(options, grade_started=options.grade_started or time.time())
    grade = open_grade(root, labs, builders, gpu, options, progress)
    return assemble(grade, grade_labs(grade, labs, options, progress), options)


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
