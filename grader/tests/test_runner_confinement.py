"""The GPU health probe decides, once per process, which confinement layers the GPU works under here; each
grade keeps its own settings (its memory limit, executables, run folder). Seen on the H200: a mutation gate's
later grades got an earlier grade's settings and the note "the GPU did not work under  on this machine"."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from grader.execute import runner
from grader.execute.health import HealthMonitor
from grader.execute.policy import ConfineSettings


@pytest.fixture
def probe(tmp_path: Path, monkeypatch):
    """A probe that works only where the runs it is given are confined without Landlock."""
    path = tmp_path / "gpu_probe"
    path.write_text("")
    calls: list[bool] = []

    def fake_run(argv, timeout, confine=None, env=None):
        calls.append(confine.landlock)
        return SimpleNamespace(returncode=1 if confine.landlock else 0)

    monkeypatch.setattr(runner.process, "run", fake_run)
    monkeypatch.setattr(runner, "_CONFINEMENT_VERDICTS", {})
    return HealthMonitor(locate=lambda: path), calls


def test_a_layer_the_gpu_fails_under_is_dropped_and_each_grade_keeps_its_settings(probe) -> None:
    health, calls = probe
    notes: list[str] = []
    first = runner._self_check(ConfineSettings(memory_mib=1024, executable=("/a",)), health, notes)
    assert (first.landlock, first.namespaces, first.memory_mib, first.executable) == (False, True, 1024, ("/a",))
    assert notes == ["confinement: the GPU did not work under Landlock on this machine; runs went without Landlock"]
    notes.clear()
    second = runner._self_check(ConfineSettings(memory_mib=4096, executable=("/b",)), health, notes)
    assert (second.landlock, second.memory_mib, second.executable) == (False, 4096, ("/b",))  # its own, not the first's
    assert notes == ["confinement: the GPU did not work under Landlock on this machine; runs went without Landlock"]
    assert len(calls) == 2  # probed once (confined, then without Landlock), remembered for the second grade


def test_a_gpu_that_works_confined_leaves_every_grade_as_asked(probe, monkeypatch) -> None:
    health, _ = probe
    monkeypatch.setattr(runner.process, "run", lambda *a, **k: SimpleNamespace(returncode=0))
    for memory in (1024, 4096):
        notes: list[str] = []
        asked = ConfineSettings(memory_mib=memory)
        assert runner._self_check(asked, health, notes) == asked and notes == []
