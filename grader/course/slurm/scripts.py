"""The sbatch scripts of `grader slurm submit` (grader/course/slurm/jobs.py): the job array that grades the shards, the
merge job, their limits and the sbatch command lines. Pure: nothing here runs or writes anything.

One array task grades one shard of students (`--shard-size`, default 1) with `grader slurm task`, which
runs `grader batch` on exactly that shard into OUT/tasks/<task id>/ and builds in a folder of its own
(node-local, removed at the end), so tasks never share a build folder or its lock. The merge job runs
after the array whatever became of its tasks (`--dependency=afterany:<array job>`) and writes the class
summary and gradebook with `grader batch merge` (grader/course/batch/merge.py).

Limits come from the labs: a task may take SETUP_S plus SETUP_PER_LAB_S per lab (the pristine build
and the slot's first build of the test objects) and, per student, each lab's compile limit and, unless
it is a compile check, each lab's timeout_s for every test binary run (public, hidden, the sanitizer
where the lab has one), all times MARGIN, in whole minutes; its memory is the largest
max_host_memory_mib of the labs (one test run at a time) plus BUILD_MEMORY_MIB per build slot, or, for
a compile check, the build slots alone.
"""

from __future__ import annotations

import math
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from grader.build.stages import COMPILE_TIMEOUT_S
from grader.model.labs import Lab

SETUP_S = 600.0
SETUP_PER_LAB_S = 240.0
MARGIN = 1.25
DEFAULT_HOST_MEMORY_MIB = 32768.0  # a run's limit when lab.toml names none (grader/execute/policy.py's default)
BUILD_MEMORY_MIB = 2048  # one build slot: nvcc, cicc, ptxas and the linker of one student's file
GRADER_MEMORY_MIB = 1024  # the grader itself
MERGE_TIME_MIN = 30
MERGE_MEMORY_MIB = 2048
ARRAY_SCRIPT = "round-{round}-array.sbatch"
MERGE_SCRIPT = "round-{round}-merge.sbatch"


@dataclass
class BatchArgs:
    """What every task passes on to `grader batch` (grader/course/batch/runner.py's run_batch)."""

    labs: list[str] = field(default_factory=list)
    preset: str | None = None
    jobs: int = 1  # build slots, and the CPUs each task asks for
    compile_only: bool = False
    force: bool = False
    timeout_s: float | None = None
    max_seconds: float | None = None
    sanitizer_tools: list[str] | None = None
    sandbox: bool = True


@dataclass
class SlurmOptions:
    partition: str | None = None
    gpus_per_task: int = 1
    max_parallel: int | None = None  # the array's %K throttle
    container: str | None = None  # an Apptainer image: each task runs in it (apptainer exec --nv)
    shard_size: int = 1
    time_min: int | None = None  # overrides the limit derived from the labs
    mem_mib: int | None = None
    sbatch_args: list[str] = field(default_factory=list)  # more #SBATCH lines (--account=..., --qos=...)


@dataclass
class Limits:
    time_min: int
    mem_mib: int

    @property
    def time(self) -> str:
        """sbatch's D-HH:MM:SS (HH:MM:SS under a day)."""
        d, rest = divmod(self.time_min, 24 * 60)
        h, m = divmod(rest, 60)
        return f"{d}-{h:02d}:{m:02d}:00" if d else f"{h:02d}:{m:02d}:00"


def runs_per_lab(lab: Lab) -> int:
    """Test binary runs of one student's grade of this lab: the public and hidden binaries, and the
    sanitizer's run where the lab has one."""
    return 2 + (1 if lab.sanitizer.get("tools") else 0)


