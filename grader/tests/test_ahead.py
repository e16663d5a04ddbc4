"""The next lab built while this one runs (grader/grade/ahead.py): the same results and console as one lab
after the other, the builds in a thread of their own, and no build under way while a lab is timed."""

from __future__ import annotations

import io
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from grader.grade import ahead
from grader.grade.options import RunOptions
from grader.grade.pipeline import run_labs
from grader.host.environment import GpuProbe
from grader.model.labs import discover
from grader.model.progress import Progress
from grader.model.results import BuildResult, Results, Status
from grader.tests.conftest import FakeBuilder, add_tests, spec, write_lab


@dataclass
class LoggingBuilder(FakeBuilder):
    """A fake build that writes each target it builds, and the thread it built it in, to a log file."""

    log: Path | None = None
    threads: dict[str, str] = field(default_factory=dict)

    def build(self, target: str) -> BuildResult:
        self.threads[target] = threading.current_thread().name
        if self.log is not None:
            with open(self.log, "a") as f:
                f.write(f"build {target}\n")
        return super().build(target)


@pytest.fixture
def two_labs(lab_root: Path) -> Path:
    write_lab(lab_root, "02-mul")
    return lab_root


def builder_for(root: Path, log: Path | None = None) -> LoggingBuilder:
    specs = {}
    for n in ("01", "02"):
        specs[f"lab{n}_student"] = spec(add_tests(impl_ms=1.0), log=str(log) if log else None)
        specs[f"lab{n}_solution"] = spec(add_tests(impl_ms=1.0))
    return LoggingBuilder(root / "build" / "bin", specs, log=log)


def grade(root: Path, builder: FakeBuilder, **options) -> tuple[Results, str]:
    out = io.StringIO()
    results = run_labs(root, discover(root), builder, GpuProbe(True, "NVIDIA Fake", "9.0"),
                       RunOptions(reference_cache=False, **options), Progress(stream=out))
    return results, out.getvalue()


def outcome(results: Results) -> list[tuple]:
    return [(lab.name, lab.score, [(t.name, t.status, t.message, t.hint) for t in lab.tests], lab.messages,
             [b.target for b in lab.builds]) for lab in results.labs]


def steady(text: str) -> list[str]:
    """The console without its seconds."""
    return [re.sub(r"\d+(\.\d+)? s\b", "N s", line) for line in text.splitlines()]


def test_prepared_ahead_the_grade_and_console_are_as_before(two_labs: Path) -> None:
    plain, plain_text = grade(two_labs, builder_for(two_labs), prepare_ahead=False)
    builder = builder_for(two_labs)
    early, early_text = grade(two_labs, builder, prepare_ahead=True)
    assert outcome(early) == outcome(plain) and early.labs[0].score == 100.0
    assert steady(early_text) == steady(plain_text)  # held lines said in each lab's section
    assert builder.threads["lab02_student"].startswith("prepare")  # built while lab 01 ran
    assert all("prepare" in lab.seconds for lab in early.labs)


def test_no_build_is_under_way_while_a_lab_is_timed(two_labs: Path, tmp_path: Path) -> None:
    log = tmp_path / "order.log"
    grade(two_labs, builder_for(two_labs, log), prepare_ahead=True)
    lines = log.read_text().splitlines()
    first_perf = lines.index("*Perf.*")
    assert lines.index("build lab02_student") < first_perf and lines.index("build lab02_solution") < first_perf


def test_a_lab_that_fails_to_prepare_ahead_is_that_labs_error(two_labs: Path, monkeypatch) -> None:
    real = ahead.prepare

    def broken(labs, *args, **kwargs):
        if labs[0].name == "02-mul":
            raise RuntimeError("disk full")
        return real(labs, *args, **kwargs)

    monkeypatch.setattr(ahead, "prepare", broken)
    results, text = grade(two_labs, builder_for(two_labs), prepare_ahead=True)
    first, second = results.labs
    assert first.passed == 5
    assert any("the grader failed on this lab (RuntimeError: disk full" in m for m in second.messages)
    assert all(t.status is Status.NOT_RUN for t in second.tests)
    assert text.index("== lab 02-mul") < text.index("disk full")


