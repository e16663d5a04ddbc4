"""The run stage of one lab: each of its test binaries run confined (grader/execute/runs.py), the tests
it should report listed first from the reference (which cannot be talked out of a test), and the
reference's own timings of the perf tests the student was timed in, measured in the same run.

It takes the binaries as the build and inspect stages left them (a Binary each) and gives back a LabRun:
the tests, the lab's messages, what the binaries said of the GPU, and the binary the sanitize stage
goes over. It reads no context: everything it needs is an argument.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from grader.execute import reference_cache, runs
from grader.execute.runner import Runner
from grader.model import hidden
from grader.model.block import Block
from grader.model.labs import Lab
from grader.model.results import BuildResult, Category, Perf, PerfSeries, Status, TestResult, test_kind

PERF_FILTER = "*Perf.*"
CORRECTNESS_FILTER = "-*Perf.*"
# Suites of inputs past 2^31 or 2^32 elements (seconds each) run after the lab's other correctness tests,
# in a process of their own: GoogleTest runs plain TESTs before every TEST_P, so a lab's huge TEST would
# otherwise come first, the student would wait for it before the small failures that explain it, and the
# mutation gate would stop at it.
HUGE_SUITES = "*HugeCorrectness.*"
GATE_DECIDED = "not run: a test of an earlier run of this binary failed, which decides the mutation gate"
LIVE_FAILURES = 3  # failures said as they happen, per binary; the report has them all


def run_filters(expected: list[str] | None, perf: bool) -> list[str | None]:
    """The binary's runs, in order, as --gtest_filter values (None: everything)."""
    names = expected or []
    correctness = [n for n in names if test_kind(n) != "perf"]
    if not perf:
        filters: list[str | None] = [CORRECTNESS_FILTER]
    elif expected is not None and correctness and len(correctness) < len(names):
        # The perf tests in a process of their own, as the reference's are timed (reference_timings):
        # what the correctness tests leave behind (the device runtime's launch pools, allocator caches, a
        # warm or cold L2) then weighs on neither side, and the two times compare.
        filters = [CORRECTNESS_FILTER, PERF_FILTER]
    else:
        filters = [None]
    huge = [n for n in correctness if runs.filter_matches(n, HUGE_SUITES)]
    if not huge or len(huge) == len(correctness):
        return filters
    first = filters[0]  # None or CORRECTNESS_FILTER: the correctness tests, split in two
    return [f"{first}:{HUGE_SUITES}" if first else f"-{HUGE_SUITES}", HUGE_SUITES, *filters[1:]]


def gate_passes(lab: Lab, expected: list[str] | None, filters: list[str | None]) -> list[str | None]:
    """The mutation gate's runs (it stops at the first failure): the first run's tests split by task, in the
    rubric's order, each task in a process of its own, then what no task names, then the rest of filters.
    A student's report lists failures by task, so the failure the gate stops at is then the one that
    report shows first, and the gate's diagnosis table (bench/diagnosis_table.py) reads what a student
    would. Plain TESTs run before TEST_Ps in a binary, whatever their task: without the split a lab 11 bug
    in the block sort stopped the gate at a quicksort test of the last task. Within a task that has both,
    its parameterized tests (by name: the report puts the smallest failing input first) run before its
    plain ones, named one by one (no test name holds a filter's special characters)."""
    if not expected or not filters or (filters[0] is not None and not filters[0].startswith("-")):
        return filters
    first = filters[0]
    negative = first[1:] if first else ""  # the first run excludes only (perf tests, huge suites)
    left = [n for n in expected if runs.filter_matches(n, first)]
    passes: list[str | None] = []
    for task in lab.tasks:
        mine = [n for n in left if task.matches(n)]
        sized, plain = [n for n in mine if "/" in n], [n for n in mine if "/" not in n]
        if sized and plain:  # the TEST_Ps (an input each, smallest first in the report) before the plain TESTs
            passes += [":".join(sized), ":".join(plain)]
        elif mine:
            passes.append(":".join(task.tests) + (f"-{negative}" if negative else ""))
        left = [n for n in left if n not in mine]
    if not passes:
        return filters
    if left:  # tests of no task still run (a rubric check reports them), last
        passes.append("-" + ":".join([negative] * bool(negative) + [g for t in lab.tasks for g in t.tests]))
    return passes + filters[1:]


