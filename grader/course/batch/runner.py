"""Grade a whole class: `python3 -m grader batch DIR --out OUT [LAB...]`.

DIR holds one submission per student: a folder (a student's repository, or the student files alone)
or an archive (.zip, .tar.gz, ...); the student's id is the name without the archive suffix
(grader/course/batch/students.py). OUT gets each student's reports in OUT/<student>/ (grader/report:
results.json, report.html, ...), the class summary OUT/class-summary.html and the gradebook
OUT/gradebook.csv (grader/report/batch.py). The pristine build, the build slots and the GPU lock are
grader/course/batch/slots.py; the reference's timings, measured once, grader/course/batch/reference.py.

Resumable: OUT/<student>/.batch.json records what was graded (a fingerprint of the staged student files
and the lab selection, and whether it was a compile check); it is removed when a student's grade starts
and written last, once their reports are, so only a finished grade is kept by the next batch (with the
same files, the same kind of batch, and a GPU unless the earlier grade had one). An interrupted batch
(Ctrl-C, SIGTERM from a scheduler's time limit) records nothing of the students whose grade was under
way: their build or run was killed, which is no verdict, and the next batch grades them again.

A broken submission (an unreadable or unsafe archive, a build directory that does not configure, an
internal error) gets an outcome with the error and a gradebook row; the batch goes on.

Without a GPU the tests that make a grade cannot run: every row is "not graded (no GPU)" with empty
scores and the batch exits 4. compile_only (--compile-only) asks for that on purpose: the files are
built and checked, no test runs (even with a GPU), the rows say what compiled and what the static
checks refused, and the batch exits 0 when everything compiled, 3 otherwise. Otherwise a batch that
ran to the end exits 0, whatever the scores.
"""

from __future__ import annotations

import os
import queue
import sys
import time
from collections.abc import Collection, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import TextIO

from grader.course.batch.gpus import GpuLister, parse_gpus
from grader.course.batch.reference import REFERENCE_FILE, ReferenceTimings
from grader.course.batch.slots import BatchGrader, Interrupted, SlotBuilderFactory
from grader.course.batch.summary import Tally as _Tally
from grader.course.batch.summary import _verdict, batch_exit, format_eta
from grader.course.batch.summary import summary as _summary
from grader.course.batch.worker import _grade_one, _interrupts, _log
from grader.course.batch.course import ClassSetup
from grader.course.batch.students import (
    CLASS_FILES,
    LOG_FILE,
    STATE_FILE,
    Student,
    clear_reports,
    fingerprint,
    find_students,
    load_prior,
    still_stands,
)
from grader.build.cmake import Builder
from grader.host.environment import GpuDevice, GpuProbe, choose_preset, now_iso, probe_gpu
from grader.model.errors import Exit, GraderError
from grader.model.labs import LabError, discover, select
from grader.model.progress import Progress
from grader.intake.staging import StagingError


DEFAULT_WORKERS = 4  # enough build slots to keep one GPU busy; each slot compiles the test objects once


