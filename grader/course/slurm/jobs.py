"""Grade a class on a Slurm cluster: `grader slurm submit|status|resubmit|task`.

Layout of OUT, on a filesystem every node sees (the lab tree and the submissions too):

  OUT/slurm/jobs.json              what was submitted: the submissions, labs, options, each round's jobs
  OUT/slurm/shards.tsv             the shard list: one line per student, `<task id>\\t<student>`
  OUT/slurm/roster.txt             every student sharded: each gets a gradebook row
  OUT/slurm/roster.csv, course.toml, unmatched.tsv   with --roster/--course (grader/course/slurm/course.py)
  OUT/slurm/round-<r>-array.sbatch, round-<r>-merge.sbatch   the scripts (grader/course/slurm/scripts.py)
  OUT/slurm/logs/                  task-<array job>_<index>.out, merge-<job>.out
  OUT/tasks/<task id>/             one `grader batch` output per task: <student>/ reports, its gradebook
  OUT/class-summary.html, OUT/gradebook.csv   the merge of every task (grader/course/batch/merge.py)

`submit` shards the students (roster order; with --roster, the roster ids of the matched submissions),
writes the files above and submits the array and the merge job (`--dependency=afterany`); `--dry-run`
prints the scripts and the sbatch command lines instead and writes nothing. `status` says what Slurm
knows of each round's jobs (squeue, else sacct) and which students are graded, broken or missing.
`resubmit` submits a new round over the students who have no finished grade (a task that died, was
cancelled or ran out of time; a broken submission), with task ids after the last ones, and merges again.
`task` is what an array task runs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TextIO

from grader.course.batch.merge import best, scan
from grader.host.environment import now_iso
from grader.model.errors import Exit, GraderError
from grader.model.labs import LabError, discover, select
from grader.course.slurm.scripts import (
    BatchArgs,
    ScriptPlan,
    SlurmOptions,
    array_script,
    limits,
    merge_script,
    sbatch_commands,
)
from grader.course.slurm.scripts import shards as make_shards
from grader.course.slurm.course import SlurmClass, status_lines

Runner = Callable[[list[str]], "subprocess.CompletedProcess[str]"]
ACTIVE = ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "REQUEUED", "RESIZING", "SUSPENDED")


def run_command(cmd: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, check=False)


@dataclass
class Round:
    round: int
    base: int
    tasks: int
    array_job: str = ""
    merge_job: str = ""
    submitted: str = ""


@dataclass
class Jobs:
    """OUT/slurm/jobs.json."""

    root: str
    submissions: str
    python: str
    batch: BatchArgs
    slurm: SlurmOptions
    rounds: list[Round] = field(default_factory=list)
    version: int = 1
    roster: str = ""  # the roster CSV's copy in OUT/slurm/ ("": none)
    course: str = ""  # the course file's copy in OUT/slurm/ ("": none)

    @staticmethod
    def path(out: Path) -> Path:
        return out / "slurm" / "jobs.json"

    def save(self, out: Path) -> None:
        path = self.path(out)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2) + "\n")
        tmp.replace(path)

    @classmethod
    def load(cls, out: Path) -> Jobs:
        try:
            data = json.loads(cls.path(out).read_text())
            return cls(data["root"], data["submissions"], data["python"], BatchArgs(**data["batch"]),
                       SlurmOptions(**data["slurm"]), [Round(**r) for r in data.get("rounds", [])],
                       data.get("version", 1), data.get("roster", ""), data.get("course", ""))
        except FileNotFoundError:
            raise GraderError(f"{cls.path(out)}: no such file (was OUT made by `grader slurm submit`?)",
                              Exit.USAGE) from None
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise GraderError(f"{cls.path(out)}: unreadable ({err})", Exit.USAGE) from None


# --- the shard list -----------------------------------------------------------------------------------


def read_shards(out: Path) -> dict[int, list[str]]:
    """task id -> its students, from OUT/slurm/shards.tsv."""
    tasks: dict[int, list[str]] = {}
    try:
        text = (out / "slurm" / "shards.tsv").read_text(encoding="utf-8")
    except FileNotFoundError:
        return tasks
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        task, _, student = line.partition("\t")
        tasks.setdefault(int(task), []).append(student)
    return tasks


def append_shards(out: Path, base: int, shard_list: list[list[str]]) -> None:
    path = out / "slurm" / "shards.tsv"
    new = not path.exists()
    with open(path, "a", encoding="utf-8") as f:
        if new:
            f.write("# task\tstudent  (written by grader slurm submit/resubmit)\n")
        for i, shard in enumerate(shard_list):
            f.writelines(f"{base + i}\t{s}\n" for s in shard)


# --- submitting ---------------------------------------------------------------------------------------


def _plan(jobs: Jobs, out: Path, round_: int, base: int, shard_list: list[list[str]]) -> ScriptPlan:
    root = Path(jobs.root)
    try:
        labs = select(discover(root), jobs.batch.labs)
    except LabError as err:
        raise GraderError(str(err), Exit.USAGE) from None
    size = max(len(s) for s in shard_list)
    return ScriptPlan(root, out, jobs.python, round_, base, len(shard_list), sum(map(len, shard_list)),
                      limits(labs, size, jobs.batch, jobs.slurm), jobs.batch, jobs.slurm,
                      binds=[root, out, Path(jobs.submissions)], roster=Path(jobs.roster) if jobs.roster else None,
                      course=Path(jobs.course) if jobs.course else None)


def _sbatch(cmd: list[str], runner: Runner) -> str:
    try:
        done = runner(cmd)
    except FileNotFoundError:
        raise GraderError("sbatch: not found (is this a Slurm login node?); --dry-run prints the scripts",
                          Exit.ENVIRONMENT) from None
    if done.returncode != 0:
        raise GraderError(f"{' '.join(cmd)}: {(done.stderr or done.stdout).strip()}", Exit.ENVIRONMENT)
    return done.stdout.strip().split(";")[0]  # --parsable: "jobid[;cluster]"


def submit_round(jobs: Jobs, out: Path, students: list[str], *, dry_run: bool, runner: Runner,
                 stdout: TextIO) -> Round:
    """Shard students into a new round's array, write its scripts and submit them (or print them)."""
    round_ = len(jobs.rounds)
    shards_now = read_shards(out)
    base = max(shards_now, default=-1) + 1
    shard_list = make_shards(students, jobs.slurm.shard_size)
    plan = _plan(jobs, out, round_, base, shard_list)
    scripts = {plan.array_script: array_script(plan), plan.merge_script: merge_script(plan)}
    if dry_run:
        for path, text in scripts.items():
            stdout.write(f"# ---- {path}\n{text}")
        stdout.write("# ---- shards (task id: students)\n")
        for i, shard in enumerate(shard_list):
            stdout.write(f"# {base + i}: {' '.join(shard)}\n")
        stdout.write("# ---- would run\n" + "\n".join(" ".join(c) for c in sbatch_commands(plan)) + "\n")
        return Round(round_, base, len(shard_list))
    (out / "slurm" / "logs").mkdir(parents=True, exist_ok=True)
    for i in range(len(shard_list)):
        (out / "tasks" / str(base + i)).mkdir(parents=True, exist_ok=True)
    for path, text in scripts.items():
        path.write_text(text)
        path.chmod(0o755)
    append_shards(out, base, shard_list)
    array_job = _sbatch(sbatch_commands(plan)[0], runner)
    merge_job = _sbatch(sbatch_commands(plan, array_job)[1], runner)  # the merge waits for that array
    done = Round(round_, base, len(shard_list), array_job, merge_job, now_iso())
    jobs.rounds.append(done)
    jobs.save(out)
    stdout.write(f"round {round_}: array job {array_job} ({len(shard_list)} task(s), ids {base}-"
                 f"{base + len(shard_list) - 1}, {plan.limits.time} and {plan.limits.mem_mib} MiB each), "
                 f"merge job {merge_job} after it\n")
    return done


