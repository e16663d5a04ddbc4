"""The screen and the object's compile side by side (grader/grade/prepare.py): the compile starts with the
screen, and only what the screen let through is kept. A refused file's compile says nothing on the console
and leaves no build in the report (its output may quote a file it was not allowed to read)."""

from __future__ import annotations

import io
import threading
from pathlib import Path

import pytest

from grader.build.stages import Builders
from grader.grade import prepare as prep
from grader.inspect.static_checks import Screening
from grader.model.block import Block
from grader.model.labs import discover
from grader.model.progress import GatedProgress, Progress
from grader.model.results import BuildResult, Category
from grader.tests.conftest import FakeBuilder, write_lab

SECRET = "TEST(HiddenVectorAdd, Secret)"  # what a refused file's compile error could quote


@pytest.fixture
def labs(lab_root: Path):
    write_lab(lab_root, "02-mul")
    return discover(lab_root)


class Fakes:
    """A screen that refuses the labs named in `refuse`, and a compile that says a line per target (a
    refused lab's quotes SECRET); `compile_started` is set when the compile begins."""

    def __init__(self, refuse: set[str], wait_for_compile: bool = True) -> None:
        self.refuse, self.wait_for_compile = refuse, wait_for_compile
        self.compile_started = threading.Event()
        self.overlapped = False

    def screen(self, lab, sources, build_dir, mode, progress, unstage):  # noqa: ANN001, ANN201 - screen's signature
        progress.step(f"checking what the files of {lab.target_prefix}_student_object include")
        if self.wait_for_compile:
            self.overlapped = self.compile_started.wait(timeout=10)
        if lab.name in self.refuse:
            progress.fail(f"{lab.target_prefix}: includes that are not allowed")
            return Screening(block=Block(Category.FORBIDDEN_CALL, "includes that are not allowed", "refused"))
        return Screening()

    def build_objects(self, labs, builders, progress):  # noqa: ANN001, ANN201 - build_objects' signature
        self.compile_started.set()
        targets = [f"{lab.target_prefix}_student_object" for lab in labs]
        progress.step(f"building {', '.join(targets)}")
        out = {}
        for lab, target in zip(labs, targets):
            if lab.name in self.refuse:
                out[lab.name] = BuildResult(target=target, ok=False, category=Category.COMPILE_ERROR,
                                            message=f"compile error: {SECRET}", log=SECRET)
                progress.fail(f"{target}: compile error: {SECRET}")
            else:
                out[lab.name] = BuildResult(target=target, ok=True, seconds=1.5, log=f"shared log {SECRET}")
        progress.ok("built everything")
        return out


def run(labs, monkeypatch, fakes: Fakes):  # noqa: ANN001, ANN201
    monkeypatch.setattr(prep.static_checks, "screen", fakes.screen)
    monkeypatch.setattr(prep.build, "build_objects", fakes.build_objects)
    out = io.StringIO()
    prepared = {lab.name: prep.PreparedLab(lab) for lab in labs}
    blocks: dict = {lab.name: None for lab in labs}
    builders = Builders(main=FakeBuilder(Path("/nonexistent"), {}), code=FakeBuilder(Path("/nonexistent"), {}))
    failed, blocks = prep._screen_and_compile(labs, {lab.name: [] for lab in labs}, blocks, prepared, builders,
                                              Progress(stream=out))
    return failed, blocks, prepared, out.getvalue()


def test_the_compile_runs_while_the_screen_does(labs, monkeypatch) -> None:
    fakes = Fakes(refuse=set())
    failed, blocks, prepared, console = run(labs, monkeypatch, fakes)
    assert fakes.overlapped, "the screen finished before the compile began"
    assert failed == {} and all(b is None for b in blocks.values())
    for lab in labs:
        assert [b.target for b in prepared[lab.name].builds] == [f"{lab.target_prefix}_student_object"]
    # The console reads as before: the screens' lines, then the compile's.
    assert console.index("include") < console.index(".. building") < console.index("ok built everything")


def test_a_refused_file_compiles_unsaid_and_unkept(labs, monkeypatch) -> None:
    refused, kept = labs[0], labs[1]
    failed, blocks, prepared, console = run(labs, monkeypatch, Fakes(refuse={refused.name}))
    assert blocks[refused.name] is not None and blocks[kept.name] is None
    assert SECRET not in console, console
    assert prepared[refused.name].builds == [] and refused.name not in failed
    # The lab the screen let through keeps its object, said on its own; the log it shared is left out.
    (build,) = prepared[kept.name].builds
    assert build.ok and build.log == ""
    assert f"ok built {kept.target_prefix}_student_object (1.5 s)" in console
    assert "includes that are not allowed" in console


def test_one_refused_lab_keeps_nothing_of_its_compile(lab_root: Path, monkeypatch) -> None:
    (lab,) = discover(lab_root)
    failed, blocks, prepared, console = run([lab], monkeypatch, Fakes(refuse={lab.name}))
    assert blocks[lab.name] is not None and failed == {} and prepared[lab.name].builds == []
    assert SECRET not in console and "building" not in console


def test_a_preprocessor_error_is_the_screens_not_the_compiles(lab_root: Path, monkeypatch) -> None:
    (lab,) = discover(lab_root)
    fakes = Fakes(refuse=set(), wait_for_compile=False)
    missing = BuildResult(target="lab01_student_object", ok=False, category=Category.COMPILE_ERROR,
                          message="compile error: no_such.h: No such file or directory")
    monkeypatch.setattr(fakes, "screen", lambda *a: Screening(compile_error=missing))
    failed, blocks, prepared, console = run([lab], monkeypatch, fakes)
    assert failed == {lab.name: missing} and prepared[lab.name].builds == [missing]
    assert "building" not in console


def test_a_failing_screen_leaves_no_compile_running(lab_root: Path, monkeypatch) -> None:
    (lab,) = discover(lab_root)
    fakes = Fakes(refuse=set(), wait_for_compile=False)
    done = threading.Event()

    def slow_compile(labs, builders, progress):  # noqa: ANN001, ANN202
        fakes.compile_started.set()
        progress.step("building lab01_student_object")
        done.wait(timeout=0.2)
        done.set()
        return {}

    def broken_screen(*args):  # noqa: ANN002, ANN202
        fakes.compile_started.wait(timeout=10)
        raise RuntimeError("the screen broke")

    monkeypatch.setattr(fakes, "screen", broken_screen)
    monkeypatch.setattr(fakes, "build_objects", slow_compile)
    with pytest.raises(RuntimeError, match="the screen broke"):
        run([lab], monkeypatch, fakes)
    assert done.is_set(), "the compile was still running when prepare gave up"


def test_gated_lines_are_held_then_said_or_dropped() -> None:
    out = io.StringIO()
    gate = GatedProgress(Progress(stream=out))
    gate.step("building a")
    assert out.getvalue() == ""
    gate.open()
    gate.ok("built a")
    assert out.getvalue() == "  .. building a\n  ok built a\n"
    dropped = GatedProgress(Progress(stream=out))
    dropped.step("building b")
    dropped.drop()
    dropped.fail("b: compile error")
    dropped.open()  # too late: a dropped gate stays shut
    dropped.ok("built b")
    assert "b" not in out.getvalue().replace("building a", "").replace("built a", "")
