"""`batch --gpus`: one run worker per GPU of the node, with fake GPUs (a fake nvidia-smi listing, the fake
builders and binaries of test_batch.py): at most one grade per GPU at a time, each student's runs all
pinned to one GPU with CUDA_VISIBLE_DEVICES, the reference timed on each GPU used, the GPU named in
results.json and the gradebook, resume, `--gpus 0` scoring as the default batch, usage errors."""

from __future__ import annotations

import csv
import io
import json
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from grader.cli import args as cli
from grader.host import environment
from grader.execute import runs
from grader.course.batch.runner import run_batch
from grader.course.batch.gpus import GpuPool, parse_gpus
from grader.host.environment import GpuDevice
from grader.model.errors import Exit, GraderError
from grader.execute.health import HealthMonitor
from grader.model.progress import Progress
from grader.model.results import Results

from grader.tests.test_batch import GPU, class_dir, fakes, gradebook  # noqa: F401 - fakes is a fixture

DEVICES = [GpuDevice(i, "NVIDIA Fake", f"GPU-fake-{i}", "9.0") for i in range(4)]


def lister() -> list[GpuDevice]:
    return list(DEVICES)


def grade(lab_root: Path, fakes: dict, tmp_path: Path, out: str = "out", **kwargs):  # noqa: F811
    err, stdout = io.StringIO(), io.StringIO()
    code = run_batch(lab_root, tmp_path / "class", tmp_path / out, ["1"], main_builder=fakes["main"],
                     slot_builder=fakes["slot_builder"], sandbox=False, stdout=stdout,
                     progress=Progress(stream=err), gpu=GPU, gpu_lister=lister, **kwargs)
    return code, stdout.getvalue(), err.getvalue()


# --- which GPUs -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("spec", ["", "x", "0,,1", "-1", "1,1", "0;1", "gpu0", "5", "0,7"])
def test_bad_gpus_are_usage_errors(spec: str) -> None:
    with pytest.raises(GraderError) as err:
        parse_gpus(spec, lister)
    assert err.value.code is Exit.USAGE and "--gpus" in str(err.value)


