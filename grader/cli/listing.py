"""Plain-text output of the verbs that are not reports: `list`, `build` and `test`.
(The graded summary and every report file come from grader/report/.)"""

from __future__ import annotations

from grader.model.hidden import counts, is_summary, total_tests
from grader.model.labs import Lab
from grader.build.targets import has_solution
from grader.model.results import BuildResult, Category, Results, Status, TestResult
from grader.model.text import first_line, shorten

_MARK = {Status.PASSED: "PASS", Status.FAILED: "FAIL", Status.SKIPPED: "SKIP", Status.NOT_RUN: "NOT RUN"}


def _points(x: float) -> str:
    return f"{x:g}"


def format_labs(labs: list[Lab]) -> str:
    if not labs:
        return "no labs found"
    rows = [(f"{lab.number:02d}", lab.slug, lab.title, f"{_points(lab.total_points)} pts",
             "" if has_solution(lab) else "(no solution)") for lab in labs]
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    return "\n".join(
        "  ".join(cell.ljust(widths[i]) if i < 4 else cell for i, cell in enumerate(row)).rstrip() for row in rows
    )


def format_builds(builds: list[BuildResult], log_lines: int = 40) -> str:
    lines = []
    for b in builds:
        lines.append(f"{'ok' if b.ok else 'FAILED':>6}  {b.target}  ({b.seconds:.1f} s)" + ("" if b.ok else f"  {b.message}"))
        if not b.ok and b.log:
            tail = [ln for ln in b.log.splitlines() if ln.strip()][:log_lines]
            lines += ["        | " + ln for ln in tail]
    return "\n".join(lines)


def _test_line(t: TestResult, details: bool) -> list[str]:
    line = f"  {_MARK[t.status]:<7} {t.name}"
    if t.status is not Status.PASSED and t.message:
        line += f"  — {shorten(first_line(t.message), 160)}"
    out = [line]
    if details and t.status in (Status.FAILED, Status.NOT_RUN):
        out += ["            " + ln for ln in t.message.splitlines()[1:12]]
        if t.hint:
            out.append(f"            hint: {t.hint}")
    return out


def format_tests(results: Results, details: bool = True) -> str:
    """The `test` verb's output. Give it hidden.redact(results): it is student-facing, and a concealed
    hidden group then shows as its summary row while the counts still count every test in it."""
    lines: list[str] = []
    for lab in results.labs:
        c = counts(lab.tests)
        lines.append(f"lab {lab.name}: {c[Status.PASSED]} passed, {c[Status.FAILED]} failed, "
                     f"{c[Status.SKIPPED]} skipped, {c[Status.NOT_RUN]} not run")
        for msg in lab.messages:
            lines.append(f"  note: {msg}")
        no_gpu = [t for t in lab.tests if t.category is Category.NO_GPU]
        for t in lab.tests:
            if t.category is not Category.NO_GPU:
                lines += _test_line(t, details)
        if no_gpu:
            why = next((t.message for t in no_gpu if not is_summary(t)), no_gpu[0].message)
            lines.append(f"  {_MARK[Status.SKIPPED]:<7} {total_tests(no_gpu)} test(s) that need a GPU: {why}")
    if not results.run.gpu_available:
        lines.append(f"GPU: none ({results.run.gpu_reason}) — GPU tests were skipped")
    count = counts(t for lab in results.labs for t in lab.tests)
    lines.append(
        f"{count[Status.PASSED]} passed, {count[Status.FAILED]} failed, {count[Status.SKIPPED]} skipped"
        + (f", {count[Status.NOT_RUN]} not run" if count[Status.NOT_RUN] else "")
    )
    return "\n".join(lines)