@dataclass(frozen=True)
class Binary:
    """One test binary of the graded code, as the run stage gets it."""

    kind: str  # "student" or "hidden": which binary set
    label: str  # what its tests say they ran in: "student", "hidden" or "solution"
    target: str
    path: Path
    built: BuildResult  # its build, or a stand-in for one never attempted (block, compile error)
    reference: Path | None = None  # the reference's binary of the same tests, when there is one
    reference_built: BuildResult | None = None
    reference_compiled: bool = False  # the reference is a student release's compiled one (no source)
    block: Block | None = None  # refused before it could run (intake, inspection)


@dataclass(frozen=True)
class RunRequest:
    """What the caller asked of the runs (a part of grader/grade/options.py's RunOptions)."""

    mode: str = "student"
    timeout_s: float = 60.0
    perf: bool = True
    reference: bool = True
    small: bool = False
    stop_at_first_failure: bool = False
    max_consecutive_timeouts: int = runs.MAX_CONSECUTIVE_TIMEOUTS
    # Reference timings measured once and reused, {reference target: {test: series}} (a batch); None: time here.
    reference_timings: Mapping[str, Mapping[str, PerfSeries]] | None = None
    # Keep the reference's timings between grades on this GPU (grader/execute/reference_cache.py).
    reference_cache: bool = False
    grade_started: float = 0.0  # time.time() when the grade began: a cache written since is not believed
    # Called before a timed run (perf tests, the reference's): waits for work that would share the machine.
    before_timing: Callable[[], None] | None = None
    # Called before every run of the lab's binaries but the first: waits for what ran beside that one (the
    # sanitize stage, started with the first correctness run: grader/grade/pipeline.py).
    settle: Callable[[], None] | None = None


@dataclass
class Graded:
    """The binary the sanitize stage runs: the lab's student binary (the solution's in solution mode)."""

    target: str
    path: Path
    label: str = "student"
    blocked: Block | None = None
    built: bool = True
    ran: bool = False


@dataclass
class LabRun:
    tests: list[TestResult] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)
    gpu_properties: list[dict[str, str]] = field(default_factory=list)  # each run's root properties, in order
    graded: Graded | None = None
    hidden_from: int | None = None  # where the hidden binary's lab messages start
    seconds: dict[str, float] = field(default_factory=dict)  # wall time: "run <target>", "reference <target>"
    host_memory_mib: dict[str, float] = field(default_factory=dict)  # peak host memory: "run <target>"


def correctness_failed(tests: list[TestResult]) -> bool:
    """Whether a correctness test has failed already (or could not run to its end)."""
    return any(t.status in (Status.FAILED, Status.NOT_RUN) and t.kind != "perf" for t in tests)


def not_built(names: list[str], label: str, built: BuildResult) -> list[TestResult]:
    category = built.category or Category.HARNESS
    why = built.message or "it did not build"
    return [TestResult(name=n, status=Status.NOT_RUN, kind=test_kind(n), binary=label, category=category,
                       message=f"{built.target} did not build ({why})") for n in names]


def expected_tests(binary: Binary, env: Mapping[str, str], messages: list[str]) -> list[str] | None:
    """The tests to expect: --gtest_list_tests of the reference when it built, else of the binary itself."""
    candidates = [(binary.reference, binary.reference_built), (binary.path, binary.built)]
    for path, built in candidates:
        if path is None or built is None or not built.ok:
            continue
        try:
            return runs.list_tests(path, env=env)
        except Exception as err:  # noqa: BLE001 - GtestError and OS errors alike: try the next one
            messages.append(f"could not list the tests of {path.name}: {err}")
    return None


