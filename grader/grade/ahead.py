"""Building the other labs while the first one runs. A grade of several labs used to wait for each lab's
build (5-10 s, nearly all of it the compiler) before its tests could start; on a machine with cores to
spare the first lab is prepared alone (its tests start as soon as they can) and the others then all at
once, in one build with their compiles side by side, in a thread, while the GPU runs the first lab's
tests. Each lab's progress lines are held back until its turn, so the console reads lab after lab.

The timed runs (a lab's perf tests, the reference's) wait until no build is under way: a compiler busy on
the same machine must not weigh on a timing. So only the first lab's timed runs can wait.
"""

from __future__ import annotations

import os
import time
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field

from grader.build.stages import Builders
from grader.grade.prepare import PreparedLab, prepare
from grader.intake.staging import StagedSubmission
from grader.model.labs import Lab
from grader.model.progress import HeldProgress, Progress, say

MIN_CPUS = 4  # below this a build beside the tests would slow the tests more than it saves


@dataclass
class _Group:
    labs: list[Lab]
    prepared: dict[str, PreparedLab]
    held: HeldProgress
    error: BaseException | None = None


@dataclass
class Ahead:
    """Groups of labs prepared in a thread of their own, one group after another, in the grade's order."""

    builders: Builders
    staged: StagedSubmission | None
    checks: bool | None
    _pool: ThreadPoolExecutor = field(default_factory=lambda: ThreadPoolExecutor(1, thread_name_prefix="prepare"))
    _futures: dict[str, Future[_Group]] = field(default_factory=dict)

    def start(self, labs: list[Lab]) -> None:
        """Prepare these labs together (one build, their compiles side by side), after the groups before."""
        labs = [lab for lab in labs if lab.name not in self._futures]
        if labs:
            future = self._pool.submit(self._prepare, labs)
            for lab in labs:
                self._futures[lab.name] = future

    def _prepare(self, labs: list[Lab]) -> _Group:
        held = HeldProgress()
        try:
            mine = prepare(labs, self.builders, staged=self.staged, checks=self.checks, progress=held)
        except BaseException as err:  # noqa: BLE001 - raised again on each lab's turn, where a grade handles it
            return _Group(labs, {}, held, err)
        return _Group(labs, mine, held)

    def take(self, lab: Lab, progress: Progress) -> tuple[PreparedLab, float]:
        """The lab prepared (started now if it was not yet) and its held lines said; the seconds waited."""
        self.start([lab])
        started = time.monotonic()
        group = self._futures.pop(lab.name).result()
        waited = time.monotonic() - started
        say(lines_for(group, lab), progress)
        if group.error is not None:
            raise group.error
        return group.prepared[lab.name], waited

    def quiet(self) -> None:
        """Wait until no lab is being prepared (before a timed run)."""
        wait(list(self._futures.values()))

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


def lines_for(group: _Group, lab: Lab) -> list[tuple[str, str]]:
    """The held lines of a group said at this lab's turn: those that name it (its targets, its folder)
    before any later lab of the group, and those that name none of them at the first lab's turn. Each
    line is said once, at the turn of the first lab it names (a build of several labs: the first)."""
    names = [(other.name, (other.target_prefix + "_", other.name)) for other in group.labs]

    def owner(message: str) -> str:
        return next((name for name, keys in names if any(k in message for k in keys)), group.labs[0].name)

    return [line for line in group.held.lines if owner(line[1]) == lab.name]


def wanted(option: bool | None, labs: list[Lab], real_build: bool) -> bool:
    """Prepare ahead: as asked, else when several labs build for real on a machine with MIN_CPUS cores."""
    if option is not None:
        return option and len(labs) > 1
    return len(labs) > 1 and real_build and (os.cpu_count() or 1) >= MIN_CPUS
