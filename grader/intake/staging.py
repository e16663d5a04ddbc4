"""A submission's student files, staged: copied into a fresh tree before anything builds them.

A submission is never built where it lies. stage_submission() copies only the student_files that each
lab's lab.toml names, from <submission>/labs/NN-slug/<file>, into a fresh staging tree; everything else
(tests, headers, CMake, the grader) comes from the pristine repository. A file is refused when it is a
symbolic link (or lies under one), not a regular file, larger than MAX_FILE_BYTES, or binary. A refused
lab fails with a clear message; the others still grade. What the file includes and what it compiles to
are the inspection's business (grader/inspect/), through the compiler itself.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
from dataclasses import dataclass, field
from pathlib import Path

from grader.model.answers import ANSWERS_FILE
from grader.model.labs import Lab
from grader.model.results import Category

MAX_FILE_BYTES = 1 << 20  # a student file larger than this is refused



class StagingError(Exception):
    """The submission as a whole cannot be staged (not a directory, ...)."""


@dataclass
class StagedLab:
    lab: str  # "03-vector-add"
    files: list[str] = field(default_factory=list)  # student files staged (names from lab.toml)
    missing: list[str] = field(default_factory=list)  # not in the submission: the skeleton is graded
    ignored: list[str] = field(default_factory=list)  # other files of the submission's lab directory
    errors: list[str] = field(default_factory=list)  # why the lab's files were refused
    category: Category | None = None  # COMPILE_ERROR (file refused) or FORBIDDEN_CALL (includes, in a batch)
    answers: bool = False  # the submission's answers.md was staged beside the student files
    answers_note: str = ""  # why its answers.md was not taken (not a refusal of the lab)

    @property
    def refused(self) -> bool:
        return bool(self.errors)

    def notes(self) -> list[str]:
        out = []
        if self.missing:
            out.append("not in the submission, so the unchanged skeleton was graded: " + ", ".join(self.missing))
        if self.ignored:
            shown = ", ".join(self.ignored[:8]) + (" ..." if len(self.ignored) > 8 else "")
            out.append(f"ignored (only the lab's student files are graded): {shown}")
        if self.answers_note:
            out.append(self.answers_note)
        return out


@dataclass
class StagedSubmission:
    source: Path  # the submission directory as given
    root: Path  # the staging tree: root/labs/NN-slug/<file>
    labs: dict[str, StagedLab] = field(default_factory=dict)

    def lab(self, name: str) -> StagedLab | None:
        return self.labs.get(name)

    def path_of(self, lab: Lab, file: str) -> Path:
        return self.root / "labs" / lab.name / file


def _lexists_under(base: Path, rel: Path) -> tuple[Path | None, str]:
    """Walk rel from base with lstat: (the path, "") when every component exists and none is a link;
    (None, "") when something is missing; (None, why) when a component is a link or not a directory."""
    current = base
    parts = rel.parts
    for i, part in enumerate(parts):
        current = current / part
        try:
            st = os.lstat(current)
        except FileNotFoundError:
            return None, ""
        except OSError as err:
            return None, f"{rel}: cannot be read ({err.strerror})"
        if stat.S_ISLNK(st.st_mode):
            shown = Path(*parts[: i + 1])
            return None, f"{shown} is a symbolic link: submissions must contain the files themselves"
        if i < len(parts) - 1 and not stat.S_ISDIR(st.st_mode):
            return None, ""
    return current, ""


def read_student_file(path: Path, shown: str) -> tuple[bytes | None, str]:
    """The file's bytes, or (None, why it is refused): links, non-regular files, oversized or binary."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except OSError as err:
        if err.errno == errno.ELOOP:
            return None, f"{shown} is a symbolic link: submissions must contain the files themselves"
        return None, f"{shown} cannot be read ({err.strerror})"
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None, f"{shown} is not a regular file"
        if st.st_size > MAX_FILE_BYTES:
            return None, f"{shown} is {st.st_size} bytes, larger than the {MAX_FILE_BYTES >> 20} MiB a lab file may have"
        chunks = []
        total = 0
        while True:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            total += len(chunk)
            if total > MAX_FILE_BYTES:
                return None, f"{shown} is larger than the {MAX_FILE_BYTES >> 20} MiB a lab file may have"
            chunks.append(chunk)
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if b"\0" in data:
        return None, f"{shown} is not a text file"
    return data, ""


