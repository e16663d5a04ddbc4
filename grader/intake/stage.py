"""The intake stage: a submission opened and its student files staged, and what the later stages read of
it per lab (the files the graded code compiles from, a refusal, notes). `grade --submission` and every
student of a batch go through take_in(); a grade of the tree itself has no intake (staged is None)."""

from __future__ import annotations

from pathlib import Path

from grader.model.block import Block
from grader.model.labs import Lab
from grader.model.results import Category
from grader.intake.staging import StagedSubmission, stage_submission
from grader.intake.submission import open_submission


def take_in(submission: Path, labs: list[Lab], staging: Path, scratch: Path, all_labs: list[Lab]) -> StagedSubmission:
    """Open the submission (a folder, an archive extracted into scratch, or the student files alone) and
    stage the student files of these labs into staging. Raises SubmissionError or StagingError."""
    opened = open_submission(submission, scratch, all_labs)
    staged = stage_submission(labs, opened, staging)
    staged.source = submission  # reports name the submission, not a scratch folder
    return staged


def graded_sources(lab: Lab, mode: str, staged: StagedSubmission | None) -> list[Path]:
    """The files the graded code compiles from: the solution's in solution mode, the staged copy of a
    submission's file, else the tree's own."""
    files = [f for f in lab.student_files if f.endswith(".cu")] or list(lab.student_files)
    if mode == "solution":
        return [lab.solution_dir / f for f in files]
    mine = staged.lab(lab.name) if staged is not None else None
    return [staged.path_of(lab, f) if staged is not None and mine is not None and f in mine.files else lab.path / f
            for f in files]


def refusal(lab: Lab, mode: str, staged: StagedSubmission | None, show_errors: int = 6) -> Block | None:
    """The intake's refusal of the lab's files (a link, a binary or oversized file), as a Block."""
    mine = staged.lab(lab.name) if staged is not None and mode == "student" else None
    if mine is None or not mine.refused:
        return None
    what = "refused" if mine.category is Category.COMPILE_ERROR else "rejected"
    return refused_block(what, mine.errors, mine.category or Category.COMPILE_ERROR, "student",
                         f"{lab.target_prefix}_student", show_errors)


def refused_block(what: str, lines: list[str], category: Category, label: str, target: str,
                  show: int = 6) -> Block:
    """'the lab file was refused: a; b; and 3 more', as lab message and test message alike."""
    shown = "; ".join(lines[:show]) + (f"; and {len(lines) - show} more" if len(lines) > show else "")
    text = f"the lab file was {what}: {shown}"
    return Block(category, text, text, label, target)


def notes(lab: Lab, mode: str, staged: StagedSubmission | None) -> list[str]:
    """What the intake has to say of the lab: files missing (the skeleton graded), files ignored."""
    mine = staged.lab(lab.name) if staged is not None and mode == "student" else None
    return mine.notes() if mine is not None else []