def run_batch(
    root: Path,
    batch_dir: Path,
    out_dir: Path,
    selectors: list[str],
    *,
    force: bool = False,
    jobs: int | None = None,
    preset: str | None = None,
    timeout_s: float | None = None,
    max_seconds: float | None = None,
    sanitizer_tools: list[str] | None = None,
    sandbox: bool = True,
    quiet: bool = False,
    confine: bool = True,
    host_memory_mib: float | None = None,
    compile_only: bool = False,
    perf: bool = True,
    gpu_runs: int = 1,
    sanitize_failing: bool = True,
    stop_at_first_failure: bool = False,
    stdout: TextIO | None = None,
    progress: Progress | None = None,
    gpu: GpuProbe | None = None,
    main_builder: Builder | None = None,
    slot_builder: SlotBuilderFactory | None = None,
    work_dir: Path | None = None,
    only: Collection[str] | None = None,
    gpus: str | Sequence[GpuDevice] | None = None,
    gpu_lister: GpuLister | None = None,
    roster: Path | None = None,
    course: Path | None = None,
    similarity: bool = True,
    similarity_threshold: float | None = None,
) -> Exit:
    """Grade every submission of batch_dir into out_dir (see the module docstring). work_dir: where the
    pristine build, the slots and their lock live (default root/build); only: grade just these student
    ids (a Slurm task's shard, grader/course/slurm/jobs.py). gpus: --gpus ('all', '0,2,3' or the devices; None: the
    one GPU the runtime picks), enumerated by gpu_lister (default: nvidia-smi; grader/course/batch/gpus.py).
    roster: a roster CSV (grader/course/roster.py: who is in the class, which submission is whose; missing and
    unmatched submissions); course: a course file (grader/course/policy.py: due dates and the late policy).
    similarity: after a batch that ran to the end, OUT/similarity.html (grader/course/similarity.py; informs only)."""
    from grader.report import StudentOutcome, write_batch_reports
    from grader.report.standing import COMPILED, GRADED

    stdout = stdout or sys.stdout
    progress = progress or Progress(quiet=quiet)
    batch_dir, out_dir = Path(batch_dir), Path(out_dir)
    try:
        labs = select(discover(root), selectors)
    except LabError as err:
        raise GraderError(str(err), Exit.USAGE) from None
    except FileNotFoundError:
        raise GraderError(f"{root}/labs: no such directory (is --root right?)", Exit.USAGE) from None
    if out_dir.resolve() == batch_dir.resolve():
        raise GraderError("--out must not be the folder of submissions", Exit.USAGE)
    students, ignored = find_students(batch_dir, exclude=out_dir)
    klass = ClassSetup.load(root, roster, course, compile_only, out=out_dir)
    students = klass.match(students, batch_dir)
    if only is not None:
        students = [s for s in students if s.id in only]
        klass.missing, klass.problems = [], []  # a shard of the class (a Slurm task): the merge lists them
    if not students and roster is None:
        raise GraderError(
            f"{batch_dir}: no submissions (one folder or .zip/.tar.gz archive per student)", Exit.USAGE
        )
    if jobs is not None and jobs < 1:
        raise GraderError("-j must be at least 1", Exit.USAGE)
    devices = parse_gpus(gpus, gpu_lister) if not compile_only else None  # a compile check runs no test
    gpu = probe_gpu() if gpu is None else gpu
    preset = choose_preset(gpu, preset)
    cores = os.cpu_count() or 1
    # One GPU keeps DEFAULT_WORKERS slots busy; each more GPU wants slots of its own (a slot is held
    # through its student's runs).
    workers = max(1, min(jobs or max(DEFAULT_WORKERS, 2 * len(devices or ())), cores))
    if work_dir is not None and main_builder is None:  # a pristine build of its own, beside the slots
        from grader.build.submission import SubmissionBuilder

        main_builder = SubmissionBuilder(root, preset, cores, directory=Path(work_dir) / preset)
    grader = BatchGrader(
        root,
        labs,
        gpu,
        preset,
        workers=workers,
        timeout_s=timeout_s,
        max_seconds=max_seconds,
        sanitizer_tools=sanitizer_tools,
        sandbox=sandbox,
        confine=confine,
        host_memory_mib=host_memory_mib,
        main_builder=main_builder,
        slot_builder=slot_builder,
        progress=progress,
        work_dir=Path(work_dir) if work_dir is not None else None,
        compile_only=compile_only,
        perf=perf,
        gpu_runs=gpu_runs,
        sanitize_failing=sanitize_failing,
        stop_at_first_failure=stop_at_first_failure,
        gpus=devices,
    )
    force = force or not perf  # a correctness-only grade never stands in for a full one, nor the reverse
    out_dir.mkdir(parents=True, exist_ok=True)
    lab_names = [lab.name for lab in labs]
    if compile_only:
        progress.note("compile check only (--compile-only): each submission is built and checked; no test runs")
    elif not gpu.available:
        progress.note(f"NOT GRADED: no GPU ({gpu.reason or 'none found'}): the tests that make a grade cannot run "
                      "here; every submission is built and checked, and its row says 'not graded (no GPU)'")
    elif devices:
        progress.note(f"GPUs: {', '.join(d.label for d in devices)} (--gpus): each student's runs on one of them"
                      + (f"; only {workers} build slot(s), so at most {workers} GPU(s) busy at once"
                         if workers < len(devices) else ""))
    else:
        progress.note(gpu.brief())
    if gpus is not None and compile_only:
        progress.note("--gpus is ignored by a compile check: no test runs")
    if ignored:
        progress.note(
            f"ignored (not a folder or an archive): {', '.join(ignored[:10])}"
            + (" ..." if len(ignored) > 10 else "")
        )

    # Who needs grading: a changed (or new) submission, or every one with --force.
    outcomes: dict[str, StudentOutcome] = {}
    todo: list[Student] = []
    kept = broken = 0
    tally = _Tally(total=len(students), to_grade=0)
    for student in students:
        student_dir = out_dir / student.id
        try:
            fp = grader.fingerprint_of(student)
        except StagingError as err:
            clear_reports(student_dir)
            _log(student_dir, f"{now_iso()} {student.path}: error: {err}")
            outcomes[student.id] = StudentOutcome(student.id, None, error=str(err), report_dir=student.id,
                                                  compile_only=compile_only)
            broken += 1
            tally.done += 1
            progress.fail(f"[{tally.done}/{tally.total}] {student.id}: broken: {err}")
            continue
        prior = None if force else load_prior(student_dir)
        if prior is not None and still_stands(*prior, fp, lab_names, compile_only=compile_only, gpu=gpu.available):
            state, results = prior
            klass.refresh(student, results, student_dir)  # the course file may have changed since
            outcomes[student.id] = outcome = StudentOutcome(
                student.id,
                results,
                error=str(state.get("note", "")),
                report_dir=student.id,
                seconds=float(state.get("seconds", 0.0)),
                compile_only=compile_only,
            )
            kept += 1
            tally.done += 1
            progress.ok(f"[{tally.done}/{tally.total}] {student.id}: {_verdict(outcome)}, unchanged since the "
                        "last batch (kept)")
            continue
        todo.append(student)
    tally.to_grade = len(todo)
    progress.note(
        f"batch: {len(students)} student(s): {len(todo)} to grade, {kept} unchanged, {broken} broken; "
        f"labs {', '.join(lab_names)}; {min(workers, max(1, len(todo)))} build slot(s), test runs "
        f"{'one' if grader.gpu_runs == 1 else grader.gpu_runs} at a time"
        + (f" on each of {len(devices)} GPUs" if devices else "")
    )

    paths: dict[str, Path] = {}
    similar = ""  # the similarity report's line
    prepared = 0.0
    started = time.monotonic()
    try:
        with _interrupts(grader.stop):
            if todo:
                grader.lock_slots()
                grader.prepare(out_dir, force=force)
                prepared = time.monotonic() - started
                grader.time_references_ahead()  # on every GPU, while the slots build the first students
                slots = min(workers, len(todo))
                free: queue.Queue[int] = queue.Queue()
                for w in range(slots):
                    free.put(w)
                tally.started = time.monotonic()
                with ThreadPoolExecutor(max_workers=slots, thread_name_prefix="cudalab-batch") as pool:
                    pending: dict[Future, Student] = {
                        pool.submit(_grade_one, grader, s, out_dir, free, klass.late): s for s in todo
                    }
                    try:
                        while pending:
                            done, _ = wait(pending, return_when=FIRST_COMPLETED)
                            for fut in done:
                                student = pending.pop(fut)
                                outcome, graded = fut.result()
                                if outcome is None:  # cut short: the interrupt is on its way here
                                    continue
                                outcomes[student.id] = outcome
                                tally.done += 1
                                tally.graded += 1
                                eta = format_eta(tally.eta()) if tally.graded < tally.to_grade else "00:00"
                                timing = f"build {graded.build_s:.1f} s, run {graded.run_s:.1f} s"
                                if graded.gpu is not None:
                                    timing += f" on GPU {graded.gpu.index}"
                                line = f"[{tally.done}/{tally.total}] {student.id}: "
                                if outcome.results is None:
                                    progress.fail(f"{line}broken: {outcome.error}; ETA {eta}")
                                else:  # "!!" where the row holds no grade or something did not compile
                                    mark = progress.ok if outcome.status in (GRADED, COMPILED) else progress.fail
                                    mark(f"{line}{_verdict(outcome)} ({timing}), ETA {eta}")
                    except KeyboardInterrupt:
                        grader.stop.set()
                        for fut in pending:
                            fut.cancel()
                        for fut in [fut for fut in pending if not fut.cancelled()]:  # they stop at their next step
                            outcome, _ = fut.result()
                            if outcome is not None:  # it had finished: recorded
                                outcomes[pending[fut].id] = outcome
                        raise
    finally:
        grader.unlock_slots()
        ordered = klass.finish([outcomes[s.id] for s in students if s.id in outcomes])
        if ordered:
            title = f"cudalab class summary: {batch_dir.resolve().name}"
            if similarity and only is None and sys.exc_info()[0] is None:  # a whole class that ran to the end
                from grader.course.similarity import for_batch

                similar = for_batch(root, students, labs, out_dir, similarity_threshold) + "\n"
            paths = write_batch_reports(ordered, out_dir, title=title, unmatched=klass.problems)
        if grader.stop.is_set():
            stdout.write(
                f"interrupted: {len(ordered)} of {len(students)} student(s) recorded"
                + (f" in {paths['html']}" if paths else "")
                + (f"; {len(grader.discarded)} grade(s) under way were not kept (a killed build or run is no "
                   f"verdict): {', '.join(grader.discarded)}" if grader.discarded else "")
                + "; run the same command again to continue\n"
            )
    elapsed = time.monotonic() - started
    per = f" (pristine build {prepared:.1f} s), {elapsed / len(todo):.1f} s per submission" if todo else ""
    stdout.write(
        _summary(ordered, len(todo), kept, compile_only, gpu)
        + f"; {format_eta(elapsed)} elapsed{per}\n"
        + klass.lines()
        + similar + f"class summary: {paths['html']}\ngradebook: {paths['csv']}\n"
        + f"LMS gradebooks: {paths['canvas']} (Canvas), {paths['moodle']} (Moodle)\n"
    )
    return batch_exit(ordered, compile_only)


# The `batch` verb (cli.py): run_batch with the test seams (builders, probe) left at their defaults.
cmd_batch = run_batch


__all__ = [
    "CLASS_FILES",
    "LOG_FILE",
    "REFERENCE_FILE",
    "STATE_FILE",
    "BatchGrader",
    "Interrupted",
    "ReferenceTimings",
    "Student",
    "batch_exit",
    "cmd_batch",
    "find_students",
    "fingerprint",
    "format_eta",
    "load_prior",
    "run_batch",
]