def limits(labs: list[Lab], shard_size: int, batch: BatchArgs, slurm: SlurmOptions) -> Limits:
    """The time and memory a task of shard_size students may take (see the module docstring)."""
    per_student = 0.0
    for lab in labs:
        per_student += COMPILE_TIMEOUT_S
        if not batch.compile_only:
            per_student += (batch.timeout_s or lab.timeout_s) * runs_per_lab(lab)
    if batch.max_seconds:
        per_student = min(per_student, batch.max_seconds)
    seconds = (SETUP_S + SETUP_PER_LAB_S * len(labs) + shard_size * per_student) * MARGIN
    time_min = slurm.time_min or max(1, math.ceil(seconds / 60))
    slots = BUILD_MEMORY_MIB * max(1, batch.jobs) + GRADER_MEMORY_MIB
    if batch.compile_only:
        mem = slots
    else:
        mem = slots + max((lab.host_memory_mib or DEFAULT_HOST_MEMORY_MIB) for lab in labs) if labs else slots
    return Limits(time_min, slurm.mem_mib or math.ceil(mem))


def shards(students: list[str], size: int) -> list[list[str]]:
    """Consecutive shards of at most size students (roster order)."""
    if size < 1:
        raise ValueError("the shard size must be at least 1")
    return [students[i : i + size] for i in range(0, len(students), size)]


def array_range(tasks: int, max_parallel: int | None) -> str:
    """sbatch's --array: 0-N (one task: 0), with the %K throttle."""
    spec = "0" if tasks == 1 else f"0-{tasks - 1}"
    return spec + (f"%{max_parallel}" if max_parallel else "")


@dataclass
class ScriptPlan:
    """Everything one round's scripts say."""

    root: Path  # the lab tree (on the shared filesystem)
    out: Path
    python: str  # the interpreter that runs the grader (in the container: python3)
    round: int
    base: int  # task id of array index 0
    tasks: int
    students: int
    limits: Limits
    batch: BatchArgs
    slurm: SlurmOptions
    binds: list[Path] = field(default_factory=list)  # what the container must see: root, OUT, submissions
    roster: Path | None = None  # the roster CSV's copy in OUT/slurm/ (grader/course/slurm/course.py), or None
    course: Path | None = None  # the course file's copy in OUT/slurm/, or None

    @property
    def slurm_dir(self) -> Path:
        return self.out / "slurm"

    @property
    def array_script(self) -> Path:
        return self.slurm_dir / ARRAY_SCRIPT.format(round=self.round)

    @property
    def merge_script(self) -> Path:
        return self.slurm_dir / MERGE_SCRIPT.format(round=self.round)

    def class_args(self) -> str:
        """A task's --roster and --course: the copies, so an edit of the originals changes no job."""
        return "".join(f" --{name} {_q(path)}" for name, path in (("roster", self.roster), ("course", self.course))
                       if path is not None)

    def merge_roster_args(self) -> str:
        """The merge's roster: the ids that were sharded (a student without a finished grade is broken), or
        with a roster CSV the CSV (a student no submission matched is missing, one of roster.txt whose
        task died broken) and the submissions it matched to nobody."""
        ids = _q(self.slurm_dir / "roster.txt")
        if self.roster is None:
            return f" --roster {ids}"
        return f" --roster {_q(self.roster)} --expect {ids} --unmatched {_q(self.slurm_dir / 'unmatched.tsv')}"


def _q(x: object) -> str:
    return shlex.quote(str(x))


def _wrap(plan: ScriptPlan, work: str = "", gpu: bool = True) -> str:
    """The command prefix that runs the grader: the container's `apptainer exec --nv`, or nothing."""
    if not plan.slurm.container:
        return ""
    binds = ",".join(dict.fromkeys(str(b) for b in plan.binds))
    extra = f',"{work}"' if work else ""
    nv = "--nv " if gpu and plan.slurm.gpus_per_task > 0 and not plan.batch.compile_only else ""
    return (f"apptainer exec {nv}--bind {_q(binds)}{extra} --pwd {_q(plan.root)} "
            f"{_q(plan.slurm.container)} ")


def _header(plan: ScriptPlan, name: str, output: str, time: str, mem: int, cpus: int, gpus: int) -> list[str]:
    lines = [
        "#!/bin/bash",
        f"#SBATCH --job-name={name}",
        "#SBATCH --ntasks=1",
        f"#SBATCH --cpus-per-task={cpus}",
        f"#SBATCH --mem={mem}M",
        f"#SBATCH --time={time}",
        f"#SBATCH --output={output}",
        f"#SBATCH --chdir={plan.root}",
    ]
    if plan.slurm.partition:
        lines.append(f"#SBATCH --partition={plan.slurm.partition}")
    if gpus > 0:
        lines.append(f"#SBATCH --gpus-per-task={gpus}")
    lines += [f"#SBATCH {arg}" for arg in plan.slurm.sbatch_args]
    return lines


