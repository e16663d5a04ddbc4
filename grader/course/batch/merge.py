"""`grader batch merge OUT... --out DEST [--roster R]`: one class summary and gradebook from the results
of many batches.

Each OUT is a folder that `grader batch` wrote (OUT/<student>/ with results.json, .batch.json,
grade.log; grader/course/batch/students.py): one per Slurm array task (grader/course/slurm/jobs.py), one per machine, or
any scheduler's. The merge reads every student folder of every OUT and writes DEST/class-summary.html
and DEST/gradebook.csv exactly as `grader batch` does (grader/report/batch.py), with links to the
students' folders where they lie.

A student's record is the newest finished grade among the OUTs (its .batch.json and a results.json
that loads); a later attempt that did not finish never hides an earlier one that did. A student
with no finished grade anywhere gets a `broken` row with the reason (what their grade.log or their
batch's gradebook says, a corrupt results.json, or that no batch ever graded them), never a hole:
the roster (--roster: a folder of submissions, as `batch` reads it, or a text file of student ids,
one per line) names who must have a row; without it, every student found in an OUT has one.

A roster CSV (grader/course/roster.py) matches the OUTs' student folders by id and alias: a roster student
that no OUT holds anything of gets a `missing` row (score 0: they handed in nothing), and a folder that
matches nobody, or two students, is listed as unmatched and left out of the gradebook. With --expect
(a text file of the ids that were handed to the batches: Slurm's OUT/slurm/roster.txt), a roster student
among them that no OUT holds anything of is `broken` instead (their job died before their grade): only
the others handed in nothing. --unmatched (a TSV of `<submission> TAB <why>`: Slurm's
OUT/slurm/unmatched.tsv) lists the submissions a roster matched to nobody before the batches ran.
"""

from __future__ import annotations

import csv
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from grader.course.batch.students import CLASS_FILES, LOG_FILE, STATE_FILE, find_students
from grader.model.errors import Exit, GraderError
from grader.model.results import Results, ResultsError
from grader.course.roster import Roster, is_csv, match, read_roster_csv

if TYPE_CHECKING:
    from grader.report.outcomes import StudentOutcome

INTERRUPTED = "interrupted"  # what batch.py writes in grade.log when a grade was cut short


@dataclass
class Attempt:
    """One OUT's record of one student: a finished grade (results) or why there is none (error)."""

    student: str
    folder: Path  # OUT/<student>
    results: Results | None = None
    state: dict[str, Any] = field(default_factory=dict)
    error: str = ""
    when: float = 0.0  # when it finished (unix seconds), or the folder's mtime for an unfinished one

    @property
    def finished(self) -> bool:
        return self.results is not None


def _last_error(log: Path) -> str:
    """The last 'error: ...' or 'interrupted...' line of a student's grade.log ('' when none)."""
    try:
        lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return ""
    for line in reversed(lines):
        if "error: " in line:
            return line.split("error: ", 1)[1].strip()
        if f" {INTERRUPTED}" in line:
            return "its grade was interrupted (the batch was stopped or its job killed) and was not kept"
    return ""


