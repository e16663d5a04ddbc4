"""`grader mutants`: the mutation gate's verb (grader/authoring/mutation.py does the work)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Callable, TextIO

from grader.cli.commands import load_labs
from grader.host.environment import probe_gpu
from grader.model.errors import Exit, GraderError


def cmd_mutants(
    root: Path,
    selectors: list[str],
    *,
    check: bool = False,
    out: Path | None = None,
    jobs: int | None = None,
    preset: str | None = None,
    timeout_s: float | None = None,
    quiet: bool = False,
    gpu_runs: int = 3,
    gpus: str | None = None,
    diagnose: bool = False,
    stdout: TextIO | None = None,
    batch: Callable[..., Exit] | None = None,
) -> Exit:
    """The mutation gate (grader/authoring/mutation.py). --check: every mutant well formed and applying (exit 1
    otherwise). Else grade them as batches: exit 0 when every lab caught >= 95 % of its bugs and kept
    every correct alternative at full correctness points, 1 otherwise, 4 without a GPU. gpus: as batch
    --gpus, every GPU running gpu_runs test binaries at a time; build slots default to two more than
    the runs at a time (enough to keep the runs fed: a slot compiles a mutant's lab file and links the
    pristine build's test objects)."""
    from grader.authoring import mutation

    stdout = stdout or sys.stdout
    labs = [lab for lab in load_labs(root, selectors) if lab.solution_dir.is_dir()]
    if not labs:
        raise GraderError("no lab with a reference solution here (mutants live in solutions/NN-slug/mutants/)",
                          Exit.USAGE)
    if check:
        checks = [mutation.check_lab(lab) for lab in labs]
        stdout.write(mutation.format_checks(checks) + "\n")
        return Exit.OK if all(not c.problems for c in checks) else Exit.TEST_FAILURES
    for lab in labs:  # a broken patch is an authoring error: say so before any GPU time is spent
        problems = mutation.check_lab(lab, minimum=False).problems
        if problems:
            raise GraderError("\n".join(problems), Exit.USAGE)
    if batch is None:
        gpu = probe_gpu()
        if not gpu.available:
            raise GraderError(f"grading mutants needs a GPU ({gpu.brief()}); `grader mutants --check` works "
                              "without one", Exit.ENVIRONMENT)
        from grader.course.batch.runner import run_batch

        batch = run_batch
    out = Path(out) if out is not None else root / "build" / "mutants"
    out.mkdir(parents=True, exist_ok=True)
    # Correctness only: perf is not judged here, and a mutant's perf tests would only cost GPU time.
    # Several correctness runs share the GPU at a time, and a mutant that failed a test is caught already:
    # its run stops at that failure, nothing is re-run alone, and the sanitizer runs only where every
    # test passed. A correct alternative and the reference pass, so they run everything. With diagnose,
    # every mutant is graded as a student's grade runs (every test, the sanitizers after a failure): its
    # report then shows first what a student's would (bench/diagnosis_table.py reads it).
    devices = None
    if gpus is not None:
        from grader.course.batch.gpus import parse_gpus

        devices = parse_gpus(gpus)
    # No similarity report: every mutant is a copy of the reference by design.
    options = dict(force=True, preset=preset, timeout_s=timeout_s, quiet=quiet, perf=False,
                   gpu_runs=gpu_runs, sanitize_failing=diagnose, stop_at_first_failure=not diagnose, similarity=False)
    cores = os.cpu_count() or 1
    if devices is not None and len(devices) > 1 and len(labs) > 1:
        # One lane per GPU, labs spread over them: a lab's batch ends with its slowest runs (the
        # reference under racecheck, a hang's timeout), which one lab at a time would wait out on
        # every GPU. Each lane has its own work folder (a pristine build and slots of its own).
        per_lane = max(1, (jobs or min(cores, gpu_runs * len(devices) + 2 * len(devices))) // len(devices))
        lanes = [dict(gpus=[d], jobs=per_lane, work_dir=out / "lanes" / f"gpu{d.index}") for d in devices]
    else:
        lanes = [dict(jobs=jobs or min(cores, gpu_runs * len(devices or [None]) + 2))]
        if devices is not None:
            lanes[0]["gpus"] = devices
    runs = mutation.run_mutants(root, labs, out, stdout=stdout, batch=batch, lanes=lanes, **options)
    text = mutation.format_runs(runs)
    (out / "mutation.txt").write_text(text + "\n")
    mutation.write_json(runs, out / "mutation.json")
    stdout.write("\n" + text + "\n")
    return Exit.OK if runs and all(r.ok for r in runs) else Exit.TEST_FAILURES
