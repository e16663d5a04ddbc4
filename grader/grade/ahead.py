"""Building the next lab while this one runs. A grade of several labs used to wait for each lab's build
(5-10 s, nearly all of it the compiler) before its tests could start; on a machine with cores to spare the
next lab's prepare half now runs in a thread while the GPU runs this lab's tests, and its progress lines
are held back until that lab's turn, so the console reads as before, lab after lab.

The timed runs (a lab's perf tests, the reference's) wait until no build is under way: a compiler busy on
the same machine must not weigh on a timing.
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
from grader.model.progress import Progress

MIN_CPUS = 4  # below this a build beside the tests would slow the tests more than it saves


class HeldProgress(Progress):
    """Progress lines kept to be said later, in order."""

    def __init__(self) -> None:
        super().__init__(quiet=True, color=False)
        self.lines: list[tuple[str, str]] = []

    def step(self, message: str) -> None:
        self.lines.append(("step", message))

    def ok(self, message: str) -> None:
        self.lines.append(("ok", message))

    def fail(self, message: str) -> None:
        self.lines.append(("fail", message))

    def note(self, message: str) -> None:
        self.lines.append(("note", message))

    def heading(self, message: str) -> None:
        self.lines.append(("heading", message))

    def replay(self, progress: Progress) -> None:
        for kind, message in self.lines:
            getattr(progress, kind)(message)


@dataclass
class _Prepared:
    lab: PreparedLab | None
    seconds: float
    held: HeldProgress
    error: BaseException | None = None


@dataclass
class Ahead:
    """One lab prepared at a time, in a thread of its own, in the order the grade takes them."""

    builders: Builders
    staged: StagedSubmission | None
    checks: bool | None
    _pool: ThreadPoolExecutor = field(default_factory=lambda: ThreadPoolExecutor(1, thread_name_prefix="prepare"))
    _futures: dict[str, Future[_Prepared]] = field(default_factory=dict)

    def start(self, lab: Lab) -> None:
        if lab.name not in self._futures:
            self._futures[lab.name] = self._pool.submit(self._prepare, lab)

    def _prepare(self, lab: Lab) -> _Prepared:
        held = HeldProgress()
        started = time.monotonic()
        try:
            mine = prepare([lab], self.builders, staged=self.staged, checks=self.checks, progress=held)[lab.name]
        except BaseException as err:  # noqa: BLE001 - raised again on the lab's turn, where a grade handles it
            return _Prepared(None, time.monotonic() - started, held, err)
        return _Prepared(mine, time.monotonic() - started, held)

    def take(self, lab: Lab, progress: Progress) -> tuple[PreparedLab, float]:
        """The lab prepared (started now if it was not yet), its held lines said; its own seconds of work."""
        self.start(lab)
        done = self._futures.pop(lab.name).result()
        done.held.replay(progress)
        if done.error is not None:
            raise done.error
        assert done.lab is not None
        return done.lab, done.seconds

    def quiet(self) -> None:
        """Wait until no lab is being prepared (before a timed run)."""
        wait(list(self._futures.values()))

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


def wanted(option: bool | None, labs: list[Lab], real_build: bool) -> bool:
    """Prepare ahead: as asked, else when several labs build for real on a machine with MIN_CPUS cores."""
    if option is not None:
        return option and len(labs) > 1
    return len(labs) > 1 and real_build and (os.cpu_count() or 1) >= MIN_CPUS