def run_lab(lab: Lab, binaries: list[Binary], runner: Runner, request: RunRequest, earlier: list[TestResult],
            ) -> LabRun:
    """The run stage. earlier: the lab's tests already decided (none in a plain grade)."""
    out = LabRun()
    runs_started = 0

    def before_run(timed: bool) -> None:
        nonlocal runs_started
        if (runs_started or timed) and request.settle is not None:
            request.settle()
        runs_started += 1

    for binary in binaries:
        if binary.kind == "hidden":
            out.hidden_from = len(out.messages)
        expected = expected_tests(binary, runner.env, out.messages)
        if request.stop_at_first_failure and correctness_failed(earlier + out.tests):
            # The mutation gate: a failure in an earlier binary decides; the hidden binary of a mutant
            # that hangs would only wait out its timeout again.
            out.tests += [runs.not_run_test(n, binary.label, Category.HARNESS, "not run: an earlier binary's test "
                                            "failed, which decides the mutation gate") for n in expected or []]
            continue
        blocked = binary.block
        if blocked is None and binary.built.ok:
            blocked = runner.stopped()
        if binary.kind == "student":
            out.graded = Graded(binary.target, binary.path, binary.label, blocked=blocked, built=binary.built.ok)
        if blocked is not None:
            blocked = Block(blocked.category, blocked.message, blocked.test_message, binary.label, binary.target)
            if blocked.message not in out.messages:
                out.messages.append(blocked.message)
            out.tests += blocked.tests(expected or [])
            continue
        if not binary.built.ok:
            out.messages.append(f"{binary.target} did not build: {binary.built.message}")
            out.tests += not_built(expected or [], binary.label, binary.built)
            continue
        started = time.monotonic()
        run = _run(lab, binary, expected, runner, request, before_run)
        out.seconds[f"run {binary.target}"] = round(time.monotonic() - started, 3)
        if run.peak_rss_mib is not None:
            out.host_memory_mib[f"run {binary.target}"] = run.peak_rss_mib
        out.messages += run.notes
        out.gpu_properties.append(run.properties)
        if out.graded is not None and binary.kind == "student":
            out.graded.ran = True
        perfs = {t.name: t.perf for t in run.tests if t.perf is not None}
        if perfs and request.mode == "solution":
            for perf in perfs.values():
                perf.reference = perf.impl  # the reference is itself: ratio 1.0
        elif perfs and request.reference and binary.reference is not None and binary.reference_built is not None \
                and binary.reference_built.ok:
            # Only the perf tests that score are timed on the reference; the others compare with the library.
            scored = {n: p for n, p in perfs.items() if (goal := lab.perf_goal(n)) is not None and goal.points > 0}
            started = time.monotonic()
            refs = reference_timings(binary.reference, expected, runner, request, scored, out.gpu_properties,
                                     out.messages, run.properties)
            out.seconds[f"reference {binary.reference.name}"] = round(time.monotonic() - started, 3)
            for name, perf in perfs.items():
                perf.reference = refs.get(name)
            if binary.reference_compiled and len(refs) < len(scored):
                out.messages.append(compiled_reference_note(lab, run.properties, len(scored) - len(refs)))
        elif perfs and request.reference and binary.reference is None:
            out.messages.append("no reference solution in this tree: perf points cannot be scored")
        out.tests += run.tests
    return out


def _run(lab: Lab, binary: Binary, expected: list[str] | None, runner: Runner, request: RunRequest,
         before_run: Callable[[bool], None] = lambda timed: None) -> runs.BinaryRun:
    """One binary, confined. Progress lines are student-facing (CI logs publish them): a hidden test whose
    visibility conceals it is never named there, nor in the GPU health check's notes."""
    progress = runner.progress
    progress.step(f"running {binary.target}")
    conceal = binary.label == hidden.BINARY and hidden.conceals(lab.hidden_visibility, request.mode)

    def shown(name: str) -> str:
        return hidden.progress_name(name, binary.target, conceal)

    if not request.perf:  # correctness only: perf tests are neither run nor expected
        expected = None if expected is None else [n for n in expected if test_kind(n) != "perf"]
    filters = run_filters(expected, request.perf)
    if request.stop_at_first_failure:
        filters = gate_passes(lab, expected, filters)
    passes: list[runs.BinaryRun] = []
    said: list[str] = []

    def failed_now(name: str) -> None:
        """The first failures as the binary prints them, so a student reads one before the run ends."""
        said.append(name)
        if len(said) <= LIVE_FAILURES:
            progress.fail(f"{shown(name)} failed (details when {binary.target} is done)")

    for gtest_filter in filters:
        if request.stop_at_first_failure and correctness_failed([t for p in passes for t in p.tests]):
            wanted = [n for n in expected or [] if runs.filter_matches(n, gtest_filter)]
            passes.append(runs.BinaryRun(tests=[runs.not_run_test(n, binary.label, Category.HARNESS, GATE_DECIDED)
                                                for n in wanted], properties={}, notes=[]))
            continue
        stop = runner.stopped() if passes else None
        if stop is not None:
            wanted = [n for n in expected or [] if runs.filter_matches(n, gtest_filter)]
            passes.append(runs.BinaryRun(tests=Block(stop.category, stop.message, stop.test_message,
                                                     binary.label, binary.target).tests(wanted),
                                         properties={}, notes=[stop.message]))
            continue
        timed = request.perf and gtest_filter in (PERF_FILTER, None)
        before_run(timed)
        if request.before_timing is not None and timed:
            request.before_timing()  # the perf tests time alone on the machine
        passes.append(runs.run_binary(
            binary.path, expected, request.timeout_s, label=binary.label, env=runner.env, gtest_filter=gtest_filter,
            stop_at_first_failure=request.stop_at_first_failure,
            max_consecutive_timeouts=request.max_consecutive_timeouts,
            on_rerun=lambda name: progress.step(f"re-running {shown(name)} alone"),
            policy=runner.policy, on_fault=runner.fault_check(shown), small=request.small,
            on_failure=failed_now,
        ))
    run = runs.merged(passes)
    faults = (Category.CRASH, Category.TIMEOUT, Category.CUDA_ERROR, Category.HARNESS)
    if any(t.category in faults and t.status is not Status.PASSED for t in run.tests):
        runner.check_health(binary.target)
    runner.note_confinement(run.confinement)
    counts = {s: sum(t.status is s for t in run.tests) for s in Status}
    line = (f"{binary.target}: {counts[Status.PASSED]} passed, {counts[Status.FAILED]} failed, "
            f"{counts[Status.SKIPPED]} skipped, {counts[Status.NOT_RUN]} not run")
    (progress.fail if counts[Status.FAILED] or counts[Status.NOT_RUN] else progress.ok)(line)
    return run