def cmd_slurm_submit(root: Path, submissions: Path, out: Path, batch: BatchArgs, slurm: SlurmOptions, *,
                     dry_run: bool = False, python: str | None = None, runner: Runner = run_command,
                     stdout: TextIO | None = None, roster: Path | None = None, course: Path | None = None) -> Exit:
    """Submit round 0; roster and course (grader/course/slurm/course.py): the class, matched here, and its late policy."""
    stdout = stdout or sys.stdout
    submissions, out, root = submissions.resolve(), out.resolve(), root.resolve()
    if slurm.shard_size < 1 or (slurm.max_parallel is not None and slurm.max_parallel < 1):
        raise GraderError("--shard-size and --max-parallel must be at least 1", Exit.USAGE)
    if out == submissions:
        raise GraderError("--out must not be the folder of submissions", Exit.USAGE)
    if not dry_run and Jobs.path(out).exists():
        raise GraderError(f"{out} holds an earlier submission ({Jobs.path(out)}): use `grader slurm resubmit "
                          f"{out}`, or another --out", Exit.USAGE)
    klass = SlurmClass.match(root, submissions, out, roster, course, batch.compile_only)
    py = python or ("python3" if slurm.container else sys.executable)
    roster_copy, course_copy = SlurmClass.copies(out / "slurm", roster, course)
    jobs = Jobs(str(root), str(submissions), py, batch, slurm, roster=str(roster_copy or ""),
                course=str(course_copy or ""))
    stdout.write(klass.lines())
    if not dry_run:
        klass.write(out / "slurm")
    submit_round(jobs, out, klass.ids, dry_run=dry_run, runner=runner, stdout=stdout)
    if not dry_run:
        stdout.write(f"progress: grader slurm status {out}\n")
    return Exit.OK


