"""`grader slurm`: the sbatch scripts (array range, throttle, limits, container), the shard list, the
dependency of the merge job, --dry-run, status parsing and the resubmit's selection. No Slurm needed:
sbatch, squeue and sacct are a fake runner."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from grader.batch_students import LOG_FILE
from grader.cli import main
from grader.errors import GraderError
from grader.labs import discover
from grader.slurm import (
    Jobs,
    cmd_slurm_resubmit,
    cmd_slurm_status,
    cmd_slurm_submit,
    parse_sacct,
    parse_squeue,
    read_shards,
    student_states,
    to_resubmit,
)
from grader.slurm_scripts import BatchArgs, Limits, SlurmOptions, array_range, limits, shards
from grader.tests.test_batch_merge import finished


class FakeSlurm:
    """sbatch hands out job ids 100, 101, ...; squeue and sacct answer from states."""

    def __init__(self, states: dict[str, str] | None = None, sacct: bool = True) -> None:
        self.calls: list[list[str]] = []
        self.next = 100
        self.states = states or {}
        self.sacct = sacct

    def __call__(self, cmd: list[str]) -> subprocess.CompletedProcess[str]:
        self.calls.append(cmd)
        if cmd[0] == "sbatch":
            self.next += 1
            return subprocess.CompletedProcess(cmd, 0, f"{self.next - 1}\n", "")
        if cmd[0] == "squeue":
            live = {j: s for j, s in self.states.items() if s in ("PENDING", "RUNNING")}
            return subprocess.CompletedProcess(cmd, 0, "".join(f"{j}|{s}\n" for j, s in live.items()), "")
        if cmd[0] == "sacct":
            if not self.sacct:
                return subprocess.CompletedProcess(cmd, 1, "", "Slurm accounting storage is disabled\n")
            return subprocess.CompletedProcess(cmd, 0, "".join(f"{j}|{s}\n" for j, s in self.states.items()), "")
        raise AssertionError(cmd)


@pytest.fixture
def subs(tmp_path: Path) -> Path:
    d = tmp_path / "subs"
    for s in ("ada", "bob", "cyd", "dan", "eve"):
        (d / s).mkdir(parents=True)
    (d / "roster.txt").write_text("not a submission\n")
    return d


def submit(lab_root: Path, subs: Path, out: Path, runner: FakeSlurm, **slurm: object) -> str:
    import io

    buf = io.StringIO()
    options = SlurmOptions(**{"max_parallel": 2, **slurm})  # type: ignore[arg-type]
    cmd_slurm_submit(lab_root, subs, out, BatchArgs(labs=["01"], compile_only=False), options,
                     runner=runner, stdout=buf)
    return buf.getvalue()


def test_array_range_and_shards() -> None:
    assert array_range(1, None) == "0"
    assert array_range(10, None) == "0-9"
    assert array_range(300, 8) == "0-299%8"
    assert shards(["a", "b", "c", "d", "e"], 2) == [["a", "b"], ["c", "d"], ["e"]]
    with pytest.raises(ValueError):
        shards(["a"], 0)


def test_limits_from_the_labs(lab_root: Path) -> None:
    labs = discover(lab_root)
    lab = labs[0]
    one = limits(labs, 1, BatchArgs(jobs=2), SlurmOptions())
    three = limits(labs, 3, BatchArgs(jobs=2), SlurmOptions())
    assert three.time_min > one.time_min  # each student adds their compile and test-run time
    assert one.mem_mib == 2 * 2048 + 1024 + int(lab.host_memory_mib or 32768)
    check = limits(labs, 1, BatchArgs(jobs=2, compile_only=True), SlurmOptions())
    assert check.mem_mib == 2 * 2048 + 1024 and check.time_min < one.time_min
    assert limits(labs, 1, BatchArgs(), SlurmOptions(time_min=7, mem_mib=900)) == Limits(7, 900)
    assert Limits(90, 1).time == "01:30:00" and Limits(24 * 60 + 5, 1).time == "1-00:05:00"


def test_submit_writes_scripts_shards_and_chains_the_merge(lab_root: Path, subs: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    fake = FakeSlurm()
    text = submit(lab_root, subs, out, fake, partition="gpu", gpus_per_task=1, shard_size=2,
                  sbatch_args=["--account=cs101"])
    array = (out / "slurm" / "round-0-array.sbatch").read_text()
    merge = (out / "slurm" / "round-0-merge.sbatch").read_text()
    assert "#SBATCH --array=0-2%2" in array  # 5 students, 2 per task
    assert "#SBATCH --partition=gpu" in array and "#SBATCH --gpus-per-task=1" in array
    assert "#SBATCH --account=cs101" in array and "#SBATCH --account=cs101" in merge
    assert "#SBATCH --time=" in array and "#SBATCH --mem=" in array
    assert "TASK=$(( 0 + SLURM_ARRAY_TASK_ID ))" in array
    assert f"slurm task {out.resolve()} --task \"$TASK\" --work-dir \"$WORK\"" in array
    assert "apptainer" not in array
    assert f"batch merge {out.resolve()}/tasks/*/ --out {out.resolve()}" in merge
    assert "--gpus-per-task" not in merge
    assert read_shards(out) == {0: ["ada", "bob"], 1: ["cyd", "dan"], 2: ["eve"]}
    assert (out / "slurm" / "roster.txt").read_text().split() == ["ada", "bob", "cyd", "dan", "eve"]
    assert all((out / "tasks" / str(i)).is_dir() for i in range(3))
    assert fake.calls[0] == ["sbatch", "--parsable", str(out.resolve() / "slurm" / "round-0-array.sbatch")]
    assert fake.calls[1][:3] == ["sbatch", "--parsable", "--dependency=afterany:100"]
    jobs = Jobs.load(out)
    assert (jobs.rounds[0].array_job, jobs.rounds[0].merge_job) == ("100", "101")
    assert "array job 100" in text and "merge job 101" in text
    with pytest.raises(GraderError, match="earlier submission"):
        submit(lab_root, subs, out, FakeSlurm())


def test_container_wraps_each_task(lab_root: Path, subs: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    submit(lab_root, subs, out, FakeSlurm(), container="/images/cudalab.sif")
    array = (out / "slurm" / "round-0-array.sbatch").read_text()
    merge = (out / "slurm" / "round-0-merge.sbatch").read_text()
    assert "apptainer exec --nv --bind" in array and "/images/cudalab.sif python3 -m grader" in array
    assert str(subs.resolve()) in array and '"$WORK"' in array
    assert "apptainer exec --bind" in merge  # the merge needs no GPU
    assert Jobs.load(out).python == "python3"


def test_compile_check_asks_for_no_gpu(lab_root: Path, subs: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    cmd_slurm_submit(lab_root, subs, out, BatchArgs(compile_only=True), SlurmOptions(gpus_per_task=1),
                     runner=FakeSlurm(), stdout=open("/dev/null", "w"))
    array = (out / "slurm" / "round-0-array.sbatch").read_text()
    assert "--gpus-per-task" not in array and "#SBATCH --array=0-4\n" in array


def test_dry_run_prints_and_writes_nothing(lab_root: Path, subs: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    code = main(["--root", str(lab_root), "slurm", "submit", str(subs), "--out", str(out), "--max-parallel", "3",
                 "--dry-run"])
    text = capsys.readouterr().out
    assert code == 0 and not out.exists()
    assert "#SBATCH --array=0-4%3" in text and "cudalab-merge" in text
    assert "sbatch --parsable --dependency=afterany:<array job id>" in text
    assert "# 0: ada" in text and "# 4: eve" in text


def test_parse_squeue_and_sacct() -> None:
    assert parse_squeue("100_0|RUNNING\n100_1|PENDING\n\n101|PENDING\n") == {
        "100_0": "RUNNING", "100_1": "PENDING", "101": "PENDING"}
    assert parse_sacct("100_0|COMPLETED\n100_1|CANCELLED by 0\n100_[2-4%2]|PENDING\n101|FAILED\n") == {
        "100_0": "COMPLETED", "100_1": "CANCELLED", "101": "FAILED"}


def test_status_and_resubmit_select_the_failed_and_missing(lab_root: Path, subs: Path, tmp_path: Path,
                                                          capsys) -> None:
    out = tmp_path / "out"
    submit(lab_root, subs, out, FakeSlurm())
    tasks = out.resolve() / "tasks"
    finished(tasks / "0", "ada")
    finished(tasks / "2", "cyd")
    (tasks / "1" / "bob").mkdir()  # bob's task was killed in his grade
    (tasks / "1" / "bob" / LOG_FILE).write_text("x grading\n")
    finished(tasks / "4", "eve")
    (tasks / "4" / "eve" / "results.json").write_text("corrupt")
    people = {p.student: p for p in student_states(out.resolve(), ["ada", "bob", "cyd", "dan", "eve"],
                                                   read_shards(out))}
    assert [people[s].state for s in ("ada", "bob", "cyd", "dan", "eve")] == [
        "graded", "broken", "graded", "missing", "broken"]
    assert people["dan"].task == 3
    fake = FakeSlurm({"100_0": "COMPLETED", "100_1": "CANCELLED", "100_2": "COMPLETED", "100_3": "TIMEOUT",
                      "100_4": "COMPLETED", "101": "COMPLETED"})
    cmd_slurm_status(out, runner=fake)
    text = capsys.readouterr().out
    assert "task 1 (100_1) CANCELLED: bob" in text and "task 3 (100_3) TIMEOUT: dan" in text
    assert "5: 2 graded, 2 broken, 1 missing" in text and "missing: dan (task 3)" in text
    assert to_resubmit(out.resolve(), ["ada", "bob", "cyd", "dan", "eve"], read_shards(out)) == ["bob", "dan", "eve"]
    cmd_slurm_resubmit(out, runner=fake)
    assert read_shards(out)[5] == ["bob"] and read_shards(out)[7] == ["eve"]
    array = (out / "slurm" / "round-1-array.sbatch").read_text()
    assert "#SBATCH --array=0-2%2" in array and "TASK=$(( 5 + SLURM_ARRAY_TASK_ID ))" in array
    jobs = Jobs.load(out)
    assert len(jobs.rounds) == 2 and jobs.rounds[1].base == 5
    assert fake.calls[-1][2] == f"--dependency=afterany:{jobs.rounds[1].array_job}"


def test_resubmit_waits_for_live_jobs_and_says_when_nothing_is_left(lab_root: Path, subs: Path,
                                                                    tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    submit(lab_root, subs, out, FakeSlurm())
    with pytest.raises(GraderError, match="still pending or running"):
        cmd_slurm_resubmit(out, runner=FakeSlurm({"100_3": "RUNNING"}, sacct=False))
    for i, s in enumerate(("ada", "bob", "cyd", "dan", "eve")):
        finished(out.resolve() / "tasks" / str(i), s)
    fake = FakeSlurm()
    cmd_slurm_resubmit(out, runner=fake)
    assert "nothing to resubmit" in capsys.readouterr().out
    assert not any(c[0] == "sbatch" for c in fake.calls)


def test_resubmit_dry_run(lab_root: Path, subs: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    submit(lab_root, subs, out, FakeSlurm())
    capsys.readouterr()
    cmd_slurm_resubmit(out, dry_run=True, runner=FakeSlurm())
    text = capsys.readouterr().out
    assert "resubmitting 5 student(s)" in text and "round-1-array.sbatch" in text and "# 5: ada" in text
    assert len(Jobs.load(out).rounds) == 1 and not (out / "slurm" / "round-1-array.sbatch").exists()


def test_sbatch_failure_is_an_environment_error(lab_root: Path, subs: Path, tmp_path: Path) -> None:
    def refuse(cmd: list[str]) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(cmd, 1, "", "sbatch: error: invalid partition specified: gpu\n")

    with pytest.raises(GraderError, match="invalid partition") as err:
        cmd_slurm_submit(lab_root, subs, tmp_path / "out", BatchArgs(), SlurmOptions(partition="gpu"), runner=refuse)
    assert err.value.code == 4


# --- the batch's hooks for a task: its shard alone, a work folder of its own ----------------------------

from grader.tests.test_batch import GPU, batch, class_dir, fakes, gradebook  # noqa: E402,F401


def test_a_task_grades_its_shard_alone_in_its_own_work_folder(lab_root: Path, tmp_path: Path, fakes: dict) -> None:
    from grader.batch_slots import BatchGrader
    from grader.errors import Exit

    class_dir(tmp_path)
    other = BatchGrader(lab_root, discover(lab_root), GPU, "default", main_builder=fakes["main"])
    other.lock_slots()  # a batch of the same preset in the checkout's build/: a task never waits for it
    try:
        code, _, _ = batch(lab_root, fakes, tmp_path, "1", preset="default", only={"ada", "dan"},
                           work_dir=tmp_path / "work")
    finally:
        other.unlock_slots()
    assert code is Exit.OK
    assert set(gradebook(tmp_path / "out")) == {"ada", "dan"}
    assert (tmp_path / "work" / "default-batch.lock").exists()
