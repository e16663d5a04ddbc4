"""A batch as a course (grader/course/batch/runner.py): the roster (grader/course/roster.py) and the course file with its
late policy (grader/course/policy.py).

With a roster, the batch's submissions are matched to students by id and alias, and each matched one
is graded under the student's id (OUT/<id>/); a submission that matches nobody, or two students, is
not graded and is listed (class summary, stdout); a student no submission matches gets a `missing` row.
With a course file, each graded student's labs get a late record and their final score before their
reports are written, and a kept grade is assessed again (the course file may have changed: a new
extension, a moved due date), its reports written again when its record changed. With the course
file's late-day ledger (grader/course/late_ledger.py), the late days a student spent on other labs in earlier
batches are taken off, and what each lab spends is recorded there under the batch's OUT.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from grader.course.batch.students import Student
from grader.course.policy import Course, SubmittedAt, apply_course, load_course, submission_times
from grader.model.errors import Exit, GraderError
from grader.model.labs import Lab, discover
from grader.course.late_ledger import Ledger
from grader.model.results import Results
from grader.course.roster import Roster, RosterStudent, match, read_roster_csv, submitted_times

if TYPE_CHECKING:
    from grader.report.outcomes import StudentOutcome


@dataclass
class ClassSetup:
    root: Path
    roster: Roster | None = None
    course: Course | None = None
    ledger: Ledger | None = None  # the course's late-day ledger, if it names one
    labs: list[Lab] = field(default_factory=list)
    missing: list[RosterStudent] = field(default_factory=list)
    problems: list[tuple[str, str]] = field(default_factory=list)  # (submission, why it was not graded)
    _times: dict[str, dict[str, SubmittedAt]] = field(default_factory=dict)
    _paths: dict[str, Path] = field(default_factory=dict)

    @classmethod
    def load(cls, root: Path, roster: Path | None, course: Path | None, compile_only: bool = False,
             out: Path | None = None) -> ClassSetup:
        """Read and validate both files (and the course's ledger) before anything is graded (a usage
        error, exit 2, otherwise). out: the batch's OUT, which the ledger's entries name."""
        labs = discover(root) if (roster is not None or course is not None) else []
        setup = cls(root, labs=labs)
        if roster is not None:
            setup.roster = read_roster_csv(Path(roster))
            for s in setup.roster.students:
                submitted_times(s, labs)  # a submitted_at:<lab> column naming no lab is an error now
        if course is not None:
            loaded = load_course(Path(course), labs)
            setup.course = None if compile_only else loaded  # a compile check has no score to penalize
            if setup.course is not None and loaded.ledger is not None:
                setup.ledger = Ledger(loaded.ledger, str(Path(out).resolve()) if out is not None else "")
                setup.ledger.read()  # a corrupt ledger stops the batch now, not one student at a time
        return setup

    def match(self, students: list[Student], batch_dir: Path) -> list[Student]:
        """The batch's students under their roster ids (unchanged without a roster)."""
        for s in students:
            self._paths[s.id] = s.path
        if self.roster is None:
            return students
        m = match(self.roster, [s.id for s in students])
        shared = m.shared()
        if shared:
            sid, names = next(iter(shared.items()))
            paths = ", ".join(self._paths[n].name for n in names)
            raise GraderError(f"{paths} are all student {sid!r} of the roster: keep one submission per student",
                              Exit.USAGE)
        by_name = {s.id: s for s in students}
        self.missing = m.missing
        self.problems = [(by_name[n].path.name, why) for n, why in m.problems()]
        matched = [Student(m.matched[s.id], s.path) for s in students if s.id in m.matched]
        self._paths.update({s.id: s.path for s in matched})
        return matched

    def times(self, student: Student) -> dict[str, SubmittedAt]:
        if student.id not in self._times:
            entry = self.roster.by_id(student.id) if self.roster is not None else None
            given = submitted_times(entry, self.labs) if entry is not None else {}
            self._times[student.id] = submission_times(student.path, given)
        return self._times[student.id]

    @property
    def late(self) -> _Late | None:
        return _Late(self) if self.course is not None else None

    def refresh(self, student: Student, results: Results, student_dir: Path) -> None:
        """A kept grade: assess it again, and write its reports again when its late record changed."""
        if self.course is None:
            return
        if apply_course(self.course, student.id, results, self.times(student), self.ledger):
            from grader.report import write_reports

            write_reports(results, student_dir, root=self.root)

    def finish(self, outcomes: list[StudentOutcome]) -> list[StudentOutcome]:
        """Names and emails from the roster, and a `missing` row per student with no submission."""
        if self.roster is None:
            return outcomes
        from grader.report import StudentOutcome

        for o in outcomes:
            entry = self.roster.by_id(o.student)
            if entry is not None:
                o.name, o.email = entry.name, entry.email
        return outcomes + [
            StudentOutcome(s.id, None, error="no submission: nothing in the batch matched this student's id or "
                                             "aliases", name=s.name, email=s.email, missing=True)
            for s in self.missing
        ]

    def lines(self) -> str:
        """The batch's last lines on stdout about the roster."""
        if self.roster is None:
            return ""
        out = [f"roster: {len(self.roster.students)} student(s), {len(self.missing)} missing (no submission), "
               f"{len(self.problems)} submission(s) not graded (unmatched or ambiguous)\n"]
        out += [f"  not graded: {name}: {why}\n" for name, why in self.problems]
        return "".join(out)


@dataclass
class _Late:
    """The late policy as _grade_one calls it: (student, results) -> whether anything changed."""

    setup: ClassSetup

    def __call__(self, student: Student, results: Results) -> bool:
        assert self.setup.course is not None
        setup = self.setup
        return apply_course(setup.course, student.id, results, setup.times(student), setup.ledger)


__all__ = ["ClassSetup"]
