"""The class gradebook (gradebook.csv): one row per student of a batch, wide.

Columns: student, total, max_total, one per lab graded in the batch, one per task as `<lab>:<task id>`,
with a course file (grader/course/policy.py) five per lab (`<lab> raw`, `<lab> penalty`, `<lab> late days`,
`<lab> submitted`, `<lab> time source`; the lab column itself is the final score), with a roster
(grader/course/roster.py) name and email, status, gpu (only for a batch on several GPUs, --gpus: 'GPU 2 (NVIDIA H100)'), notes. What the score columns hold follows the row's status (grader/report/outcomes.py):

  graded                total and max_total, each lab's score, each task's points (speed points
                        included, so a lab's task columns add up to its score)
  not graded (no GPU)   no score at all; notes say why, and what did not build
  compiled / not compiled   (a compile check) each lab column says compiled, compile error, link error
                        or refused; totals and tasks are empty; notes say what failed and why
  broken                no score; notes hold the error
  missing               a roster student with no submission: total and every lab 0, tasks empty

A lab or task the student was not graded on is empty.
"""

from __future__ import annotations

import csv
import io

from grader.report._format import clean_text, first_line, gpu_device, labelled, truncate
from grader.report.gradebook import _cell, _num
from grader.report.outcomes import (
    LabColumn,
    StudentOutcome,
    batch_labs,
    by_name,
    late_labs,
    roster_order,
    with_roster,
)
from grader.report.standing import (
    COMPILED,
    GRADED,
    MISSING,
    NOT_COMPILED,
    NOT_GRADED_NO_GPU,
    STATE_COMPILED,
    compile_state,
)

_NOTE_LIMIT = 600
LATE_COLUMNS = ("raw", "penalty", "late days", "submitted", "time source")  # per lab, with a course file


def gradebook_columns(labs: list[LabColumn], gpu: bool = False, late: bool = False, roster: bool = False) -> list[str]:
    return (
        ["student", "total", "max_total"]
        + [lab.name for lab in labs]
        + [f"{lab.name}:{tid}" for lab in labs for tid, _ in lab.tasks]
        + ([f"{lab.name} {c}" for lab in labs for c in LATE_COLUMNS] if late else [])
        + (["name", "email"] if roster else [])
        + ["status"]
        + (["gpu"] if gpu else [])
        + ["notes"]
    )


def pinned(outcomes: list[StudentOutcome]) -> bool:
    """Whether a row was graded on one GPU of several (batch --gpus): the gradebook then names it."""
    return any(o.results is not None and gpu_device(o.results.run) for o in outcomes)


def _notes(o: StudentOutcome) -> str:
    notes = []
    status = o.status
    if status == NOT_GRADED_NO_GPU and o.results is not None:
        reason = clean_text(o.results.run.gpu_reason) or "no CUDA device"
        notes.append(f"not graded: no GPU ({reason}); grade again on a machine with a GPU")
    if o.error:
        notes.append(
            first_line(clean_text(o.error), _NOTE_LIMIT) if o.results is not None else clean_text(o.error)
        )
    if o.results is not None:
        for lab in o.results.labs:
            if status in (COMPILED, NOT_COMPILED):
                state, why = compile_state(lab)
                if state != STATE_COMPILED:
                    notes.append(f"{lab.name}: {labelled(state, clean_text(why))}")
                continue
            for b in lab.builds:
                if not b.ok:
                    notes.append(f"{lab.name}: {clean_text(b.message) or b.target + ' did not build'}")
        if not o.results.labs:
            notes.append("no labs graded")
    elif status == MISSING:
        notes.append(clean_text(o.error) or "no submission")
    elif not o.error:
        notes.append("not graded")
    # One note per distinct problem: a compile error breaks the lab's student and hidden binaries alike.
    unique = list(dict.fromkeys(" ".join(n.split()) for n in notes))
    return truncate(" | ".join(unique), _NOTE_LIMIT, "… ({n} more characters)")


def _cells(o: StudentOutcome, labs: list[LabColumn]) -> list[str]:
    """total, max_total, the lab columns and the task columns of one row."""
    results = o.results
    mine = by_name(results)
    tasks_n = sum(len(lab.tasks) for lab in labs)
    if o.status == MISSING:
        return ["0", _num(sum(lab.max_score for lab in labs)), *["0"] * len(labs)] + [""] * tasks_n
    if results is None or o.status == NOT_GRADED_NO_GPU:
        return ["", ""] + [""] * (len(labs) + tasks_n)
    if o.status in (COMPILED, NOT_COMPILED):
        states = [compile_state(mine[lab.name])[0] if lab.name in mine else "" for lab in labs]
        return ["", "", *states] + [""] * tasks_n
    row = [_num(results.score), _num(results.max_score)]
    row += [_num(mine[lab.name].score) if lab.name in mine else "" for lab in labs]
    for lab in labs:
        tasks = {t.id: t for t in mine[lab.name].tasks} if lab.name in mine else {}
        row += [
            _num(round(tasks[tid].earned + tasks[tid].perf_earned, 4)) if tid in tasks else ""
            for tid, _ in lab.tasks
        ]
    return row


def _late_cells(o: StudentOutcome, labs: list[LabColumn]) -> list[str]:
    """Per lab: raw score, penalty, late days used, when it was submitted and the time's source."""
    mine = by_name(o.results)
    cells: list[str] = []
    for col in labs:
        lab = mine.get(col.name)
        late = lab.late if lab is not None else None
        if late is None:
            cells += [""] * len(LATE_COLUMNS)
            continue
        scored = o.status == GRADED
        cells += [
            _num(late.raw_score) if scored else "",
            _num(late.penalty) if scored else "",
            str(late.late_days_used),
            _cell(late.submitted),
            _cell(late.source or "unknown"),
        ]
    return cells


def render_gradebook_csv(outcomes: list[StudentOutcome]) -> str:
    """One row per student, a broken, ungraded or missing one too (see the module docstring)."""
    labs = batch_labs(outcomes)
    gpu = pinned(outcomes)
    late, roster = late_labs(outcomes), with_roster(outcomes)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([_cell(c) for c in gradebook_columns(labs, gpu, late, roster)])
    for o in roster_order(outcomes):
        device = [_cell(gpu_device(o.results.run) if o.results is not None else "")] if gpu else []
        extra = (_late_cells(o, labs) if late else []) + ([_cell(o.name), _cell(o.email)] if roster else [])
        writer.writerow([_cell(o.student), *_cells(o, labs), *extra, o.status, *device, _cell(_notes(o))])
    return out.getvalue()


__all__ = ["LATE_COLUMNS", "gradebook_columns", "pinned", "render_gradebook_csv"]