def test_gpus_are_chosen_by_index_or_all() -> None:
    assert parse_gpus(None, lister) is None  # the default batch
    assert [d.index for d in parse_gpus("2,0", lister)] == [2, 0]
    assert [d.index for d in parse_gpus(" all ", lister, environ={})] == [0, 1, 2, 3]
    # A scheduler's allocation: `all` is what CUDA_VISIBLE_DEVICES names (index or UUID).
    assert [d.index for d in parse_gpus("all", lister, environ={"CUDA_VISIBLE_DEVICES": "1,GPU-fake-3"})] == [1, 3]
    with pytest.raises(GraderError, match="names none"):
        parse_gpus("all", lister, environ={"CUDA_VISIBLE_DEVICES": "9"})
    with pytest.raises(GraderError, match="no GPU found") as err:
        parse_gpus("all", lambda: [])
    assert err.value.code is Exit.ENVIRONMENT
    with pytest.raises(GraderError, match="no GPU 5 here; this machine has GPU 0 \\(NVIDIA Fake\\)"):
        parse_gpus("0,5", lister)
    assert DEVICES[2].env == {"CUDA_VISIBLE_DEVICES": "GPU-fake-2", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    assert GpuDevice(1).env["CUDA_VISIBLE_DEVICES"] == "1"


def test_list_gpus_reads_nvidia_smi(monkeypatch) -> None:
    monkeypatch.setattr(environment.shutil, "which", lambda name: "/usr/bin/nvidia-smi")
    answers = {
        "--query-gpu=index,name,uuid,compute_cap": (0, "0, NVIDIA H100 80GB HBM3, GPU-aaa, 9.0\n"
                                                       "1, NVIDIA H100 80GB HBM3, GPU-bbb, 9.0\n"),
        "-L": (0, "GPU 0: NVIDIA H200 (UUID: GPU-ccc)\nGPU 1: NVIDIA H200 (UUID: GPU-ddd)\n"),
    }
    monkeypatch.setattr(environment, "_run", lambda argv, **kw: answers.get(argv[1], (1, "")))
    assert environment.list_gpus() == [GpuDevice(0, "NVIDIA H100 80GB HBM3", "GPU-aaa", "9.0"),
                                       GpuDevice(1, "NVIDIA H100 80GB HBM3", "GPU-bbb", "9.0")]
    answers.pop("--query-gpu=index,name,uuid,compute_cap")  # an old driver: the -L listing
    assert environment.list_gpus() == [GpuDevice(0, "NVIDIA H200", "GPU-ccc"), GpuDevice(1, "NVIDIA H200", "GPU-ddd")]
    monkeypatch.setattr(environment.shutil, "which", lambda name: None)
    assert environment.list_gpus() == []


def test_the_gpu_probe_reads_the_smallest_memory(monkeypatch) -> None:
    """A grade on a machine whose GPUs differ plans for the smallest (the sanitizer beside the run)."""
    monkeypatch.setattr(environment.shutil, "which", lambda name: "/usr/bin/nvidia-smi")
    answers = {
        "-L": (0, "GPU 0: NVIDIA H200 (UUID: GPU-ccc)\nGPU 1: NVIDIA A2 (UUID: GPU-ddd)\n"),
        "--query-gpu=name,compute_cap,memory.total": (0, "NVIDIA H200, 9.0, 143771\nNVIDIA A2, 8.6, 15356\n"),
    }
    monkeypatch.setattr(environment, "_run", lambda argv, **kw: answers.get(argv[1], (1, "")))
    probe = environment.probe_gpu()
    assert (probe.available, probe.name, probe.compute_capability, probe.memory_mib) == (True, "NVIDIA H200", "9.0", 15356)
    assert DEVICES[0].probe(probe).memory_mib == 15356
    answers["--query-gpu=name,compute_cap,memory.total"] = (0, "NVIDIA H200, 9.0, [N/A]\n")
    assert environment.probe_gpu().memory_mib == 0  # not known: nothing is planned on it


def test_the_gpu_probe_asks_nvidia_smi_once(monkeypatch) -> None:
    """Each nvidia-smi call costs a grade ~0.2 s before its first test: one query on a current driver; the
    -L listing only when the query fails (an old driver), or to say why no GPU is there."""
    monkeypatch.setattr(environment.shutil, "which", lambda name: "/usr/bin/nvidia-smi")
    asked: list[str] = []
    answers = {"--query-gpu=name,compute_cap,memory.total": (0, "NVIDIA H200, 9.0, 143771\n"),
               "-L": (0, "GPU 0: NVIDIA H200 (UUID: GPU-ccc)\n")}

    def run(argv, **kw):
        asked.append(argv[1])
        return answers.get(argv[1], (1, ""))

    monkeypatch.setattr(environment, "_run", run)
    assert environment.probe_gpu() == environment.GpuProbe(True, "NVIDIA H200", "9.0", memory_mib=143771)
    assert asked == ["--query-gpu=name,compute_cap,memory.total"]
    asked.clear()
    answers["--query-gpu=name,compute_cap,memory.total"] = (2, "Field \"compute_cap\" is not a valid field to query.\n")
    assert environment.probe_gpu() == environment.GpuProbe(True, "NVIDIA H200")  # an old driver
    assert asked == ["--query-gpu=name,compute_cap,memory.total", "-L"]
    answers["--query-gpu=name,compute_cap,memory.total"] = (6, "No devices were found\n")
    answers["-L"] = (6, "No devices were found\n")
    probe = environment.probe_gpu()
    assert not probe.available and probe.reason == "nvidia-smi -L failed: No devices were found"


def test_the_pool_lends_each_gpu_per_gpu_times() -> None:
    pool = GpuPool([DEVICES[0], DEVICES[1]], per_gpu=2)
    assert pool.capacity == 4 and pool.pinned and not GpuPool([None]).pinned
    taken = []
    with pool.take() as a, pool.take() as b, pool.take() as c:
        taken = [a.index, b.index, c.index]
    assert taken == [0, 1, 0]  # round-robin: the first grades spread over the GPUs


def test_the_pool_lends_one_named_gpu_when_it_is_free() -> None:
    """The batch's reference timings take each GPU by name: a named GPU waits for that GPU only."""
    pool = GpuPool([DEVICES[0], DEVICES[1]])
    got: list[int] = []
    with pool.take(DEVICES[0]):
        with pool.take() as other:  # the one left
            assert other is DEVICES[1]

        def named() -> None:
            with pool.take(DEVICES[0]) as d:
                got.append(d.index)

        waiter = threading.Thread(target=named)
        waiter.start()
        waiter.join(0.3)
        assert waiter.is_alive() and not got  # GPU 0 is still held
    waiter.join(5)
    assert got == [0]
    with pytest.raises(ValueError, match="not a GPU of this pool"):
        with pool.take(DEVICES[2]):
            pass


def test_the_health_probe_checks_the_gpu_of_the_grade(tmp_path: Path) -> None:
    seen = tmp_path / "seen"
    probe = tmp_path / "probe"
    probe.write_text(f'#!/bin/sh\necho "$CUDA_VISIBLE_DEVICES" >> "{seen}"\nexit 1\n')
    probe.chmod(0o755)
    monitor = HealthMonitor(lambda: probe, retry_wait_s=0, env=DEVICES[2].env)
    assert "GPU unhealthy after lab01_student" in (monitor.check("lab01_student") or "")
    assert seen.read_text().split() == ["GPU-fake-2", "GPU-fake-2"]


# --- the batch on several GPUs ----------------------------------------------------------------------------


class RunWatch:
    """Wraps the batch's GPU pool (GpuPool.take) and runs.run_binary: GPUs held at once (overall and per
    GPU: a student's grade or a GPU's reference timings ahead), and every test binary's
    CUDA_VISIBLE_DEVICES against the GPU its thread holds."""

    def __init__(self, monkeypatch) -> None:
        self.lock = threading.Lock()
        self.now: dict[str, int] = {}
        self.most_total = 0
        self.most_per_gpu = 0
        self.current = threading.local()
        self.binaries: list[tuple[str, str | None]] = []  # (binary, CUDA_VISIBLE_DEVICES)
        self.mismatches: list[str] = []
        real_take, real_run_binary = GpuPool.take, runs.run_binary
        watch = self

        @contextmanager
        def take(pool, *args, **kwargs):
            with real_take(pool, *args, **kwargs) as taken:
                device = taken.uuid if taken is not None else ""
                with watch.lock:
                    watch.now[device] = watch.now.get(device, 0) + 1
                    watch.most_total = max(watch.most_total, sum(watch.now.values()))
                    watch.most_per_gpu = max(watch.most_per_gpu, watch.now[device])
                watch.current.device = device
                try:
                    time.sleep(0.2)
                    yield taken
                finally:
                    watch.current.device = None
                    with watch.lock:
                        watch.now[device] -= 1

        def run_binary(binary, *args, **kwargs):
            device = (kwargs.get("env") or {}).get("CUDA_VISIBLE_DEVICES")
            with self.lock:
                self.binaries.append((Path(binary).name, device))
            if device != (getattr(self.current, "device", None) or None):
                self.mismatches.append(f"{Path(binary).name} ran with {device}")
            return real_run_binary(binary, *args, **kwargs)

        monkeypatch.setattr(GpuPool, "take", take)
        monkeypatch.setattr(runs, "run_binary", run_binary)


def test_each_gpu_grades_one_student_at_a_time(lab_root: Path, tmp_path: Path, fakes: dict,  # noqa: F811
                                               monkeypatch) -> None:
    class_dir(tmp_path)
    out = tmp_path / "out"
    watch = RunWatch(monkeypatch)
    code, stdout, progress = grade(lab_root, fakes, tmp_path, gpus="0,2", jobs=4)
    assert code is Exit.OK, progress
    # Two GPUs: two grades at once, never two on one GPU; every binary pinned to its grade's GPU.
    assert watch.most_total == 2 and watch.most_per_gpu == 1, watch.now
    assert not watch.mismatches and {d for _, d in watch.binaries} <= {"GPU-fake-0", "GPU-fake-2"}
    assert "GPUs: GPU 0 (NVIDIA Fake), GPU 2 (NVIDIA Fake) (--gpus)" in progress
    assert "test runs one at a time on each of 2 GPUs" in progress

    # Every report names its GPU: results.json, the grade's .batch.json, the gradebook, the summary.
    used: dict[str, str] = {}
    book = gradebook(out)
    for who in ("ada", "bob", "cat", "dan"):
        run = Results.load(out / who / "results.json").run
        assert run.gpu["gpu_index"] in ("0", "2") and run.gpu["gpu_uuid"] == f"GPU-fake-{run.gpu['gpu_index']}"
        assert json.loads((out / who / ".batch.json").read_text())["gpu"] == int(run.gpu["gpu_index"])
        used[who] = run.gpu["gpu_index"]
        assert book[who]["gpu"] == f"GPU {used[who]} (NVIDIA Fake)"
        assert f"on GPU {used[who]}" in progress
    assert book["eve"]["status"] == "broken" and book["eve"]["gpu"] == ""
    assert list(csv.reader(io.StringIO((out / "gradebook.csv").read_text())))[0][-3:] == ["status", "gpu", "notes"]
    assert "GPUs used" in (out / "class-summary.html").read_text() and "graded per GPU: GPU" in stdout

    # The reference is timed once on each GPU of the batch, pinned there (ahead, while the first students
    # build), and kept per GPU.
    gpus = ["0", "2"]
    reference = [d for name, d in watch.binaries if name == "lab01_solution"]
    assert len(fakes["reference_runs"]) == len(gpus) and sorted(reference) == [f"GPU-fake-{g}" for g in gpus]
    for g in gpus:
        saved = json.loads((out / f".reference-timings.gpu{g}.json").read_text())
        assert saved["device"] == f"GPU {g} (NVIDIA Fake)" and "lab01_solution" in saved["targets"]
    assert not (out / ".reference-timings.json").exists()

    # Resume: nothing changed, nothing runs again; the kept rows still name their GPU.
    before = len(fakes["builds"])
    code, stdout, _ = grade(lab_root, fakes, tmp_path, gpus="0,2", jobs=4)
    assert code is Exit.OK and "0 processed now, 4 kept, 1 broken" in stdout and len(fakes["builds"]) == before
    assert gradebook(out)["ada"]["gpu"] == f"GPU {used['ada']} (NVIDIA Fake)"
    # One student changes their file: graded again, the reference timings come from each GPU's file.
    (tmp_path / "class" / "dan" / "add.cu").write_text((tmp_path / "class" / "ada" / "labs" / "01-add" / "add.cu")
                                                       .read_text())
    code, stdout, _ = grade(lab_root, fakes, tmp_path, gpus="0,2", jobs=4)
    assert "1 processed now, 3 kept" in stdout and gradebook(out)["dan"]["total"] == "100"
    assert len(fakes["reference_runs"]) == len(gpus)


def test_every_gpu_times_the_references_ahead(lab_root: Path, tmp_path: Path, fakes: dict,  # noqa: F811
                                             monkeypatch) -> None:
    """One student on two GPUs: the reference is timed on both, pinned, before any grade needs it (while
    the slots build), where before only the GPU the student took timed it, inside that grade."""
    d = tmp_path / "class"
    (d / "ada").mkdir(parents=True)
    (d / "ada" / "add.cu").write_text((lab_root / "solutions" / "01-add" / "add.cu").read_text())
    watch = RunWatch(monkeypatch)
    code, _, progress = grade(lab_root, fakes, tmp_path, gpus="0,2", jobs=2)
    assert code is Exit.OK, progress
    assert not watch.mismatches and watch.most_per_gpu == 1
    assert sorted(d for name, d in watch.binaries if name == "lab01_solution") == ["GPU-fake-0", "GPU-fake-2"]
    assert len(fakes["reference_runs"]) == 2
    # Correctness-only (the mutation gate): nothing is timed, ahead or later.
    before = len(fakes["reference_runs"])
    code, _, progress = grade(lab_root, fakes, tmp_path, out="gate", gpus="0,2", jobs=2, perf=False)
    assert code is Exit.OK, progress
    assert len(fakes["reference_runs"]) == before


def test_gpus_0_scores_as_the_default_batch(lab_root: Path, tmp_path: Path, fakes: dict,  # noqa: F811
                                            monkeypatch) -> None:
    class_dir(tmp_path)
    watch = RunWatch(monkeypatch)
    assert grade(lab_root, fakes, tmp_path, out="default", jobs=2)[0] is Exit.OK
    assert {d for _, d in watch.binaries} == {None}  # the default batch pins nothing
    watch.binaries.clear()
    assert grade(lab_root, fakes, tmp_path, out="gpu0", gpus="0", jobs=2)[0] is Exit.OK
    assert {d for _, d in watch.binaries} == {"GPU-fake-0"} and not watch.mismatches
    default, pinned = gradebook(tmp_path / "default"), gradebook(tmp_path / "gpu0")
    assert "gpu" not in next(iter(default.values()))  # the default gradebook is as before
    assert "gpu_index" not in Results.load(tmp_path / "default" / "ada" / "results.json").run.gpu
    assert sorted(default) == sorted(pinned)
    for who, row in default.items():
        assert {k: v for k, v in pinned[who].items() if k != "gpu"} == row, who
        assert pinned[who]["gpu"] == ("" if row["status"] == "broken" else "GPU 0 (NVIDIA Fake)")


def test_cli_gpus_usage_errors(lab_root: Path, tmp_path: Path, capsys) -> None:
    class_dir(tmp_path)
    for bad in ("x", "0,0", "1,-2"):
        argv = ["--root", str(lab_root), "batch", str(tmp_path / "class"), "--out", str(tmp_path / "o"), "--gpus", bad]
        assert cli.main(argv) == 2
        assert "--gpus" in capsys.readouterr().err
    argv = ["--root", str(lab_root), "batch", str(tmp_path / "class"), "--out", str(tmp_path / "o"), "--gpus", "0"]
    assert cli.build_parser().parse_args(argv).gpus == "0"