# --- what an array task runs --------------------------------------------------------------------------


def cmd_slurm_task(out: Path, task: int, work_dir: Path | None = None, stdout: TextIO | None = None,
                   roster: Path | None = None, course: Path | None = None) -> Exit:
    """Grade task's shard with `grader batch` into OUT/tasks/<task>/: with the roster and course file its
    script names (else those of jobs.json: OUT/slurm/'s copies)."""
    from grader.course.batch.runner import run_batch

    out = out.resolve()
    jobs = Jobs.load(out)
    shard = read_shards(out).get(task)
    if not shard:
        raise GraderError(f"task {task}: not in {out}/slurm/shards.tsv", Exit.USAGE)
    dest = out / "tasks" / str(task)
    dest.mkdir(parents=True, exist_ok=True)
    info = {"task": task, "students": shard, "job": os.environ.get("SLURM_JOB_ID", ""),
            "array": f"{os.environ.get('SLURM_ARRAY_JOB_ID', '')}_{os.environ.get('SLURM_ARRAY_TASK_ID', '')}",
            "node": os.uname().nodename, "started": now_iso()}
    (dest / ".task.json").write_text(json.dumps(info, indent=2) + "\n")
    b = jobs.batch
    return run_batch(Path(jobs.root), Path(jobs.submissions), dest, b.labs, force=b.force, jobs=b.jobs,
                     preset=b.preset, timeout_s=b.timeout_s, max_seconds=b.max_seconds,
                     sanitizer_tools=b.sanitizer_tools, sandbox=b.sandbox, compile_only=b.compile_only,
                     stdout=stdout, work_dir=work_dir, only=set(shard),
                     roster=roster or (Path(jobs.roster) if jobs.roster else None),
                     course=course or (Path(jobs.course) if jobs.course else None))


# --- status -------------------------------------------------------------------------------------------


def parse_squeue(text: str) -> dict[str, str]:
    """`squeue -h -r -o %i|%T` -> {"123_4": "RUNNING", "124": "PENDING"}."""
    states: dict[str, str] = {}
    for line in text.splitlines():
        job, _, state = line.strip().partition("|")
        if job and state:
            states[job] = state.strip()
    return states


def parse_sacct(text: str) -> dict[str, str]:
    """`sacct -n -P -X -o JobID,State` -> {"123_4": "CANCELLED", ...}; "CANCELLED by 0" -> "CANCELLED".
    A pending array's compressed line ("123_[5-9%2]") is left out: squeue lists those."""
    states: dict[str, str] = {}
    for line in text.splitlines():
        job, _, state = line.strip().partition("|")
        if job and state and "[" not in job:
            states[job] = state.split()[0]
    return states


def job_states(job_ids: list[str], runner: Runner) -> dict[str, str]:
    """What Slurm says of these jobs and their array tasks: squeue for the live ones, sacct (where
    accounting is on) for the rest."""
    if not job_ids:
        return {}
    states: dict[str, str] = {}
    ids = ",".join(job_ids)
    for cmd, parse in ((["sacct", "-n", "-P", "-X", "-j", ids, "-o", "JobID,State"], parse_sacct),
                       (["squeue", "-h", "-r", "-t", "all", "-j", ids, "-o", "%i|%T"], parse_squeue)):
        try:
            done = runner(cmd)
        except FileNotFoundError:
            continue
        if done.returncode == 0:
            states.update(parse(done.stdout))  # squeue last: it is the fresher word on live jobs
    return states


@dataclass
class StudentState:
    student: str
    task: int | None  # the task of their latest round
    state: str  # graded, broken, missing
    detail: str = ""


def student_states(out: Path, roster: list[str], shard_map: dict[int, list[str]]) -> list[StudentState]:
    """Every roster student: graded (a finished grade in some task), broken (a task left their folder
    but no finished grade: the reason) or missing (no task folder holds anything of theirs)."""
    found: dict[str, list] = {}
    tasks_dir = out / "tasks"
    if tasks_dir.is_dir():
        for task_dir in sorted(p for p in tasks_dir.iterdir() if p.is_dir()):
            for a in scan(task_dir):
                found.setdefault(a.student, []).append(a)
    latest = {s: t for t, students in sorted(shard_map.items()) for s in students}
    result = []
    for sid in roster:
        if sid not in found:
            result.append(StudentState(sid, latest.get(sid), "missing"))
            continue
        a = best(found[sid])
        result.append(StudentState(sid, latest.get(sid), "graded" if a.finished else "broken", a.error))
    return result


def read_roster_of(out: Path) -> list[str]:
    from grader.course.batch.merge import read_roster

    return read_roster(out / "slurm" / "roster.txt")