def compiled_reference_note(lab: Lab, properties: dict[str, str], missing: int) -> str:
    """Why a release's compiled reference timed fewer perf tests than the student's binary ran: most
    often a GPU it was not compiled for."""
    from grader.build.targets import COMPILED_REFERENCE_DIR, archs_text, compiled_reference_manifest

    archs = [a for a in compiled_reference_manifest(lab.root).get("archs", []) if isinstance(a, int)]
    cc = properties.get("gpu_compute_capability", "")
    arch = int(cc.replace(".", "")) if cc.replace(".", "").isdigit() else None
    head = (f"the compiled reference in {COMPILED_REFERENCE_DIR}/{lab.name}/ timed {missing} perf test(s) fewer than "
            "your binary ran, so those perf points cannot be scored")
    if arch is not None and archs and arch not in archs:
        return (f"{head}: it holds machine code for {archs_text(archs)}, and this GPU is "
                f"sm_{arch}. Ask your instructor for a release made with --reference-archs {arch}.")
    return f"{head}: its perf tests failed on this GPU (run bin/{lab.target_prefix}_solution to see why)."


def reference_timings(reference: Path, expected: list[str] | None, runner: Runner, request: RunRequest,
                      perfs: Mapping[str, Perf], gpu_properties: list[dict[str, str]], messages: list[str],
                      properties: Mapping[str, str]) -> dict[str, PerfSeries]:
    """The reference's own timings of these perf tests (the student's runs of them just now): a batch's,
    measured once for the class; kept from an earlier grade on this GPU when the libraries the student's
    run timed show the GPU unchanged (grader/execute/reference_cache.py); else measured now."""
    names = list(perfs)
    cached = request.reference_timings.get(reference.name) if request.reference_timings is not None else None
    if cached is not None:
        return {n: s for n, s in cached.items() if n in names}
    if not names:
        return {}
    out: dict[str, PerfSeries] = {}
    key = reference_cache.gpu_key(properties, runner.env) if request.reference_cache else None
    if key is not None:
        reuse = reference_cache.load(reference, key, perfs, started=request.grade_started)
        out.update(reuse.timings)
        names = reuse.missing
        if reuse.timings:
            messages.append(reference_cache.reuse_note(reuse.timings, reuse.age_s))
        if not names:
            return out
    if request.settle is not None:
        request.settle()
    if request.before_timing is not None:
        request.before_timing()
    runner.progress.step(f"timing the reference ({reference.name}, {len(names)} perf tests)")
    run = runs.run_binary(
        reference, [n for n in expected if n in names] if expected is not None else None, request.timeout_s,
        label="solution", gtest_filter=":".join(sorted(names)), env=runner.env,
        max_consecutive_timeouts=request.max_consecutive_timeouts, policy=runner.policy,
    )
    gpu_properties.append(run.properties)
    timed = {t.name: t.perf for t in run.tests
             if t.status is Status.PASSED and t.perf is not None and t.perf.impl is not None}
    if key is not None and timed:
        reference_cache.store(reference, key, timed)
    out.update({n: p.impl for n, p in timed.items() if p.impl is not None})
    return out
