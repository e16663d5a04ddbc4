"""Gradescope results.json, as gradescope/autograder_samples docs/specs.md defines it
(the schema is pinned in grader/report/schemas/gradescope.py).

One test entry per task (its points) and one per perf entry that carries points; a build that failed is
a score-less entry with status "failed" and the compiler output; the leaderboard carries each perf
test's rate. The top-level score is the grader's total, so it wins over the sum of the entries (they
agree when task points exclude speed points, which is how the rubric counts them). The possible total
goes in extra_data, since the spec has no top-level max_score.

A lab that could not be graded (no GPU: grader/report/standing.py) gives its entries no score and no
max_score (they say why instead), the output starts with "Not graded: no GPU", and extra_data.graded is
false. The top-level score stays, because Gradescope needs a number; the text says it is not a grade.
"""

from __future__ import annotations

from typing import Any

from grader.model.hidden import NOTE_PREFIX, gradescope_visibility, is_hidden, is_hidden_target
from grader.report._format import (
    category_label,
    clean_text,
    elapsed_seconds,
    fmt_num,
    fmt_points,
    fmt_ratio,
    gpu_line,
    is_perf,
    lower_is_better,
    perf_summary,
    truncate,
    unit,
)
from grader.report.standing import lab_standing, standing
from grader.model.results import LabResult, Results, Status, TestResult

VISIBILITIES = ("hidden", "after_due_date", "after_published", "visible")
_OUTPUT_LIMIT = 8_000


def _round(x: float) -> float:
    return round(float(x), 4)


def _test_lines(tests: list[TestResult]) -> list[str]:
    lines = []
    for t in tests:
        if t.status is Status.PASSED:
            continue
        what = category_label(t.category)
        status = {"failed": "FAILED", "skipped": "skipped", "not_run": "not run"}[t.status.value]
        lines.append(f"{status}: {clean_text(t.name)}" + (f" ({what})" if what else ""))
        msg = clean_text(t.message or t.properties.get("skip_reason", "")).strip()
        if msg:
            lines.extend("    " + ln for ln in truncate(msg, 1500).splitlines())
        if t.hint and t.status is Status.FAILED:
            lines.append(f"    Hint: {clean_text(t.hint)}")
    return lines


NOT_GRADED_ENTRY = "Not graded: no GPU. These tests need a GPU and could not run here; this is not a score."


def _ungraded(entry: dict[str, Any]) -> dict[str, Any]:
    """An entry of a lab that could not be graded: no score, no max_score, the reason first."""
    entry.pop("score", None)
    entry.pop("max_score", None)
    entry.pop("status", None)
    output = NOT_GRADED_ENTRY + ("\n" + entry["output"] if entry.get("output") else "")
    entry["output"] = truncate(output, _OUTPUT_LIMIT)
    return entry


def _task_entry(
    lab: LabResult, index: int, task: Any, visibility: str, hidden_visibility: str
) -> dict[str, Any]:
    members = [t for t in lab.tests if t.task == task.id and not is_perf(t)]
    lines = [f"{task.tests_passed} of {task.tests_total} tests passed."] if task.tests_total else []
    lines += [clean_text(n) for n in task.notes]
    lines += _test_lines(members)
    entry: dict[str, Any] = {
        "name": clean_text(f"Lab {lab.number:02d} · {task.title}"),
        "number": f"{lab.number}.{index}",
        "score": _round(task.earned),
        "max_score": _round(task.points),
        "output": truncate("\n".join(lines), _OUTPUT_LIMIT),
        "tags": [f"lab{lab.number:02d}"] + (["challenge"] if task.challenge else []),
        "visibility": gradescope_visibility(members, visibility, hidden_visibility),
    }
    if task.points <= 0:
        entry["status"] = "passed" if task.tests_passed == task.tests_total else "failed"
    return entry


