"""Hidden tests: what a report may show of them.

A lab's hidden tests live in solutions/NN-slug/test_hidden_<topic>.cu (never in a student release).
When the file exists, cmake/CudaLab.cmake links it with the student's file into labNN_hidden_student,
and the pipeline runs that binary after the public one. Its results carry binary="hidden" and the
lab's visibility (lab.toml: [hidden] visibility = ...); they are scored by the lab's hidden tasks
([[task]] with hidden = true) and by nothing else.

  visibility        student-facing reports (HTML, JUnit,           Gradescope results.json
                    GitHub Classroom, CSV, console)
  hidden            "N hidden tests: X passed", never names,        entries "hidden" (course staff only)
                    inputs or messages
  after_due_date    the same, until the report is rendered with     entries "after_due_date"
                    --reveal-hidden, the run is in solution mode,
                    or the lab's due date in a course file has
                    passed (batch --course: the lab's late record)
  visible           every test, like the public ones                entries as visible as the rest

results.json keeps everything: it is the instructor's record (and what `report --from` re-renders).
redact() makes the copy the student-facing reports render from; `grader test` prints it too. A
concealed group becomes one summary row per task whose properties carry the counts (counts() adds them
up, so every report and `test` count the same tests). What is printed while a grade runs is student-
facing as well (CI logs publish it): progress_name() and build_message() keep concealed names and the
hidden binary's compiler output out of progress lines and the GPU health check's notes.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from datetime import datetime, timezone

from grader.model.results import BuildResult, Category, LabResult, Results, Status, TestResult

VISIBILITIES = ("hidden", "after_due_date", "visible")
DEFAULT_VISIBILITY = "hidden"  # what a hidden test without a visibility gets: the safe one
NOTE_PREFIX = "hidden tests: "  # lab messages about the hidden binary start with this
SUMMARY_SUITE = "HiddenTests"  # the suite of the one summary row a concealed group becomes
BINARY = "hidden"
COUNT_KEYS = {s: f"hidden_{s.value}" for s in Status}  # a summary row's counts, in its properties
_RANK = {v: i for i, v in enumerate(VISIBILITIES)}  # lower is more restrictive


def is_hidden(test: TestResult) -> bool:
    return test.binary == BINARY


def is_hidden_target(target: str) -> bool:
    """labNN_hidden_student / labNN_hidden_solution."""
    return "_hidden_" in target


def visibility_of(test: TestResult) -> str:
    return test.visibility if test.visibility in VISIBILITIES else DEFAULT_VISIBILITY


def strictest(visibilities: Iterable[str]) -> str:
    """The most restrictive of these visibilities (DEFAULT_VISIBILITY when there is none)."""
    known = [v if v in VISIBILITIES else DEFAULT_VISIBILITY for v in visibilities]
    return min(known, key=_RANK.__getitem__) if known else DEFAULT_VISIBILITY


def reveals(visibility: str, reveal: bool, mode: str) -> bool:
    """Whether a student-facing report shows hidden tests of this visibility in full."""
    if visibility == "visible":
        return True
    if visibility == "after_due_date":
        return reveal or mode == "solution"
    return False


def lab_visibility(lab: LabResult) -> str:
    """The visibility of a lab's hidden tests (the strictest, when they differ)."""
    return strictest(visibility_of(t) for t in lab.tests if is_hidden(t))


# --- the pipeline side --------------------------------------------------------------------------------


def mark(result: LabResult, visibility: str, first_message: int) -> None:
    """After the hidden binary ran: give its tests the lab's visibility, and tag the lab messages it
    added (from result.messages[first_message:]) so that redact() can drop them."""
    for t in result.tests:
        if is_hidden(t):
            t.visibility = visibility
    result.messages[first_message:] = [
        m if m.startswith(NOTE_PREFIX) else NOTE_PREFIX + m for m in result.messages[first_message:]
    ]


# --- the report side ----------------------------------------------------------------------------------


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def summary_text(tests: list[TestResult], visibility: str) -> str:
    """One line about concealed tests: counts only."""
    counts = {s: sum(t.status is s for t in tests) for s in Status}
    parts = [f"{counts[Status.PASSED]} passed"]
    parts += [f"{counts[s]} {label}" for s, label in
              ((Status.FAILED, "failed"), (Status.SKIPPED, "skipped"), (Status.NOT_RUN, "not run")) if counts[s]]
    when = " until the due date" if visibility == "after_due_date" else ""
    return (
        f"{_plural(len(tests), 'hidden test')}: {', '.join(parts)}. Hidden tests check your code on inputs "
        f"the public tests do not use; their names, inputs and messages are not shown{when}."
    )


def _summary_status(tests: list[TestResult]) -> tuple[Status, Category | None]:
    failed = [t for t in tests if t.status is Status.FAILED]
    if failed:
        return Status.FAILED, failed[0].category
    broken = [t for t in tests if t.status is Status.NOT_RUN and t.category is not Category.NO_GPU]
    if broken:
        return Status.NOT_RUN, broken[0].category
    if any(t.category is Category.NO_GPU for t in tests):
        return Status.SKIPPED, Category.NO_GPU
    if any(t.status is Status.PASSED for t in tests):
        return Status.PASSED, None
    return Status.SKIPPED, None