def _candidates(lab: Lab, file: str) -> list[Path]:
    return [Path("labs") / lab.name / file, Path(lab.name) / file]


def stage_lab(lab: Lab, submission: Path, staging_root: Path) -> StagedLab:
    staged = StagedLab(lab=lab.name)
    dest_dir = staging_root / "labs" / lab.name
    for file in lab.student_files:
        rel_file = Path(file)
        if rel_file.is_absolute() or ".." in rel_file.parts:
            staged.errors.append(f"lab.toml names an unsafe student file {file!r}")
            staged.category = Category.COMPILE_ERROR
            continue
        found: Path | None = None
        shown = ""
        for rel in _candidates(lab, file):
            path, why = _lexists_under(submission, rel)
            if why:
                staged.errors.append(why)
                staged.category = Category.COMPILE_ERROR
                found = None
                break
            if path is not None:
                found, shown = path, str(rel)
                break
        else:
            staged.missing.append(file)
            continue
        if found is None:
            continue
        data, why = read_student_file(found, shown)
        if data is None:
            staged.errors.append(why)
            staged.category = Category.COMPILE_ERROR
            continue
        target = dest_dir / rel_file
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        staged.files.append(file)
    if not staged.errors:
        _stage_answers(lab, submission, dest_dir, staged)
    staged.ignored = _other_files(lab, submission)
    if staged.errors:  # nothing of a refused lab is staged: CMake would fall back to the skeleton
        shutil.rmtree(dest_dir, ignore_errors=True)
        staged.files = []
    return staged


def _stage_answers(lab: Lab, submission: Path, dest_dir: Path, staged: StagedLab) -> None:
    """The lab's answers.md, when the submission has one: text only, read like a student file and never
    compiled (grader/score/answers.py reads it). A file that cannot be read is a note, not a refusal."""
    for rel in _candidates(lab, ANSWERS_FILE):
        path, why = _lexists_under(submission, rel)
        if why:
            staged.answers_note = f"{ANSWERS_FILE} not read: {why}"
            return
        if path is None:
            continue
        data, why = read_student_file(path, str(rel))
        if data is None:
            staged.answers_note = f"{ANSWERS_FILE} not read: {why}"
            return
        dest_dir.mkdir(parents=True, exist_ok=True)
        (dest_dir / ANSWERS_FILE).write_bytes(data)
        staged.answers = True
        return


def _other_files(lab: Lab, submission: Path) -> list[str]:
    """Files of the submission's lab directory that are not student files (listed, never read)."""
    wanted = set(lab.student_files) | {ANSWERS_FILE}
    for rel in (Path("labs") / lab.name, Path(lab.name)):
        path, why = _lexists_under(submission, rel)
        if path is None or why:
            continue
        try:
            names = sorted(os.listdir(path))
        except OSError:
            return []
        return [str(rel / n) for n in names if n not in wanted][:100]
    return []


def stage_submission(labs: list[Lab], submission_dir: Path | str, staging_root: Path | str) -> StagedSubmission:
    """Copy the student files of these labs from a submission directory into staging_root/labs/.

    Earlier content of staging_root/labs is removed first. Per lab, refusals are recorded (StagedLab
    .errors, .category) rather than raised, so the other labs still grade. Raises StagingError when
    the submission is not a directory."""
    submission = Path(submission_dir)
    staging = Path(staging_root)
    try:
        st = os.lstat(submission)
    except OSError as err:
        raise StagingError(f"{submission}: {err.strerror}") from None
    if stat.S_ISLNK(st.st_mode):
        submission = submission.resolve()  # the top level is the instructor's choice; below it, no links
        st = os.stat(submission)
    if not stat.S_ISDIR(st.st_mode):
        raise StagingError(f"{submission} is not a directory")
    shutil.rmtree(staging / "labs", ignore_errors=True)
    (staging / "labs").mkdir(parents=True, exist_ok=True)
    result = StagedSubmission(source=submission, root=staging)
    for lab in labs:
        result.labs[lab.name] = stage_lab(lab, submission, staging)
    return result