def array_script(plan: ScriptPlan) -> str:
    """The job array: task i grades the shard of task id base+i (OUT/slurm/shards.tsv)."""
    gpus = 0 if plan.batch.compile_only else plan.slurm.gpus_per_task
    lines = [
        *_header(plan, "cudalab-grade", f"{plan.slurm_dir}/logs/task-%A_%a.out", plan.limits.time,
                 plan.limits.mem_mib, max(1, plan.batch.jobs), gpus),
        f"#SBATCH --array={array_range(plan.tasks, plan.slurm.max_parallel)}",
        f"# cudalab grading, round {plan.round}: {plan.students} student(s) in {plan.tasks} task(s) "
        f"(task ids {plan.base}-{plan.base + plan.tasks - 1}); written by `grader slurm submit`.",
        "# Each task grades its shard (OUT/slurm/shards.tsv) with `grader batch` into OUT/tasks/<task id>/,",
        "# building in a node-local folder of its own that is removed when it ends.",
        "set -u",
        f"TASK=$(( {plan.base} + SLURM_ARRAY_TASK_ID ))",
        'WORK="${CUDALAB_WORK_DIR:-${TMPDIR:-/tmp}}/cudalab-${SLURM_JOB_ID}"',
        'mkdir -p "$WORK"',
        "trap 'rm -rf \"$WORK\"' EXIT",
        f'echo "cudalab task $TASK (job ${{SLURM_ARRAY_JOB_ID}}_${{SLURM_ARRAY_TASK_ID}}) on $(hostname), '
        f'building in $WORK"',
        f'{_wrap(plan, "$WORK")}{_q(plan.python)} -m grader --root {_q(plan.root)} slurm task {_q(plan.out)} '
        f'--task "$TASK" --work-dir "$WORK"{plan.class_args()}',
        "rc=$?",
        'echo "cudalab task $TASK: grader exit $rc"',
        "exit $rc",
    ]
    return "\n".join(lines) + "\n"


def merge_script(plan: ScriptPlan) -> str:
    """The merge job: the class summary and gradebook of every task of every round."""
    lines = [
        *_header(plan, "cudalab-merge", f"{plan.slurm_dir}/logs/merge-%j.out", f"00:{MERGE_TIME_MIN:02d}:00",
                 MERGE_MEMORY_MIB, 1, 0),
        f"# cudalab grading, round {plan.round}: after the array (afterany), merge every task's results into",
        "# OUT/class-summary.html and OUT/gradebook.csv; a student with no finished grade gets a broken row"
        + (", a roster student with no submission a missing one." if plan.roster is not None else "."),
        "set -u",
        f"{_wrap(plan, gpu=False)}{_q(plan.python)} -m grader --root {_q(plan.root)} batch merge "
        f"{_q(plan.out)}/tasks/*/ --out {_q(plan.out)}{plan.merge_roster_args()}",
        "rc=$?",
        "# 1: the reports were written and some rows are broken (a task died): the merge itself succeeded",
        f'if [ "$rc" -eq 1 ]; then echo "some students have no grade: grader slurm resubmit {plan.out}"; rc=0; fi',
        "exit $rc",
    ]
    return "\n".join(lines) + "\n"


def sbatch_commands(plan: ScriptPlan, array_job: str = "<array job id>") -> list[list[str]]:
    """The two sbatch command lines: the array, then the merge that waits for it."""
    return [
        ["sbatch", "--parsable", str(plan.array_script)],
        ["sbatch", "--parsable", f"--dependency=afterany:{array_job}", str(plan.merge_script)],
    ]


__all__ = [
    "BatchArgs",
    "Limits",
    "ScriptPlan",
    "SlurmOptions",
    "array_range",
    "array_script",
    "limits",
    "merge_script",
    "sbatch_commands",
    "shards",
]
