"""One student's grade in a batch worker thread (grader/course/batch/runner.py runs them): the grade in a
free build slot, the reports written, the state that lets the next batch keep it; and how an interrupt
(Ctrl-C, a scheduler's SIGTERM) is told from a verdict, so that nothing of a grade it cut short is kept."""

from __future__ import annotations

import queue
import signal
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from grader import __version__
from grader.course.batch.slots import BatchGrader, Graded, Interrupted
from grader.course.batch.students import LOG_FILE, Student, clear_reports, forget, write_state
from grader.host.environment import now_iso
from grader.model.errors import GraderError
from grader.model.results import Category, Results, Status

if TYPE_CHECKING:
    from grader.report.outcomes import StudentOutcome

SETTLE_S = 0.25  # how long a grade with a killed-looking build or run waits for the interrupt to arrive
_FAULTS = (Category.CRASH, Category.TIMEOUT, Category.HARNESS)


def _log(student_dir: Path, text: str) -> None:
    student_dir.mkdir(parents=True, exist_ok=True)
    with open(student_dir / LOG_FILE, "a", encoding="utf-8") as f:
        f.write(text if text.endswith("\n") else text + "\n")


def _looks_killed(results: Results | None) -> bool:
    """A build that failed or a run that crashed, hung or went missing: what an interrupt leaves."""
    if results is None:
        return False
    return any(not b.ok for lab in results.labs for b in lab.builds) or any(
        t.status is not Status.PASSED and t.category in _FAULTS for lab in results.labs for t in lab.tests
    )


def _interrupted(grader: BatchGrader, graded: Graded | None) -> bool:
    """Whether this grade was cut short by an interrupt. The signal reaches the build or the test
    binary and this process at once, and the main thread sets grader.stop a moment later: a grade that
    looks killed waits that moment before it is believed."""
    if grader.stop.is_set():
        return True
    if graded is not None and _looks_killed(graded.results):
        return grader.stop.wait(SETTLE_S)
    return False


def _grade_one(
    grader: BatchGrader, student: Student, out_dir: Path, free_slots: queue.Queue[int],
    late: Callable[[Student, Results], bool] | None = None,
) -> tuple[StudentOutcome | None, Graded]:
    """In a worker thread: grade one student in a free slot and write their reports. Never raises.
    Returns (outcome, graded), or (None, graded) when the batch was interrupted during the grade.
    late: a course file's late policy (grader/course/policy.py), applied before the reports are written."""
    from grader.report import StudentOutcome, write_reports

    student_dir = out_dir / student.id
    student_dir.mkdir(parents=True, exist_ok=True)
    forget(student_dir)  # until this grade finishes, nothing says this student was graded
    slot = free_slots.get()
    graded: Graded | None = None
    try:
        with open(student_dir / LOG_FILE, "w", encoding="utf-8") as log:
            log.write(f"{now_iso()} grading {student.path} (slot {slot})\n")
            try:
                graded = grader.grade(student, slot, log)
            except Interrupted:
                graded = None
            except GraderError as err:
                graded = Graded(None, error=str(err))
            except Exception as err:  # noqa: BLE001 - a broken submission (or a grader bug) never stops the batch
                log.write(traceback.format_exc())
                graded = Graded(None, error=f"internal error while grading: {type(err).__name__}: {err}")
            if graded is not None and graded.error:
                log.write(("error: " if graded.results is None else "note: ") + graded.error + "\n")
    finally:
        free_slots.put(slot)
    if graded is None or _interrupted(grader, graded):
        grader.discarded.append(student.id)
        clear_reports(student_dir)
        _log(student_dir, f"{now_iso()} interrupted: nothing of this grade is kept; the next batch grades "
                          "this student again")
        return None, graded or Graded(None)
    seconds = graded.build_s + graded.run_s
    if graded.results is None:
        clear_reports(student_dir)
        return StudentOutcome(
            student.id, None, error=graded.error, report_dir=student.id, seconds=seconds,
            compile_only=grader.compile_only,
        ), graded
    try:
        if late is not None:
            late(student, graded.results)
        write_reports(graded.results, student_dir, root=grader.root)
        write_state(
            student_dir,
            {
                "student": student.id,
                "source": str(student.path),
                "fingerprint": graded.fingerprint,
                "labs": [lab.name for lab in grader.labs],
                "compile_only": grader.compile_only,
                "seconds": round(seconds, 3),
                "build_s": round(graded.build_s, 3),
                "run_s": round(graded.run_s, 3),
                "note": graded.error,
                **({"gpu": graded.gpu.index} if graded.gpu is not None else {}),
                "graded": now_iso(),
                "finished_unix": round(time.time(), 3),
                "grader_version": __version__,
            },
        )
    except Exception as err:  # noqa: BLE001  # pragma: no cover - a full disk, a report bug: still a gradebook row
        _log(student_dir, traceback.format_exc())
        return StudentOutcome(
            student.id,
            None,
            error=f"the reports could not be written: {err}",
            report_dir=student.id,
            seconds=seconds,
            compile_only=grader.compile_only,
        ), graded
    return StudentOutcome(
        student.id, graded.results, error=graded.error, report_dir=student.id, seconds=seconds,
        compile_only=grader.compile_only,
    ), graded


@contextmanager
def _interrupts(stop: threading.Event) -> Iterator[None]:
    """While a batch runs: SIGINT and SIGTERM (a scheduler's time limit) set stop first, so that no
    grade under way is recorded, then end the batch as Ctrl-C does (KeyboardInterrupt). Only the main
    thread can install handlers; elsewhere stop is set where the KeyboardInterrupt is caught."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_signal(signum: int, frame: Any) -> None:
        stop.set()
        raise KeyboardInterrupt(signal.Signals(signum).name)

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
