"""Checkpoints: the steps of a big all-or-nothing task, shown as progress (issue 29: lab 07's any-n task is
25 points for int4 warp tiles, recursion, scratch carving and n past 2^32, and a student who fails it
needs to know which step is wrong). The lab's author declares them in lab.toml (a task's `checkpoints`:
a title, test globs, and optionally max_n, the largest size that belongs to the step; each step counts
the tests it adds to the steps before it); an all-or-nothing
task of more than AUTO_ABOVE points without them gets one per test family, in test order. They never
change points: the chapter says why a task is all or nothing.
"""

from __future__ import annotations

from grader.model.labs import Checkpoint, Lab, Task
from grader.model.results import CheckpointScore, LabResult, Status, TestResult
from grader.score import mismatch

AUTO_ABOVE = 15.0  # points: bigger all-or-nothing tasks report checkpoints even when lab.toml declares none


def _family(name: str) -> str:
    return name.rpartition("/")[0] if "/" in name else name


def steps(task: Task, tests: list[TestResult]) -> tuple[Checkpoint, ...]:
    """The task's declared checkpoints, else (an all-or-nothing task over AUTO_ABOVE points) one per family
    of its tests ("ScanCorrectness.Exclusive" for every size), else none."""
    if task.checkpoints:
        return task.checkpoints
    if task.scoring != "all-or-nothing" or task.points <= AUTO_ABOVE:
        return ()
    families = list(dict.fromkeys(_family(t.name) for t in tests))
    if len(families) < 2:  # one family: the sizes are the progress, which the test list shows already
        return ()
    return tuple(Checkpoint(f, (f + "/*",) if any("/" in t.name and _family(t.name) == f for t in tests) else (f,))
                 for f in families)


def score_checkpoints(lab: Lab, result: LabResult) -> None:
    """Fill each task's checkpoints from its tests (those that count: passed, failed or not run)."""
    for spec in lab.tasks:
        score = next((ts for ts in result.tasks if ts.id == spec.id), None)
        if score is None:
            continue
        mine = [t for t in result.tests if t.task == spec.id and t.kind != "perf"
                and t.status in (Status.PASSED, Status.FAILED, Status.NOT_RUN)]
        score.checkpoints = []
        counted: set[str] = set()  # each step counts the tests it adds to the steps before it
        for step in steps(spec, mine):
            covered = [t for t in mine if t.name not in counted and step.covers(t.name, mismatch.size_of(t.name))]
            counted.update(t.name for t in covered)
            score.checkpoints.append(CheckpointScore(step.title, sum(t.status is Status.PASSED for t in covered),
                                                     len(covered), sum(t.status is Status.FAILED for t in covered)))
