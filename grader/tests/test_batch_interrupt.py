"""An interrupted batch (Ctrl-C, a scheduler's SIGTERM) records nothing of the students whose grade was
under way: a killed build is no compile error and a killed run no crash. The next batch grades them
again (fake builds and fake test binaries, as in test_batch.py)."""

from __future__ import annotations

import io
import json
import os
import signal
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from grader.course.batch import runner as batch_mod
from grader.course.batch import worker
from grader.course.batch import slots as batch_slots
from grader.course.batch.slots import Graded
from grader.build.cmake import failed_build
from grader.host.environment import now_iso
from grader.model.progress import Progress
from grader.model.results import BuildResult, Category, LabResult, Results, RunInfo, Status
from grader.model.results import TestResult as Case

from grader.tests.test_batch import GPU, SOLUTION, FakeSlot, batch, fakes, gradebook  # noqa: F401

KILLED_BUILD = "ninja: build stopped: interrupted by user.\nFAILED: labs/01-add/CMakeFiles/add.cu.o\n"


@pytest.fixture
def graders(monkeypatch) -> list[batch_slots.BatchGrader]:
    """Every BatchGrader a batch makes, so that a test can wait for its stop event."""
    made: list[batch_slots.BatchGrader] = []

    class Recorded(batch_slots.BatchGrader):
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            made.append(self)

    monkeypatch.setattr(batch_mod, "BatchGrader", Recorded)
    return made


def three_students(tmp_path: Path) -> None:
    """ada, ivy and zed hand in the solution; jobs=1 grades them in that order."""
    for who in ("ada", "ivy", "zed"):
        (tmp_path / "class" / who).mkdir(parents=True)
        (tmp_path / "class" / who / "add.cu").write_text(SOLUTION + f"// {who}\n")


def interrupt(graders: list, signum: int) -> None:
    """What a Ctrl-C or a scheduler does: the signal reaches this process, whose main thread (waiting
    for the workers) handles it; wait until it has."""
    os.kill(os.getpid(), signum)
    assert graders[-1].stop.wait(10), "the batch did not see the signal"


def assert_not_recorded(out: Path, who: str) -> None:
    d = out / who
    assert not (d / ".batch.json").exists() and not (d / "results.json").exists()
    assert not (d / "report.html").exists() and not (d / "gradescope.json").exists()
    assert "interrupted: nothing of this grade is kept" in (d / "grade.log").read_text()


def assert_resumed(lab_root: Path, fakes: dict, tmp_path: Path) -> None:
    """The next batch keeps ada, grades ivy (and zed, whose grade never started) again: all 100."""
    code, stdout, progress = batch(lab_root, fakes, tmp_path, "1", jobs=1)
    assert code == 0, progress
    assert "2 processed now, 1 kept, 0 broken" in stdout
    book = gradebook(tmp_path / "out")
    assert {who: (row["status"], row["total"]) for who, row in book.items()} == {
        who: ("graded", "100") for who in ("ada", "ivy", "zed")
    }
    state = json.loads((tmp_path / "out" / "ivy" / ".batch.json").read_text())
    assert state["fingerprint"] and not state["compile_only"]


def test_an_interrupted_build_is_graded_again(lab_root: Path, tmp_path: Path, fakes: dict, graders: list) -> None:
    three_students(tmp_path)
    handler = signal.getsignal(signal.SIGINT)
    fired = []

    def ctrl_c_during_ivys_build(text: str) -> BuildResult | None:
        if "// ivy" in text and not fired:
            fired.append(True)
            interrupt(graders, signal.SIGINT)
            return failed_build("lab01_student", KILLED_BUILD, 0.1)  # what cmake says when ninja is killed
        return None

    FakeSlot.on_build = ctrl_c_during_ivys_build
    with pytest.raises(KeyboardInterrupt):
        batch(lab_root, fakes, tmp_path, "1", jobs=1)
    out = tmp_path / "out"
    assert (out / "ada" / ".batch.json").is_file()  # finished before the interrupt: kept
    assert_not_recorded(out, "ivy")  # not a compile error
    assert not (out / "zed").exists()  # never started
    assert list(gradebook(out)) == ["ada"]
    assert signal.getsignal(signal.SIGINT) is handler  # the batch's handlers are gone
    assert_resumed(lab_root, fakes, tmp_path)


def test_an_interrupted_run_is_graded_again(
    lab_root: Path, tmp_path: Path, fakes: dict, graders: list, monkeypatch
) -> None:
    """A scheduler's time limit (SIGTERM) while ivy's tests run: even a complete-looking result of
    that run is not kept."""
    three_students(tmp_path)
    handler = signal.getsignal(signal.SIGTERM)
    real_grade_labs = batch_slots.grade_labs
    fired = []

    def sigterm_during_ivys_run(grade, labs, options, progress, prepared=None):
        if "ivy" in options.submission and not fired:
            fired.append(True)
            interrupt(graders, signal.SIGTERM)
        return real_grade_labs(grade, labs, options, progress, prepared)

    monkeypatch.setattr(batch_slots, "grade_labs", sigterm_during_ivys_run)
    stdout = io.StringIO()
    with pytest.raises(KeyboardInterrupt):
        batch_mod.run_batch(
            lab_root, tmp_path / "class", tmp_path / "out", ["1"], jobs=1, gpu=GPU, main_builder=fakes["main"],
            slot_builder=fakes["slot_builder"], sandbox=False, stdout=stdout, progress=Progress(stream=io.StringIO()),
        )
    text = stdout.getvalue()
    assert "interrupted: 1 of 3 student(s) recorded" in text and "1 grade(s) under way were not kept" in text
    assert text.rstrip().endswith("no verdict): ivy; run the same command again to continue")
    out = tmp_path / "out"
    assert_not_recorded(out, "ivy")
    assert signal.getsignal(signal.SIGTERM) is handler
    assert_resumed(lab_root, fakes, tmp_path)


def test_a_grade_killed_just_before_the_signal_arrives_is_not_kept() -> None:
    """The build (or the test binary) can die of the signal a moment before the main thread sets
    stop: a grade that looks killed waits for that moment."""
    run = RunInfo(started=now_iso())
    killed = Results(run=run, labs=[LabResult(1, "01-add", "Add", 100, builds=[BuildResult("lab01_student", False)])])
    crashed = Results(run=run, labs=[LabResult(1, "01-add", "Add", 100, tests=[
        Case("AddCorrectness.Small/1", Status.NOT_RUN, category=Category.CRASH)])])
    fine = Results(run=run, labs=[LabResult(1, "01-add", "Add", 100, tests=[
        Case("AddCorrectness.Small/1", Status.FAILED, category=Category.WRONG_ANSWER)])])
    for results in (killed, crashed):
        grader = SimpleNamespace(stop=threading.Event())
        threading.Timer(0.05, grader.stop.set).start()
        assert worker._interrupted(grader, Graded(results))  # type: ignore[arg-type]
        never = SimpleNamespace(stop=threading.Event())
        assert not worker._interrupted(never, Graded(results))  # type: ignore[arg-type]
    quiet = SimpleNamespace(stop=threading.Event())
    threading.Timer(0.05, quiet.stop.set).start()
    assert not worker._interrupted(quiet, Graded(fine))  # type: ignore[arg-type]  # a verdict: no wait
