"""`grader slurm`: the sbatch scripts (array range, throttle, limits, container), the shard list, the
dependency of the merge job, --dry-run, status parsing and the resubmit's selection. No Slurm needed:
sbatch, squeue and sacct are a fake runner."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from grader.course.batch.students import LOG_FILE
from grader.cli.args import main
from grader.model.errors import GraderError
from grader.model.labs import discover
from grader.course.slurm.jobs import (
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
from grader.course.slurm.scripts import BatchArgs, Limits, SlurmOptions, array_range, limits, shards
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
    from grader.course.batch.slots import BatchGrader
    from grader.model.errors import Exit

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


# --- a class with a roster and a course file (issue 15 on Slurm) -----------------------------------------

import csv  # noqa: E402
import glob  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import shlex  # noqa: E402
from datetime import datetime, timezone  # noqa: E402

from grader.model.results import Results  # noqa: E402
from grader.tests.test_batch_course import COURSE, ROSTER  # noqa: E402


def _class_submit(lab_root: Path, tmp_path: Path, runner: FakeSlurm, **slurm: object) -> tuple[Path, str]:
    """tmp_path/class (test_batch's: ada, bob.zip, cat.tar.gz, dan, eve.zip) against test_batch_course's
    roster (ada.lovelace alias ada, bob with a submitted_at 1 h late, dan, zed with nothing)."""
    class_dir(tmp_path)
    (tmp_path / "roster.csv").write_text(ROSTER)
    (tmp_path / "course.toml").write_text(COURSE)
    out = tmp_path / "sout"
    buf = io.StringIO()
    cmd_slurm_submit(lab_root, tmp_path / "class", out, BatchArgs(labs=["01"]), SlurmOptions(**slurm),  # type: ignore[arg-type]
                     runner=runner, stdout=buf, roster=tmp_path / "roster.csv", course=tmp_path / "course.toml")
    return out.resolve(), buf.getvalue()


def _script_argv(script: Path, marker: str, **env: str) -> list[str]:
    """The grader's arguments on the line of script that runs it (after `-m grader`), $VARs filled in
    and globs expanded, as bash would."""
    line = next(x for x in script.read_text().splitlines() if marker in x and "-m grader" in x)
    words = shlex.split(line)
    words = words[words.index("grader", words.index("-m")) + 1 :]
    words = [env.get(w.lstrip("$"), w) if w.startswith("$") else w for w in words]
    return [x for w in words for x in (sorted(glob.glob(w)) if "*" in w else [w])]


def test_submit_with_a_roster_shards_roster_ids_and_copies_the_class_files(lab_root: Path, tmp_path: Path) -> None:
    out, text = _class_submit(lab_root, tmp_path, FakeSlurm(), shard_size=2)
    slurm = out / "slurm"
    # matched submissions under their roster ids, in roster order; cat and eve match nobody; zed has nothing
    assert read_shards(out) == {0: ["ada.lovelace", "bob"], 1: ["dan"]}
    assert (slurm / "roster.txt").read_text().split() == ["ada.lovelace", "bob", "dan"]
    assert "roster: 4 student(s): 3 with a submission, 1 missing" in text and "missing: zed" in text
    assert "not graded: cat.tar.gz: matches no student" in text and "not graded: eve.zip" in text
    assert [line.split("\t")[0] for line in (slurm / "unmatched.tsv").read_text().splitlines()[1:]] == [
        "cat.tar.gz", "eve.zip"]
    # the copies: what every job reads, whatever becomes of the originals
    assert (slurm / "roster.csv").read_text() == ROSTER and (slurm / "course.toml").read_text() == COURSE
    (tmp_path / "course.toml").write_text("broken")
    assert (slurm / "course.toml").read_text() == COURSE
    jobs = Jobs.load(out)
    assert (jobs.roster, jobs.course) == (str(slurm / "roster.csv"), str(slurm / "course.toml"))
    array = (slurm / "round-0-array.sbatch").read_text()
    merge = (slurm / "round-0-merge.sbatch").read_text()
    assert f'--work-dir "$WORK" --roster {slurm}/roster.csv --course {slurm}/course.toml' in array
    assert (f"--roster {slurm}/roster.csv --expect {slurm}/roster.txt --unmatched {slurm}/unmatched.tsv"
            in merge)
    assert "course.toml" not in merge  # the tasks applied the late policy to results.json


def test_submit_with_a_roster_refuses_bad_files_and_no_match(lab_root: Path, tmp_path: Path) -> None:
    class_dir(tmp_path)
    (tmp_path / "roster.csv").write_text("id,name,email\nzed,Z,z\n")
    (tmp_path / "course.toml").write_text('[due]\n"01" = "2025-09-26T23:59:00"\n')  # no timezone
    args = (lab_root, tmp_path / "class", tmp_path / "sout", BatchArgs(), SlurmOptions())
    with pytest.raises(GraderError, match="no timezone") as err:
        cmd_slurm_submit(*args, runner=FakeSlurm(), course=tmp_path / "course.toml")
    assert err.value.code == 2
    with pytest.raises(GraderError, match="no submission .* matches a student of the roster") as err:
        cmd_slurm_submit(*args, runner=FakeSlurm(), roster=tmp_path / "roster.csv")
    assert err.value.code == 2 and not (tmp_path / "sout").exists()


def test_dry_run_with_a_roster_prints_the_options(lab_root: Path, tmp_path: Path, capsys) -> None:
    class_dir(tmp_path)
    (tmp_path / "roster.csv").write_text(ROSTER)
    (tmp_path / "course.toml").write_text(COURSE)
    out = tmp_path / "sout"
    code = main(["--root", str(lab_root), "slurm", "submit", str(tmp_path / "class"), "--out", str(out),
                 "--roster", str(tmp_path / "roster.csv"), "--course", str(tmp_path / "course.toml"), "--dry-run"])
    text = capsys.readouterr().out
    assert code == 0 and not out.exists()
    assert f"--course {out.resolve()}/slurm/course.toml" in text and "--expect" in text
    assert "# 0: ada.lovelace" in text and "# 2: dan" in text and "missing: zed" in text


def test_tasks_and_merge_of_a_course(lab_root: Path, tmp_path: Path, fakes: dict, monkeypatch, capsys) -> None:
    """Each task runs as its script says (the fake builders in place of nvcc); dan's task dies. The merge,
    as its script says: the late penalty from the course file's copy, zed `missing`, dan `broken`, cat
    and eve listed as not graded. Then status and resubmit: only dan is graded again."""
    from grader.course.batch import runner as batch_mod
    from grader.model.progress import Progress

    late = datetime(2025, 9, 28, 12, 0, tzinfo=timezone.utc).timestamp()
    out, _ = _class_submit(lab_root, tmp_path, FakeSlurm())
    os.utime(tmp_path / "class" / "bob.zip", (late, late))  # the roster's submitted_at (1 h late) wins
    real = batch_mod.run_batch
    seen: list[dict] = []

    def fake_run_batch(*args: object, **kwargs: object):
        seen.append(kwargs)
        kwargs.update(main_builder=fakes["main"], slot_builder=fakes["slot_builder"], sandbox=False, gpu=GPU,
                      progress=Progress(stream=io.StringIO()), stdout=io.StringIO())
        return real(*args, **kwargs)

    monkeypatch.setattr(batch_mod, "run_batch", fake_run_batch)
    array = out / "slurm" / "round-0-array.sbatch"
    for task in (0, 1):  # ada.lovelace, bob; task 2 (dan) was killed before it began
        assert main(_script_argv(array, "slurm task", TASK=str(task), WORK=str(tmp_path / f"w{task}"))) == 0
    assert seen[0]["roster"] == out / "slurm" / "roster.csv" and seen[0]["course"] == out / "slurm" / "course.toml"
    assert seen[1]["only"] == {"bob"}
    assert (out / "tasks" / "1" / "bob" / "results.json").is_file()
    assert "cat.tar.gz" not in (out / "tasks" / "0" / "class-summary.html").read_text()  # the merge lists it
    capsys.readouterr()
    assert main(_script_argv(out / "slurm" / "round-0-merge.sbatch", "batch merge")) == 1  # dan is broken
    with open(out / "gradebook.csv", newline="") as f:
        book = {r["student"]: r for r in csv.DictReader(f)}
    assert list(book) == ["ada.lovelace", "bob", "dan", "zed"]
    assert book["ada.lovelace"]["status"] == "graded" and book["ada.lovelace"]["name"] == "Ada Lovelace"
    assert book["bob"]["01-add time source"] == "submitted_at column" and float(book["bob"]["01-add penalty"]) > 0
    saved = Results.load(out / "tasks" / "1" / "bob" / "results.json")
    assert saved.labs[0].late is not None and saved.labs[0].late.penalty_percent == 10
    assert book["dan"]["status"] == "broken" and "no batch graded this student" in book["dan"]["notes"]
    assert book["zed"]["status"] == "missing" and book["zed"]["total"] == "0"
    summary = (out / "class-summary.html").read_text()
    assert "cat.tar.gz" in summary and "eve.zip" in summary and "handed in nothing" in summary
    capsys.readouterr()
    fake = FakeSlurm({"100_0": "COMPLETED", "100_1": "COMPLETED", "100_2": "CANCELLED", "101": "COMPLETED"})
    cmd_slurm_status(out, runner=fake)
    text = capsys.readouterr().out
    assert "students: 3: 2 graded, 0 broken, 1 missing" in text and "missing: dan (task 2)" in text
    assert "roster: 4 student(s): 3 with a submission, 1 missing" in text and "  missing: zed" in text
    assert "not graded: cat.tar.gz" in text
    cmd_slurm_resubmit(out, runner=fake)
    assert read_shards(out)[3] == ["dan"]  # zed handed in nothing: no task grades them
    assert f"--roster {out}/slurm/roster.csv" in (out / "slurm" / "round-1-array.sbatch").read_text()
    assert "--expect" in (out / "slurm" / "round-1-merge.sbatch").read_text()


def test_slurm_course_copy_pins_a_relative_ledger(tmp_path: Path) -> None:
    from grader.course.slurm.course import SlurmClass

    (tmp_path / "c").mkdir()
    course = tmp_path / "c" / "course.toml"
    course.write_text('[policy]\nlate_days = 2\nledger = "late-days.json"   # kept across batches\n')
    SlurmClass(["ada"], course=course).write(tmp_path / "out" / "slurm")
    copy = (tmp_path / "out" / "slurm" / "course.toml").read_text()
    assert json.dumps(str((tmp_path / "c" / "late-days.json").resolve())) in copy and "late_days = 2" in copy
    course.write_text("[policy]\nlate_days = 2\n")
    SlurmClass(["ada"], course=course).write(tmp_path / "out" / "slurm")
    assert (tmp_path / "out" / "slurm" / "course.toml").read_text() == course.read_text()