def cmd_slurm_status(out: Path, runner: Runner = run_command, stdout: TextIO | None = None) -> Exit:
    stdout = stdout or sys.stdout
    out = out.resolve()
    jobs = Jobs.load(out)
    shard_map = read_shards(out)
    states = job_states([j for r in jobs.rounds for j in (r.array_job, r.merge_job) if j], runner)
    for r in jobs.rounds:
        merge = states.get(r.merge_job, "done or unknown (not in squeue; sacct has no record)")
        stdout.write(f"round {r.round} ({r.submitted}): array job {r.array_job}, merge job {r.merge_job}: {merge}\n")
        for i in range(r.tasks):
            task = r.base + i
            state = states.get(f"{r.array_job}_{i}") or states.get(r.array_job) or "ended (not in squeue)"
            stdout.write(f"  task {task} ({r.array_job}_{i}) {state}: {' '.join(shard_map.get(task, []))}\n")
    people = student_states(out, read_roster_of(out), shard_map)
    count = {k: [p for p in people if p.state == k] for k in ("graded", "broken", "missing")}
    stdout.write(f"students: {len(people)}: {len(count['graded'])} graded, {len(count['broken'])} broken, "
                 f"{len(count['missing'])} missing\n")
    for p in count["broken"] + count["missing"]:
        stdout.write(f"  {p.state}: {p.student} (task {p.task})" + (f": {p.detail}" if p.detail else "") + "\n")
    if count["broken"] or count["missing"]:
        stdout.write(f"regrade them: grader slurm resubmit {out}\n")
    stdout.write(status_lines(out / "slurm", jobs.roster))
    return Exit.OK


# --- resubmit -----------------------------------------------------------------------------------------


def to_resubmit(out: Path, roster: list[str], shard_map: dict[int, list[str]]) -> list[str]:
    """The students without a finished grade: broken or missing, in roster order."""
    return [p.student for p in student_states(out, roster, shard_map) if p.state != "graded"]


def cmd_slurm_resubmit(out: Path, *, dry_run: bool = False, force: bool = False, max_parallel: int | None = None,
                       shard_size: int | None = None, runner: Runner = run_command,
                       stdout: TextIO | None = None) -> Exit:
    stdout = stdout or sys.stdout
    out = out.resolve()
    jobs = Jobs.load(out)
    if not force:
        live = [j for j, s in job_states([r.array_job for r in jobs.rounds if r.array_job], runner).items()
                if s in ACTIVE]
        if live:
            raise GraderError(f"jobs still pending or running: {', '.join(sorted(live))}; wait for them (grader "
                              f"slurm status {out}) or pass --force", Exit.USAGE)
    students = to_resubmit(out, read_roster_of(out), read_shards(out))
    if not students:
        stdout.write("every student has a finished grade: nothing to resubmit\n")
        return Exit.OK
    if max_parallel is not None:
        jobs.slurm.max_parallel = max_parallel
    if shard_size is not None:
        jobs.slurm.shard_size = shard_size
    stdout.write(f"resubmitting {len(students)} student(s): {' '.join(students)}\n")
    submit_round(jobs, out, students, dry_run=dry_run, runner=runner, stdout=stdout)
    return Exit.OK


def dispatch_slurm(root: Path, args: argparse.Namespace) -> Exit:
    """The `slurm` verbs of cli.py, argument by argument."""
    if args.slurm_verb == "submit":
        batch = BatchArgs(list(args.labs), args.preset, args.jobs, args.compile_only, args.force, args.timeout_s,
                          args.max_seconds, args.sanitizer_tools, args.sandbox)
        options = SlurmOptions(args.partition, args.gpus_per_task, args.max_parallel, args.container,
                               args.shard_size, args.time_min, args.mem_mib, list(args.sbatch_arg))
        return cmd_slurm_submit(root, args.submissions, args.out, batch, options, dry_run=args.dry_run,
                                roster=args.roster, course=args.course)
    if args.slurm_verb == "status":
        return cmd_slurm_status(args.out)
    if args.slurm_verb == "resubmit":
        return cmd_slurm_resubmit(args.out, dry_run=args.dry_run, force=args.force, max_parallel=args.max_parallel,
                                  shard_size=args.shard_size)
    return cmd_slurm_task(args.out, args.task, work_dir=args.work_dir, roster=args.roster, course=args.course)


__all__ = [
    "Jobs",
    "dispatch_slurm",
    "Round",
    "StudentState",
    "cmd_slurm_resubmit",
    "cmd_slurm_status",
    "cmd_slurm_submit",
    "cmd_slurm_task",
    "job_states",
    "parse_sacct",
    "parse_squeue",
    "read_shards",
    "student_states",
    "submit_round",
    "to_resubmit",
]
