"""Scores a lab from its rubric (lab.toml).

- A task earns points x passed / counted over the tests its globs match (scoring = "proportional",
  the default), or all its points only when every one passed (scoring = "all-or-nothing"). A test skipped for lack of a
  GPU counts as not passed; a test skipped in small mode (CUDALAB_SMALL), or because this GPU's whole
  memory is too small for it ("GPU too small"), is not counted at all, and the lab says so.
- A perf goal earns points x clamp((r - zero_at) / (full_at - zero_at), 0, 1), where r is the
  reference's time over the student's (Perf.ratio_to_reference), and only when the perf test ran.
- A sanitizer finding in a kernel a task owns ([[task]] kernels) costs that task [sanitizer] cost
  (default 1: all) of its points: a race or an out-of-bounds access is a correctness bug.
- Lab score = task points + perf points. Tests that no task or perf goal matches are kept (0 points).
- The hidden binary's tests score only tasks marked hidden = true; the public tests only the others.
"""

from __future__ import annotations

from grader.execute.gtest import GPU_TOO_SMALL_SKIP, SMALL_MODE_SKIP
from grader.inspect.techniques import TechniqueOutcome
from grader.model.labs import Lab, PerfGoal
from grader.model.progress import Progress
from grader.model.results import LabResult, Status, TaskScore, TestResult
from grader.score.checkpoints import score_checkpoints
from grader.score import hints, penalties

UNASSIGNED_PERF_TASK = "perf"


def counts_for_task(test: TestResult) -> bool:
    """Whether the test is part of its task's denominator: not when small mode left it out, nor when
    the GPU's whole memory is too small for it (a skip for memory that is merely not free counts)."""
    return not (test.status is Status.SKIPPED
                and (SMALL_MODE_SKIP.match(test.message) or GPU_TOO_SMALL_SKIP.match(test.message)))


def perf_fraction(ratio: float | None, goal: PerfGoal) -> float:
    if ratio is None:
        return 0.0
    if goal.full_at <= goal.zero_at:
        return 1.0 if ratio >= goal.full_at else 0.0
    return min(1.0, max(0.0, (ratio - goal.zero_at) / (goal.full_at - goal.zero_at)))


def score_perf(test: TestResult, goal: PerfGoal, points: float) -> float:
    """Points one perf test earns out of points; also records them on its Perf."""
    perf = test.perf
    if perf is None:
        return 0.0
    perf.points = points
    ran = test.status is Status.PASSED
    perf.earned = round(points * perf_fraction(perf.ratio_to_reference, goal), 4) if ran else 0.0
    return perf.earned


def _all_or_nothing(total: int, failed: int, short: int) -> str:
    """Why an all-or-nothing task earns nothing, counting failed tests and tests that did not run apart."""
    not_run = short - failed
    if not not_run:
        return f"all or nothing: {failed} of {total} test(s) failed, so the task earns no points"
    if not failed:
        return f"all or nothing: {not_run} of {total} test(s) did not run, so the task earns no points"
    return (f"all or nothing: {failed} of {total} test(s) failed and {not_run} did not run, so the task earns "
            "no points")


def score_lab(lab: Lab, result: LabResult) -> LabResult:
    """Fill result.tasks, each test's task, perf points, result.score and result.max_score."""
    tasks = {t.id: TaskScore(id=t.id, title=t.title, points=t.points, earned=0.0, challenge=t.challenge) for t in lab.tasks}
    failed = dict.fromkeys(tasks, 0)  # of the counted tests: the rest that did not pass did not run
    for test in result.tests:
        goal = lab.perf_goal(test.name) if test.kind == "perf" else None
        task = lab.task_for_test(test.name, hidden=test.binary == "hidden")
        test.task = (goal.task if goal and goal.task else None) or (task.id if task else None)
        if task is not None and counts_for_task(test):
            tasks[task.id].tests_total += 1
            tasks[task.id].tests_passed += test.status is Status.PASSED
            failed[task.id] += test.status is Status.FAILED

    for spec in lab.tasks:
        ts = tasks[spec.id]
        if ts.tests_total and spec.scoring == "all-or-nothing":
            ts.earned = spec.points if ts.tests_passed == ts.tests_total else 0.0
            if ts.tests_passed < ts.tests_total:
                ts.notes.append(_all_or_nothing(ts.tests_total, failed[spec.id], ts.tests_total - ts.tests_passed))
        elif ts.tests_total:
            ts.earned = round(spec.points * ts.tests_passed / ts.tests_total, 4)
        elif spec.points:
            ts.notes.append("no test of this task ran")

    loose = TaskScore(id=UNASSIGNED_PERF_TASK, title="Performance", points=0.0, earned=0.0)
    for goal in lab.perf:
        # A test belongs to the first goal that matches it; a goal matching several shares its points.
        matched = [t for t in result.tests if t.kind == "perf" and lab.perf_goal(t.name) is goal]
        owner = tasks.get(goal.task) if goal.task else loose
        assert owner is not None  # labs.load_lab checks that a perf goal names a known task
        owner.perf_points += goal.points
        share = goal.points / len(matched) if matched else 0.0
        earned = sum(score_perf(test, goal, share) for test in matched)
        if goal.points and not matched:
            owner.notes.append(f"perf test {goal.test} did not report")
        elif goal.points and any(t.perf is not None and t.perf.reference is None for t in matched):
            owner.notes.append(f"{goal.test}: no reference timing in this run, so no perf points")
        owner.perf_earned = round(owner.perf_earned + earned, 4)

    too_small = [t for t in result.tests if t.status is Status.SKIPPED and GPU_TOO_SMALL_SKIP.match(t.message)]
    if too_small:
        note = (f"{len(too_small)} test(s) need more device memory than this GPU has and were left out "
                f"(e.g. {too_small[0].name}): grade on a GPU with more memory for a complete grade")
        if note not in result.messages:
            result.messages.append(note)
    result.tasks = list(tasks.values()) + ([loose] if loose.perf_points else [])
    score_checkpoints(lab, result)
    result.max_score = lab.total_points
    result.score = round(sum(t.earned + t.perf_earned for t in result.tasks), 4)
    return result


# --- the score stage -------------------------------------------------------------------------------


def score(lab: Lab, result: LabResult, *, techniques: tuple[list[TechniqueOutcome], list[str]] | None,
          gpu: dict[str, str], label: str, progress: Progress) -> LabResult:
    """The score stage: the rubric (score_lab), then what takes points away again (grader/score/
    penalties.py): timings that cannot be believed, missing techniques (found by the inspect stage), the
    sanitizer's share; last, a hint on each failure."""
    score_lab(lab, result)
    penalties.withhold_implausible(result, gpu)
    if techniques is not None:
        progress.step(f"checking the techniques of lab {lab.name}")
        outcomes, notes = techniques
        result.messages += [n for n in notes if n not in result.messages]
        withheld = penalties.apply_techniques(lab, result, outcomes, label)
        missing = [o for o in outcomes if not o.found]
        if missing:
            progress.fail(f"{len(missing)} technique(s) missing: {withheld:g} point(s) withheld")
        elif outcomes:
            progress.ok(f"{len(outcomes)} technique(s) found")
    penalties.apply_points(lab, result, penalties.sanitizer_tests(result))
    hints.annotate(result, hints.hints_for_lab(lab.path), geometry=lab.geometry)
    return result