def test_when_it_prepares_ahead(two_labs: Path, monkeypatch) -> None:
    labs = discover(two_labs)
    assert ahead.wanted(True, labs, real_build=False)
    assert not ahead.wanted(True, labs[:1], real_build=True)  # one lab: nothing to overlap
    assert not ahead.wanted(False, labs, real_build=True)
    assert not ahead.wanted(None, labs, real_build=False)  # fake or no build: nothing to gain
    monkeypatch.setattr(ahead.os, "cpu_count", lambda: 16)
    assert ahead.wanted(None, labs, real_build=True)
    monkeypatch.setattr(ahead.os, "cpu_count", lambda: 2)  # a build beside the tests would slow them
    assert not ahead.wanted(None, labs, real_build=True)


def test_held_lines_are_said_in_order() -> None:
    held = ahead.HeldProgress()
    held.step("building lab02_student")
    held.fail("lab02_student_object did not compile")
    held.note("see the log")
    out = io.StringIO()
    ahead.say(held.lines, Progress(stream=out, color=False))
    assert out.getvalue().splitlines() == ["  .. building lab02_student", "  !! lab02_student_object did not compile",
                                           "     see the log"]


def test_the_other_labs_are_prepared_together_and_each_reads_its_own_lines(two_labs: Path) -> None:
    write_lab(two_labs, "03-sub")
    builder = builder_for(two_labs)
    builder.specs["lab03_student"] = spec(add_tests(fail_small=True))
    builder.specs["lab03_solution"] = spec(add_tests())
    results, text = grade(two_labs, builder, prepare_ahead=True)
    assert [lab.name for lab in results.labs] == ["01-add", "02-mul", "03-sub"]
    assert results.labs[2].failed == 1 and results.labs[1].failed == 0
    sections = text.split("== lab ")
    assert "building lab02_student" in sections[2] and "lab03" not in sections[2]
    assert "building lab03_student" in sections[3] and "lab02" not in sections[3]
    assert "lab01_" not in sections[2] + sections[3]
    assert builder.threads["lab02_student"] == builder.threads["lab03_student"]  # one build, side by side


def test_held_lines_go_to_the_first_lab_they_name(two_labs: Path) -> None:
    write_lab(two_labs, "03-sub")
    labs = discover(two_labs)[1:]
    held = ahead.HeldProgress()
    held.step("building lab02_student_object, lab03_student_object")
    held.fail("lab03_student_object did not compile")
    held.step("configuring")
    held.ok("built lab03_student (0.4 s)")
    group = ahead._Group(labs, {}, held)
    assert ahead.lines_for(group, labs[0]) == [("step", "building lab02_student_object, lab03_student_object"),
                                               ("step", "configuring")]
    assert ahead.lines_for(group, labs[1]) == [("fail", "lab03_student_object did not compile"),
                                               ("ok", "built lab03_student (0.4 s)")]


def test_several_labs_are_checked_side_by_side_in_order(two_labs: Path, monkeypatch) -> None:
    """The include listings and object checks of several labs (a grade's other labs, a batch slot's
    student) run at once, as many as the machine has cores: three checks that each wait for the others
    finish, and keep the labs' order."""
    from grader.grade import prepare as prep

    monkeypatch.setattr(prep.os, "cpu_count", lambda: 16)
    write_lab(two_labs, "03-sub")
    labs = discover(two_labs)
    together = threading.Barrier(3, timeout=10)

    def check(lab):
        together.wait()  # raises BrokenBarrierError if the checks ran one after another
        return lab.name

    assert prep._each(labs, check) == ["01-add", "02-mul", "03-sub"]
    assert prep._each(labs[:1], lambda lab: threading.current_thread().name) == ["MainThread"]