def summarize(tests: list[TestResult], task: str | None, visibility: str) -> TestResult:
    """The one row that stands for concealed hidden tests of one task: counts, never names. Its
    properties hold the counts (COUNT_KEYS), so that every report counts the tests it stands for."""
    status, category = _summary_status(tests)
    return TestResult(
        name=f"{SUMMARY_SUITE}.{task or 'unscored'}",
        status=status,
        kind="correctness",
        binary="",  # a public summary, named in every report; the tests it counts stay hidden
        task=task,
        duration_s=round(sum(t.duration_s for t in tests), 3),
        message=summary_text(tests, visibility),
        category=category,
        properties={COUNT_KEYS[s]: str(sum(t.status is s for t in tests)) for s in Status},
    )


def is_summary(test: TestResult) -> bool:
    """A row summarize() made."""
    return (test.binary == "" and test.name.startswith(SUMMARY_SUITE + ".")
            and COUNT_KEYS[Status.PASSED] in test.properties)


def counts(tests: Iterable[TestResult]) -> dict[Status, int]:
    """How many tests passed, failed, were skipped and did not run: a summary row counts the hidden
    tests it stands for, so `test`, `grade` and every report give the same numbers."""
    out = {s: 0 for s in Status}
    for t in tests:
        if is_summary(t):
            for s in Status:
                try:
                    out[s] += int(t.properties.get(COUNT_KEYS[s], "0"))
                except ValueError:
                    pass
        else:
            out[t.status] += 1
    return out


def total_tests(tests: Iterable[TestResult]) -> int:
    return sum(counts(tests).values())


# --- what a console may say while a grade runs ------------------------------------------------------


def conceals(visibility: str, mode: str, reveal: bool = False) -> bool:
    """Whether student-facing output (reports, console, progress lines) keeps this visibility's hidden
    tests' names out."""
    return not reveals(visibility, reveal, mode)


def progress_name(name: str, target: str, conceal: bool) -> str:
    """What a progress line may call a test of target: its name, or "a hidden test of <target>". A
    text that already names the binary (the full run of it) is left as it is."""
    if not conceal or target in name:
        return name
    return f"a hidden test of {target}"


def build_message(target: str, message: str, conceal: bool) -> str:
    """What a progress line may say about a failed build of target: the hidden binary's compiler output
    stays out of it, as it does in the reports."""
    if not conceal or not is_hidden_target(target):
        return message
    return "did not build (the output of the hidden tests' build is not shown)"


def _redact_build(build: BuildResult) -> BuildResult:
    if build.ok:
        return BuildResult(target=build.target, ok=True, seconds=build.seconds)
    what = {Category.LINK_ERROR: "link error", Category.COMPILE_ERROR: "compile error"}.get(
        build.category or Category.HARNESS, "build failed")
    return BuildResult(
        target=build.target,
        ok=False,
        seconds=build.seconds,
        category=build.category,
        message=f"{what} in the hidden tests' binary (its output is not shown)",
    )


def past_due(lab: LabResult, now: datetime | None = None) -> bool:
    """Whether a course file's due date for this lab (its latest extension included: no student still
    working on it sees them; grader/course/policy.py) has passed: after_due_date tests then show."""
    after = lab.late.reveal_hidden_after if lab.late is not None else ""
    if not after:
        return False
    try:
        when = datetime.fromisoformat(after)
    except ValueError:
        return False
    return when.utcoffset() is not None and (now or datetime.now(timezone.utc)) >= when


def redact_lab(lab: LabResult, reveal: bool = False, mode: str = "student", now: datetime | None = None) -> LabResult:
    """A copy of lab for student-facing reports (the argument is not changed). With a course file's due
    date in the lab's late record, after_due_date tests show once it has passed (now: the clock)."""
    reveal = reveal or past_due(lab, now)
    out = copy.deepcopy(lab)
    groups: dict[str | None, list[TestResult]] = {}
    slots: list[TestResult | tuple[str | None]] = []  # a test, or (task,): where a group's summary goes
    for t in out.tests:
        if is_hidden(t) and not reveals(visibility_of(t), reveal, mode):
            if t.task not in groups:
                groups[t.task] = []
                slots.append((t.task,))
            groups[t.task].append(t)
        else:
            slots.append(t)
    out.tests = [
        s if isinstance(s, TestResult) else summarize(groups[s[0]], s[0], strictest(map(visibility_of, groups[s[0]])))
        for s in slots
    ]
    if not reveals(lab_visibility(lab), reveal, mode):
        out.messages = [m for m in out.messages if not m.startswith(NOTE_PREFIX)]
        out.builds = [_redact_build(b) if is_hidden_target(b.target) else b for b in out.builds]
    return out


def redact(results: Results, reveal: bool = False, now: datetime | None = None) -> Results:
    """A copy of results that student-facing reports render: hidden tests the visibility conceals
    become one summary row per task, with counts only; the messages and build output of the hidden
    binary go too. `reveal` (--reveal-hidden) shows "after_due_date" tests; solution mode shows them too."""
    mode = results.run.mode
    return Results(
        run=copy.deepcopy(results.run),
        labs=[redact_lab(lab, reveal, mode, now) for lab in results.labs],
        schema_version=results.schema_version,
    )


def gradescope_visibility(tests: Iterable[TestResult], default: str, fallback: str) -> str:
    """The Gradescope visibility of an entry holding these tests: `default` when none is hidden; for
    hidden ones their visibility ("hidden", "after_due_date"; "visible" is `default`), and `fallback`
    for hidden tests that carry none (results written before visibilities existed)."""
    hidden = [t for t in tests if is_hidden(t)]
    if not hidden:
        return default
    if any(t.visibility not in VISIBILITIES for t in hidden):
        return fallback
    v = strictest(t.visibility for t in hidden)
    return default if v == "visible" else v