def _perf_entry(lab: LabResult, number: str, test: TestResult, visibility: str) -> dict[str, Any]:
    perf = test.perf
    assert perf is not None
    lines = []
    if summary := perf_summary(perf):
        lines.append(f"Measured: {summary}.")
    if perf.floor_ms and perf.impl is not None and perf.impl.median_ms > 0:
        reached = 100 * perf.floor_ms / perf.impl.median_ms
        lines.append(f"Floor: {fmt_num(perf.floor_ms)} ms; you reach {reached:.0f} % of the floor's speed.")
    if perf.ratio_to_reference is not None:
        lines.append(
            "Speed points follow your speed relative to the reference solution "
            f"({fmt_ratio(perf.ratio_to_reference)})."
        )
    if test.status is not Status.PASSED:
        lines += _test_lines([test])
    return {
        "name": clean_text(
            f"Lab {lab.number:02d} · speed: {test.name}" + (f" ({perf.label})" if perf.label else "")
        ),
        "number": number,
        "score": _round(perf.earned),
        "max_score": _round(perf.points),
        "output": truncate("\n".join(lines), _OUTPUT_LIMIT),
        "tags": [f"lab{lab.number:02d}", "perf"],
        "visibility": visibility,
    }


def render_gradescope(
    results: Results,
    *,
    visibility: str = "visible",
    hidden_visibility: str = "after_published",
    stdout_visibility: str = "hidden",
) -> dict[str, Any]:
    """The results.json object Gradescope reads from /autograder/results/results.json."""
    for v in (visibility, hidden_visibility, stdout_visibility):
        if v not in VISIBILITIES:
            raise ValueError(f"unknown Gradescope visibility {v!r}; one of {', '.join(VISIBILITIES)}")
    run = results.run
    tests: list[dict[str, Any]] = []
    leaderboard: list[dict[str, Any]] = []
    overall = standing(results)
    if overall.graded:
        total = f"{fmt_points(results.score)} / {fmt_points(results.max_score)}"
        head = [f"cudalab, {clean_text(run.mode) or 'student'} mode: {total} points."]
    else:
        head = [
            f"Not graded: {overall.reason}. {overall.waiting} test(s) need a GPU and could not run here, so "
            "there is no grade: the score Gradescope shows is not one. What was built and checked is below."
        ]
    head.append(f"GPU: {gpu_line(run)}")
    if run.toolkit:
        head.append(f"Toolkit: {clean_text(run.toolkit)}")
    for lab in results.labs:
        # The top-level output is for everyone: hidden tests appear only in their own gated entries.
        hidden_tests = [t for t in lab.tests if is_hidden(t)]
        hidden_vis = (
            gradescope_visibility(hidden_tests, visibility, hidden_visibility) if hidden_tests else "hidden"
        )
        public = [t for t in lab.tests if not is_hidden(t)]
        counts = {s: sum(t.status is s for t in public) for s in Status}
        graded = lab_standing(lab).graded
        first = len(tests)  # this lab's entries start here
        head.append(
            f"Lab {lab.number:02d} {clean_text(lab.title)}: "
            + (f"{fmt_points(lab.score)} / {fmt_points(lab.max_score)}" if graded else "not graded (no GPU)")
            + f" ({counts[Status.PASSED]} passed, {counts[Status.FAILED]} failed,"
            f" {counts[Status.SKIPPED]} skipped, {counts[Status.NOT_RUN]} not run)"
        )
        head.extend(
            "    " + clean_text(m)
            for m in lab.messages
            if hidden_vis == visibility or not m.startswith(NOTE_PREFIX)
        )
        for j, build in enumerate(b for b in lab.builds if not b.ok):
            tests.append(
                {
                    "name": clean_text(f"Lab {lab.number:02d} · build {build.target}"),
                    "number": f"{lab.number}.0" + (f".{j}" if j else ""),
                    "status": "failed",
                    "output": truncate(
                        clean_text((build.message + "\n\n" if build.message else "") + build.log),
                        _OUTPUT_LIMIT,
                    ),
                    "tags": [f"lab{lab.number:02d}", "build"],
                    "visibility": hidden_vis if is_hidden_target(build.target) else visibility,
                }
            )
        for i, task in enumerate(lab.tasks, start=1):
            if task.points > 0 or task.tests_total > 0:  # not the rubric's bare holder of speed points
                tests.append(_task_entry(lab, i, task, visibility, hidden_visibility))
        k = len(lab.tasks)
        for test in lab.tests:
            perf = test.perf
            if perf is None:
                continue
            if perf.points > 0:
                k += 1
                shown_to = gradescope_visibility([test], visibility, hidden_visibility)
                tests.append(_perf_entry(lab, f"{lab.number}.{k}", test, shown_to))
            value = perf.rate(perf.impl)
            if value is not None and not is_hidden(test):
                leaderboard.append(
                    {
                        "name": clean_text(f"Lab {lab.number:02d} {test.name} ({unit(perf)})"),
                        "value": float(f"{value:.4g}"),
                        "order": "asc" if lower_is_better(perf) else "desc",
                    }
                )
        # Speed points a task holds that no timed test carries (a perf test skipped because the
        # function was wrong has no measurement): one entry, so the entries still add up.
        lab_missing = sum(t.perf_points for t in lab.tasks) - sum(
            t.perf.points for t in lab.tests if t.perf is not None and t.perf.points > 0
        )
        for task in lab.tasks:
            timed = [
                t.perf for t in lab.tests if t.task == task.id and t.perf is not None and t.perf.points > 0
            ]
            missing = min(task.perf_points - sum(p.points for p in timed), lab_missing)
            if missing > 1e-9:
                lab_missing -= missing
                k += 1
                untimed = [t for t in lab.tests if t.task == task.id and is_perf(t) and t.perf is None]
                lines = ["Not timed, so these speed points are not earned."]
                lines += [clean_text(n) for n in task.notes] + _test_lines(untimed)
                tests.append(
                    {
                        "name": clean_text(f"Lab {lab.number:02d} · speed: {task.title}"),
                        "number": f"{lab.number}.{k}",
                        "score": _round(max(0.0, task.perf_earned - sum(p.earned for p in timed))),
                        "max_score": _round(missing),
                        "output": truncate("\n".join(lines), _OUTPUT_LIMIT),
                        "tags": [f"lab{lab.number:02d}", "perf"],
                        "visibility": gradescope_visibility(untimed, visibility, hidden_visibility),
                    }
                )
        if not graded:  # the build entries keep their "failed": a build is checked without a GPU
            tests[first:] = [e if "build" in e["tags"] else _ungraded(e) for e in tests[first:]]
    unknown = [
        t
        for lab in results.labs
        for t in lab.tests
        if t.task is None and t.perf is None and t.status is not Status.PASSED and not is_hidden(t)
    ]
    if unknown:
        head.append("Other tests that did not pass:")
        head.extend("  " + ln for ln in _test_lines(unknown))
    if not run.gpu_available:
        head.append(
            "No GPU was available, so the tests that need one could not run (marked skipped or not run)."
        )
    head.extend(clean_text(n) for n in run.notes)
    data: dict[str, Any] = {
        "score": _round(results.score),
        "output": truncate("\n".join(head), _OUTPUT_LIMIT),
        "output_format": "text",
        "test_output_format": "text",
        "visibility": visibility,
        "stdout_visibility": stdout_visibility,
        "tests": tests,
        "extra_data": {
            "max_score": _round(results.max_score),
            "graded": overall.graded,
            **({} if overall.graded else {"not_graded": overall.reason, "labs_not_graded": list(overall.labs)}),
            "mode": clean_text(run.mode),
            "commit": clean_text(run.commit),
            "gpu": gpu_line(run),
            "schema_version": results.schema_version,
        },
    }
    if (seconds := elapsed_seconds(run)) is not None:
        data["execution_time"] = int(round(seconds))
    if leaderboard:
        data["leaderboard"] = leaderboard
    return data
