"""What takes points away again after the rubric (grader/score/scoring.py): timings that cannot be
believed (grader/score/perfcheck.py), techniques lab.toml asks for that the object lacks, and the
compute-sanitizer's findings in a task's kernels and its own [sanitizer] points."""

from __future__ import annotations

from grader.execute.sanitizer import SUITE, TASK_ID
from grader.inspect.techniques import TECHNIQUE_SUITE, TechniqueOutcome
from grader.model.labs import Lab
from grader.model.results import Category, LabResult, Status, TaskScore, TestResult
from grader.score import perfcheck


def withhold_implausible(result: LabResult, gpu: dict[str, str]) -> None:
    """No perf points for a timing that cannot be believed (below the GPU's floor, work left running)."""
    for test in result.tests:
        perf = test.perf
        if perf is None or test.status is not Status.PASSED:
            continue
        why = perfcheck.implausible(perf, gpu, scored=perf.points > 0)
        if not why:
            continue
        perf.implausible = why
        if perf.earned:
            owner = next((t for t in result.tasks if t.id == test.task), None)
            if owner is not None:
                owner.perf_earned = round(max(0.0, owner.perf_earned - perf.earned), 4)
                owner.notes.append(f"{test.name}: no perf points: {why}")
            result.score = round(max(0.0, result.score - perf.earned), 4)
            perf.earned = 0.0
        if why not in result.messages:
            result.messages.append(f"{test.name}: {why}")


def apply_techniques(lab: Lab, result: LabResult, outcomes: list[TechniqueOutcome], binary: str = "student") -> float:
    """After scoring: withhold points for missing techniques, note them on their tasks, and add a
    technique_missing entry per missing technique. Returns the points withheld."""
    missing = [o for o in outcomes if not o.found]
    withheld_total = 0.0
    by_task: dict[str, list[TechniqueOutcome]] = {}
    for o in missing:
        by_task.setdefault(o.technique.task, []).append(o)
    for task_id, outs in by_task.items():
        ts = next((t for t in result.tasks if t.id == task_id), None)
        whole = any(o.technique.points is None for o in outs)
        cap = float("inf") if whole else sum(o.technique.points or 0.0 for o in outs)
        withheld = 0.0
        if ts is not None:
            take = min(ts.earned, cap)
            ts.earned = round(ts.earned - take, 4)
            withheld += take
            take = min(ts.perf_earned, cap - withheld)
            ts.perf_earned = round(ts.perf_earned - take, 4)
            withheld += take
        for k, o in enumerate(outs, start=1):
            points = "the task's points" if o.technique.points is None else f"{o.technique.points:g} points"
            if ts is not None:
                ts.notes.append(f"{o.technique.message or o.technique.pattern} ({points} withheld)")
            result.tests.append(TestResult(
                name=f"{TECHNIQUE_SUITE}.{task_id}" + (f"/{k}" if k > 1 else ""),
                status=Status.FAILED,
                kind="correctness",
                binary=binary,
                task=task_id,
                category=Category.TECHNIQUE_MISSING,
                message=o.message + f" ({points} withheld)",
            ))
        withheld_total += withheld
    if withheld_total:
        result.score = round(max(0.0, result.score - withheld_total), 4)
    return withheld_total


def sanitizer_tests(result: LabResult) -> list[TestResult]:
    return [t for t in result.tests if t.name.startswith(f"{SUITE}.")]


def apply_points(lab: Lab, result: LabResult, tests: list[TestResult]) -> None:
    """After score_lab: a finding in a kernel a task owns ([[task]] kernels) costs that task [sanitizer]
    cost (default 1: every point) of its correctness points; [sanitizer] points, if any, are a task of
    their own, shared by the tools that ran."""
    charge_findings(lab, result, tests)
    points = float(lab.sanitizer.get("points", 0) or 0)
    if points <= 0 or not tests:
        return
    ran = [t for t in tests if t.status in (Status.PASSED, Status.FAILED)]
    passed = sum(t.status is Status.PASSED for t in ran)
    earned = round(points * passed / len(tests), 4) if tests else 0.0
    task = TaskScore(id=TASK_ID, title="compute-sanitizer: " + ", ".join(t.name.split(".", 1)[1] for t in tests),
                     points=points, earned=earned, tests_passed=passed, tests_total=len(tests))
    if len(ran) < len(tests):
        task.notes.append(f"{len(tests) - len(ran)} sanitizer tool(s) did not run")
    for t in tests:
        t.task = TASK_ID
    result.tasks.append(task)
    result.max_score = round(result.max_score + points, 4)
    result.score = round(result.score + earned, 4)


def charge_findings(lab: Lab, result: LabResult, tests: list[TestResult]) -> None:
    """Take from each task whose kernel a tool found an error in its share of [sanitizer] cost."""
    cost = min(1.0, max(0.0, float(lab.sanitizer.get("cost", 1.0))))
    charged: dict[str, list[str]] = {}  # task id -> "memcheck in kernel_name"
    for t in tests:
        if t.status is not Status.FAILED:
            continue
        for entry in filter(None, t.properties.get("sanitizer_kernels", "").split(",")):
            # "function>kernel": the inlined function's owner first, else the kernel's
            kernel, task = next(((k, task) for k in entry.split(">") if (task := lab.task_for_kernel(k)) is not None),
                                (entry, None))
            if task is not None:
                charged.setdefault(task.id, []).append(f"{t.name.split('.', 1)[1]} in {kernel}")
                t.task = t.task or task.id
    for score in result.tasks:
        found = charged.get(score.id)
        if not found or cost <= 0:
            continue
        spec = lab.task(score.id)
        taken = round(min(score.earned, cost * (spec.points if spec else score.points)), 4)
        score.earned = round(score.earned - taken, 4)
        result.score = round(max(0.0, result.score - taken), 4)
        score.notes.append(f"compute-sanitizer found an error ({'; '.join(sorted(set(found)))}): "
                           f"{taken:g} point(s) taken, since a race or an out-of-bounds access is a bug "
                           "even when the answer came out right")
