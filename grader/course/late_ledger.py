"""The late-day ledger (course.toml `[policy] ledger = "late-days.json"`): the late days each student
has spent on each lab, kept across batches (grader/course/policy.py spends them).

Without a ledger, a student's course late days are counted within one batch. With one, a batch that
assesses (student, lab) lets the student spend the course's late days minus what the ledger records for
their OTHER labs, and records what this lab spent, replacing an earlier entry of the same lab (grading a
lab again never spends twice). The file (JSON, written atomically: a temporary file and os.replace):

    {"format": "cudalab late-day ledger", "version": 1,
     "students": {"ada": {"03-vector-add": {"days": 2, "written": "2025-09-30T12:00:00+00:00",
                                            "batch": "/course/grades-03"}}}}

Students are keyed by their id, casefolded. Every read-modify-write holds an exclusive lock
(fcntl.flock on `<ledger>.lock`, and a thread lock for the workers of one batch), so batches running at
once lose no entry. A file that is not a ledger is a usage error (exit 2) naming it. Deleting the file
starts the count again.
"""

from __future__ import annotations

import fcntl
import json
import os
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from grader.model.errors import Exit, GraderError

FORMAT = "cudalab late-day ledger"
VERSION = 1
_THREADS = threading.Lock()  # flock may be per process (NFS): the workers of one batch take turns here


class LedgerError(GraderError):
    """The ledger file is unreadable or not a ledger: a usage error (exit 2) that names the file."""

    def __init__(self, path: Path, message: str) -> None:
        super().__init__(f"{path}: {message} (repair it, or delete it to start counting late days again)",
                         Exit.USAGE)


Entries = dict[str, dict[str, dict[str, object]]]  # student -> lab -> {"days", "written", "batch"}


def _check(data: object, path: Path) -> Entries:
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise LedgerError(path, f"not a late-day ledger (expected an object with \"format\": \"{FORMAT}\")")
    if data.get("version") != VERSION:
        raise LedgerError(path, f"ledger version {data.get('version')!r} is not {VERSION}")
    students = data.get("students")
    if not isinstance(students, dict):
        raise LedgerError(path, "\"students\" must be an object (student -> lab -> entry)")
    for student, labs in students.items():
        if not isinstance(labs, dict):
            raise LedgerError(path, f"students.{student}: expected an object (lab -> entry)")
        for lab, entry in labs.items():
            days = entry.get("days") if isinstance(entry, dict) else None
            if isinstance(days, bool) or not isinstance(days, int) or days < 0:
                raise LedgerError(path, f"students.{student}.{lab}: expected "
                                        "{\"days\": <a whole number, at least 0>}")
    return students


@dataclass(frozen=True)
class Ledger:
    path: Path  # absolute: the course file's `ledger`, resolved against the course file's folder
    batch: str = ""  # the batch OUT whose entries this writes

    def read(self) -> Entries:
        """The entries now (a missing file: none). Raises LedgerError."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        except OSError as err:
            raise LedgerError(self.path, err.strerror or str(err)) from None
        except UnicodeDecodeError:
            raise LedgerError(self.path, "not UTF-8 text") from None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as err:
            raise LedgerError(self.path, f"not valid JSON ({err})") from None
        return _check(data, self.path)

    def _write(self, students: Entries) -> None:
        data = {"format": FORMAT, "version": VERSION, "students": students}
        fd, tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", suffix=".tmp", dir=self.path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(data, f, indent=2, sort_keys=True)
                f.write("\n")
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    @contextmanager
    def spending(self, student: str) -> Iterator[dict[str, int]]:
        """Under the lock: the student's spent days (lab -> days), to read and update; what changed is
        written when the block ends without an error."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            lock = open(self.path.with_name(self.path.name + ".lock"), "a")  # noqa: SIM115 - closed below
        except OSError as err:
            raise LedgerError(self.path, f"cannot lock the ledger: {err.strerror or err}") from None
        with _THREADS, lock:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
            try:
                students = self.read()
                key = student.casefold()
                mine = students.get(key, {})
                before = {lab: int(entry["days"])  # type: ignore[call-overload]
                          for lab, entry in mine.items()}
                spent = dict(before)
                yield spent
                if spent != before:
                    when = datetime.now(timezone.utc).replace(microsecond=0).isoformat()
                    entry = {"written": when, "batch": self.batch}
                    students[key] = {lab: (mine[lab] if before.get(lab) == days else {**entry, "days": days})
                                     for lab, days in spent.items()}
                    self._write(students)
            finally:
                fcntl.flock(lock.fileno(), fcntl.LOCK_UN)


__all__ = ["FORMAT", "Ledger", "LedgerError", "VERSION"]