def _gradebook_notes(out: Path) -> dict[str, str]:
    """student -> notes of the broken rows of OUT/gradebook.csv (what that batch said about them)."""
    try:
        with open(out / "gradebook.csv", newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
    except (OSError, csv.Error, UnicodeDecodeError):
        return {}
    return {r.get("student", ""): r.get("notes", "") for r in rows if r.get("status") == "broken"}


def read_attempt(folder: Path, notes: dict[str, str] | None = None) -> Attempt:
    """What OUT/<student>/ holds: a finished grade, or a broken one with the reason."""
    student = folder.name
    state_path, results_path = folder / STATE_FILE, folder / "results.json"
    try:
        when = folder.stat().st_mtime
    except OSError:
        when = 0.0
    state: dict[str, Any] = {}
    if state_path.is_file():
        try:
            loaded = json.loads(state_path.read_text(encoding="utf-8"))
            if not isinstance(loaded, dict):
                raise ValueError("not a JSON object")
            state = loaded
        except (OSError, ValueError) as err:
            return Attempt(student, folder, error=f"{STATE_FILE} is corrupt ({err})", when=when)
        try:
            results = Results.load(results_path)
        except FileNotFoundError:
            return Attempt(student, folder, state=state, error="results.json is missing beside a finished grade",
                           when=when)
        except (OSError, ValueError, ResultsError) as err:
            return Attempt(student, folder, state=state, error=f"results.json is corrupt ({err})", when=when)
        finished = state.get("finished_unix")
        return Attempt(student, folder, results, state,
                       when=float(finished) if isinstance(finished, (int, float)) else when)
    reason = (notes or {}).get(student) or _last_error(folder / LOG_FILE)
    if not reason:
        reason = ("its grade did not finish (no " + STATE_FILE + "): the job grading it was killed or is still "
                  "running")
    return Attempt(student, folder, state=state, error=reason, when=when)


def scan(out: Path) -> list[Attempt]:
    """Every student folder of one batch's OUT."""
    notes = _gradebook_notes(out)
    attempts = []
    for entry in sorted(out.iterdir()):
        if entry.name.startswith(".") or not entry.is_dir() or entry.name in CLASS_FILES:
            continue
        if not any((entry / name).exists() for name in (STATE_FILE, LOG_FILE, "results.json")):
            continue  # not a student's folder (a batch never leaves one without its grade.log)
        attempts.append(read_attempt(entry, notes))
    return attempts


def best(attempts: list[Attempt]) -> Attempt:
    """The newest finished attempt, else the newest unfinished one (its reason)."""
    done = [a for a in attempts if a.finished]
    pool = done or attempts
    return max(pool, key=lambda a: a.when)


def load_roster(path: Path) -> list[str] | Roster:
    """--roster: a roster CSV (a .csv file: grader/course/roster.py), else read_roster's ids."""
    return read_roster_csv(path) if is_csv(path) else read_roster(path)


def read_unmatched(path: Path) -> list[tuple[str, str]]:
    """--unmatched: `<submission> TAB <why>` lines ('#' comments and blank lines skipped)."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as err:
        raise GraderError(f"--unmatched {path}: {err.strerror or err}", Exit.USAGE) from None
    pairs = [line.partition("\t") for line in lines if line.strip() and not line.startswith("#")]
    return [(name, why or "not graded") for name, _, why in pairs]


def read_roster(path: Path) -> list[str]:
    """Student ids: a folder of submissions (as `batch` finds them) or a text file, one id a line
    ('#' comments and blank lines skipped)."""
    if path.is_dir():
        students, _ = find_students(path)
        return [s.id for s in students]
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as err:
        raise GraderError(f"--roster {path}: {err.strerror or err}", Exit.USAGE) from None
    return [x.strip() for x in lines if x.strip() and not x.strip().startswith("#")]


@dataclass
class Merged:
    outcomes: list[StudentOutcome]
    paths: dict[str, Path]
    missing: list[str]  # roster students no OUT has a folder for
    broken: list[str]  # every broken row
    unmatched: list[tuple[str, str]] = field(default_factory=list)  # (folder, why): a roster CSV matched it to nobody


def merge(outs: list[Path], dest: Path, roster: list[str] | Roster | None = None, title: str = "",
          expected: list[str] | None = None, unmatched: list[tuple[str, str]] | None = None) -> Merged:
    """Read every OUT, pick each student's record, write DEST's class summary and gradebook. expected:
    the ids the batches were given (a roster CSV's student among them with nothing in any OUT is broken,
    not missing); unmatched: submissions matched to nobody before the batches ran, listed too."""
    from grader.report import StudentOutcome, write_batch_reports

    found: dict[str, list[Attempt]] = {}
    for out in outs:
        if not out.is_dir():
            raise GraderError(f"{out}: no such directory (a folder `grader batch` wrote)", Exit.USAGE)
        for attempt in scan(out):
            found.setdefault(attempt.student, []).append(attempt)
    people: dict[str, tuple[str, str]] = {}
    problems: list[tuple[str, str]] = []
    absent: set[str] = set()
    if isinstance(roster, Roster):  # a roster CSV: folders by id or alias
        m = match(roster, list(found))
        problems = m.problems()
        regrouped: dict[str, list[Attempt]] = {}
        for name, sid in m.matched.items():
            regrouped.setdefault(sid, []).extend(found[name])
        found = regrouped
        people = {s.id: (s.name, s.email) for s in roster.students}
        absent = {s.id for s in m.missing} - set(expected or ())
        roster = [s.id for s in roster.students]
    problems += unmatched or []
    ids = list(dict.fromkeys([*(roster or []), *([] if roster is not None else found)]))
    dest.mkdir(parents=True, exist_ok=True)
    outcomes: list[StudentOutcome] = []
    missing: list[str] = []
    searched = ", ".join(str(o) for o in outs[:3]) + (f" and {len(outs) - 3} more" if len(outs) > 3 else "")
    for sid in ids:
        if sid in absent:  # a roster CSV's student no batch holds anything of: handed in nothing
            missing.append(sid)
            name, email = people[sid]
            outcomes.append(StudentOutcome(sid, None, error=f"no submission: no batch folder ({searched}) matches "
                                                            "this student's id or aliases", name=name, email=email,
                                           missing=True))
            continue
        if sid not in found:
            missing.append(sid)
            outcomes.append(StudentOutcome(sid, None, error=f"no results: no batch graded this student ({searched} "
                                                            "hold nothing of theirs; the job that had them died "
                                                            "before their grade, or never ran)"))
            continue
        a = best(found[sid])
        link = os.path.relpath(a.folder, dest)
        if a.finished:
            outcomes.append(StudentOutcome(sid, a.results, error=str(a.state.get("note", "") or ""),
                                           report_dir=link, seconds=float(a.state.get("seconds", 0.0) or 0.0),
                                           compile_only=bool(a.state.get("compile_only", False))))
        else:
            outcomes.append(StudentOutcome(sid, None, error=a.error, report_dir=link))
    for o in outcomes:
        o.name, o.email = people.get(o.student, (o.name, o.email))
    paths = write_batch_reports(outcomes, dest, title=title or f"cudalab class summary: {dest.resolve().name}",
                                unmatched=problems)
    broken = [o.student for o in outcomes if o.broken]
    return Merged(outcomes, paths, missing, broken, problems)


def cmd_batch_merge(outs: list[Path], dest: Path, roster: Path | None = None, title: str = "",
                    stdout: TextIO | None = None, expect: Path | None = None,
                    unmatched: Path | None = None) -> Exit:
    """The `batch merge` verb: exit 0 when every student has a finished record, 1 when a row is broken."""
    import sys

    stdout = stdout or sys.stdout
    merged = merge([Path(o) for o in outs], Path(dest), load_roster(roster) if roster is not None else None, title,
                   expected=read_roster(expect) if expect is not None else None,
                   unmatched=read_unmatched(unmatched) if unmatched is not None else None)
    n = len(merged.outcomes)
    stdout.write(f"merged {len(outs)} batch folder(s): {n} student(s), {n - len(merged.broken)} with results, "
                 f"{len(merged.broken)} broken" + (f" ({len(merged.missing)} never graded)" if merged.missing else "")
                 + "\n")
    for o in merged.outcomes:
        if o.broken:
            stdout.write(f"  broken: {o.student}: {o.error}\n")
        elif o.missing:
            stdout.write(f"  missing: {o.student}: {o.error}\n")
    for name, why in merged.unmatched:
        stdout.write(f"  not merged: {name}: {why}\n")
    stdout.write(f"class summary: {merged.paths['html']}\ngradebook: {merged.paths['csv']}\n")
    if "canvas" in merged.paths and "moodle" in merged.paths:
        stdout.write(f"LMS gradebooks: {merged.paths['canvas']} (Canvas), {merged.paths['moodle']} (Moodle)\n")
    return Exit.TEST_FAILURES if merged.broken else Exit.OK


__all__ = ["Attempt", "Merged", "best", "cmd_batch_merge", "load_roster", "merge", "read_attempt", "read_roster",
           "read_unmatched", "scan"]
