"""The students of a batch and what each one leaves in OUT/<student>/ (grader/course/batch/runner.py).

A student is one entry of the batch folder: a folder or an archive, whose id is its name without the
archive suffix. Their fingerprint is a sha256 over the lab selection and their staged student files
(refusals included). OUT/<student>/.batch.json (the state) is written last, after every report, and
only for a grade that finished: a student without it is graded again by the next batch."""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grader.model.errors import Exit, GraderError
from grader.model.labs import Lab
from grader.model.results import Results, ResultsError
from grader.intake.stage import take_in
from grader.intake.staging import StagedSubmission
from grader.intake.submission import archive_suffix, submission_name

STATE_FILE = ".batch.json"
LOG_FILE = "grade.log"
CLASS_FILES = ("class-summary.html", "gradebook.csv")


@dataclass(frozen=True)
class Student:
    id: str  # the folder or archive name without its archive suffix
    path: Path


def find_students(batch_dir: Path, exclude: Path | None = None) -> tuple[list[Student], list[str]]:
    """Every folder and archive directly in batch_dir (dotfiles skipped), by id; and the names of the
    other files, which are ignored. Raises GraderError (usage) when two entries share an id."""
    try:
        names = sorted(os.listdir(batch_dir))
    except FileNotFoundError:
        raise GraderError(f"{batch_dir}: no such directory", Exit.USAGE) from None
    except NotADirectoryError:
        raise GraderError(
            f"{batch_dir} is not a directory (batch takes a folder of submissions)", Exit.USAGE
        ) from None
    except OSError as err:
        raise GraderError(f"{batch_dir}: {err.strerror or err}", Exit.USAGE) from None
    skip = exclude.resolve() if exclude is not None else None
    students: dict[str, Student] = {}
    ignored: list[str] = []
    for name in names:
        path = batch_dir / name
        if name.startswith(".") or (skip is not None and path.resolve() == skip):
            continue
        if path.is_dir():
            sid = name
        elif path.is_file() and archive_suffix(name):
            sid = submission_name(name)
        else:
            ignored.append(name)
            continue
        if sid in students:
            raise GraderError(
                f"{students[sid].path.name} and {name} are both student {sid!r}: keep one submission per student",
                Exit.USAGE,
            )
        if sid in CLASS_FILES:
            raise GraderError(
                f"{name}: the student id {sid!r} is the name of a class report; rename it", Exit.USAGE
            )
        students[sid] = Student(sid, path)
    return list(students.values()), ignored


def stage(
    student: Student, labs: list[Lab], staging: Path, scratch: Path, all_labs: list[Lab]
) -> StagedSubmission:
    """The intake stage for one student (grader/intake/stage.py: scratch is where an archive is
    extracted). Raises SubmissionError / StagingError."""
    return take_in(student.path, labs, staging, scratch, all_labs)


def fingerprint(staged: StagedSubmission, labs: list[Lab]) -> str:
    """sha256 over the lab selection and, per lab, each student file's content (or that it was missing,
    or why it was refused)."""
    h = hashlib.sha256()
    h.update(json.dumps([lab.name for lab in labs]).encode())
    for lab in labs:
        s = staged.lab(lab.name)
        h.update(f"\0lab {lab.name}\0".encode())
        if s is None:
            continue
        for file in lab.student_files:
            if file in s.files and file not in s.missing:
                h.update(f"file {file}\0".encode())
                h.update(hashlib.sha256(staged.path_of(lab, file).read_bytes()).digest())
            elif file in s.missing:
                h.update(f"missing {file}\0".encode())
        for error in s.errors:
            h.update(f"refused {error}\0".encode())
    return h.hexdigest()


# --- what a finished student leaves in OUT ----------------------------------------------------------------


def _report_files() -> tuple[str, ...]:
    try:
        from grader.report import FILES
    except ImportError:  # pragma: no cover - grader/report is part of the package
        return ("results.json",)
    return tuple(FILES.values())


def load_prior(student_dir: Path) -> tuple[dict[str, Any], Results] | None:
    """The state and results a previous batch left for this student, or None."""
    try:
        state = json.loads((student_dir / STATE_FILE).read_text())
        results = Results.load(student_dir / "results.json")
    except (OSError, ValueError, ResultsError):
        return None
    return (state, results) if isinstance(state, dict) else None


def clear_reports(student_dir: Path) -> None:
    """Remove a student's earlier reports, so a broken submission leaves no stale grade behind."""
    for name in (*_report_files(), STATE_FILE):
        try:
            (student_dir / name).unlink()
        except FileNotFoundError:
            pass


def write_state(student_dir: Path, state: dict[str, Any]) -> None:
    path = student_dir / STATE_FILE
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(state, indent=2) + "\n")
    tmp.replace(path)


def forget(student_dir: Path) -> None:
    """Before a student is graded: remove their state, so that a grade cut short (the batch killed,
    the machine gone) is never taken for a finished one by the next batch."""
    try:
        (student_dir / STATE_FILE).unlink()
    except FileNotFoundError:
        pass


def still_stands(
    state: dict[str, Any], results: Results, fp: str, labs: list[str], *, compile_only: bool, gpu: bool
) -> bool:
    """Whether a previous batch's record of a student stands for this batch: the same files and lab
    selection, the same kind of batch (a compile check never stands for a grade, nor the other way
    round), and, for a grade, one that was not left without a GPU while this batch has one."""
    from grader.report.standing import standing

    if state.get("fingerprint") != fp or state.get("labs") != labs:
        return False
    if bool(state.get("compile_only", False)) != compile_only:
        return False
    return compile_only or not gpu or standing(results).graded
