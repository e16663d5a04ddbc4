"""The terminal summary: run line, GPU line, one row per lab (score, passed/failed/skipped/not run),
speed ratios of the perf tests, and what did not pass. A run that could not be graded (no GPU:
grader/report/standing.py) says so first, and its scores read "not graded".

Plain text unless color=True; then rich draws it when it is importable, else ANSI codes do. Words
always carry the meaning (colors only repeat them), and student text is never read as markup.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TextIO

from grader.model.hidden import counts, total_tests
from grader.report.profile_text import profile_lines
from grader.report._format import (
    category_label,
    clean_text,
    first_line,
    fmt_commit,
    fmt_date,
    fmt_num,
    fmt_points,
    fmt_ratio,
    gpu_line,
    labelled,
    percent,
    split_notes,
    step_text,
    unit,
)
from grader.report.failures import group_failures
from grader.report.standing import STATE_COMPILED, STATE_REFUSED, build_label, compile_state, lab_standing, score_text, standing
from grader.model.results import Results, Status

MAX_FAILURES_PER_LAB = 12
_ANSI = {"bold": "1", "red": "31", "green": "32", "yellow": "33", "bold red": "1;31"}
HEADER = ["Lab", "Score", "Passed", "Failed", "Skipped", "Not run"]
_COUNTED = (Status.PASSED, Status.FAILED, Status.SKIPPED, Status.NOT_RUN)


@dataclass
class _Line:
    text: str
    style: str = ""  # "", "bold", "red", "green", "yellow", "bold red"
    mark: str = ""  # a leading marker drawn in `style` while text stays plain ("✗", "○")


@dataclass
class _Row:
    cells: list[str]
    styles: list[str]


@dataclass
class _Summary:
    head: list[_Line] = field(default_factory=list)
    rows: list[_Row] = field(default_factory=list)
    total: _Row | None = None
    perf: list[_Line] = field(default_factory=list)
    problems: list[_Line] = field(default_factory=list)
    setup: list[str] = field(default_factory=list)  # how the grader ran (isolation): last, one line


def _score_style(score: float, max_score: float) -> str:
    pct = percent(score, max_score)
    return "green" if pct >= 90 else ("yellow" if pct >= 50 else "red")


def _summary(results: Results) -> _Summary:
    run = results.run
    s = _Summary()
    head = [f"cudalab · {clean_text(run.mode) or 'student'} mode"]
    if run.started:
        head.append(fmt_date(run.started))
    if run.commit:
        head.append(f"commit {fmt_commit(run.commit)}")
    s.head.append(_Line(" · ".join(head), "bold"))
    overall = standing(results)
    if not overall.graded:  # first, where a score would catch the eye
        s.head.append(_Line(
            f"Not graded: {overall.reason}. {overall.waiting} "
            + ("test needs" if overall.waiting == 1 else "tests need") + " a GPU "
            "and could not run here; what was built and checked without one is below.", "bold yellow"))
    s.head.append(_Line(f"GPU: {gpu_line(run)}", "" if run.gpu_available else "yellow"))
    if run.toolkit:
        s.head.append(_Line(f"Toolkit: {clean_text(run.toolkit)}"))
    shown, setup = split_notes(run.notes)
    s.head += [_Line(f"Note: {clean_text(note)}", "yellow") for note in shown]
    s.setup = [clean_text(note) for note in setup]

    for lab in results.labs:
        build = build_label(lab)
        # the marker goes first, so that cutting a long title never cuts it
        name = f"{lab.number:02d} " + (f"[{build}] " if build != "built" else "") + clean_text(lab.title)
        if len(name) > 52:
            name = name[:51] + "…"
        c = counts(lab.tests)
        graded = lab_standing(lab)
        s.rows.append(
            _Row(
                [
                    name,
                    score_text(fmt_points(lab.score), fmt_points(lab.max_score), graded),
                    *(str(c[k]) for k in _COUNTED),
                ],
                [
                    "red" if build != "built" else "",
                    (_score_style(lab.score, lab.max_score) if graded.graded else "yellow") + " bold",
                    "",
                    "bold red" if c[Status.FAILED] else "",
                    "",
                    "yellow" if c[Status.NOT_RUN] else "",
                ],
            )
        )
    if len(results.labs) != 1:
        every = counts(t for lab in results.labs for t in lab.tests)
        s.total = _Row(
            [
                "Total",
                score_text(fmt_points(results.score), fmt_points(results.max_score), overall),
                *(str(every[k]) for k in _COUNTED),
            ],
            ["bold", "bold", "", "", "", ""],
        )

    for lab in results.labs:
        for t in lab.tests:
            perf = t.perf
            if perf is None:
                continue
            value = perf.rate(perf.impl)
            bits = [f"{fmt_num(value)} {unit(perf)}" if value is not None else "not measured"]
            if run.mode != "solution" and perf.ratio_to_reference is not None:
                bits.append(f"{fmt_ratio(perf.ratio_to_reference)} reference")
            if perf.ratio_to_baseline is not None:
                bits.append(f"{fmt_ratio(perf.ratio_to_baseline)} {perf.baseline}")
            if perf.points:
                bits.append(f"{fmt_points(perf.earned)}/{fmt_points(perf.points)} pts")
            s.perf.append(_Line(f"  {lab.number:02d}  {clean_text(t.name)}: " + " · ".join(bits)))
        s.perf += [_Line(text) for text in profile_lines(lab)]

    for lab in results.labs:
        nn = f"  {lab.number:02d}  "
        state, why = compile_state(lab)
        if state == STATE_REFUSED and all(b.ok for b in lab.builds):  # first: why nothing of the file ran
            s.problems.append(_Line(first_line(clean_text(why), 300) or "refused", "bold red", nn + "✗"))
        for b in lab.builds:
            if not b.ok:
                msg = first_line(clean_text(b.message or b.log)) or "build failed"
                s.problems.append(_Line(f"build {clean_text(b.target)}: {msg}", "bold red", nn + "✗"))
        for message in lab.messages:
            if message.startswith("warning:"):
                s.problems.append(_Line(clean_text(message.removeprefix("warning:").strip()), "yellow", nn + "!"))
        groups = group_failures(lab)
        for g in groups[:MAX_FAILURES_PER_LAB]:
            also = f" ({g.also_text})" if g.also_text else ""
            s.problems.append(_Line(f"{clean_text(g.test.name)} — {g.what}{also}", "bold red", nn + "✗"))
            if g.test.hint:
                s.problems.append(_Line(f"{nn}    {first_line(clean_text(g.test.hint), 600)}"))
        if len(groups) > MAX_FAILURES_PER_LAB:
            s.problems.append(_Line(f"{nn}… and {len(groups) - MAX_FAILURES_PER_LAB} more ways of failing"))
        for task in lab.tasks:  # a big task's steps, once one fails: which step to work on (once it ran)
            if state == STATE_COMPILED and any(not c.ok for c in task.checkpoints):
                steps = " · ".join(step_text(c) for c in task.checkpoints)
                s.problems.append(_Line(f"{nn}    {task.id} steps: {clean_text(steps)}"))
        if lab.answers is not None and lab.answers.checked and lab.answers.right < len(lab.answers.answers):
            a = lab.answers
            wrong = [x.id for x in a.answers if x.status in ("wrong", "unreadable")]
            blank = [x.id for x in a.answers if x.status == "blank"]
            text = f"answers.md: {a.right} of {len(a.answers)} numbers right" + (
                f"; check {', '.join(wrong[:6])}" if wrong else "") + (f"; {len(blank)} blank" if blank else "")
            s.problems.append(_Line(text, "yellow", nn + "?"))
        not_run = [t for t in lab.tests if t.status is Status.NOT_RUN]
        if not_run:
            reason = first_line(clean_text(not_run[0].message), 100) or category_label(not_run[0].category)
            n = total_tests(not_run)
            text = f"{n} test{'s' if n != 1 else ''} not run" + (f": {reason}" if reason else "")
            s.problems.append(_Line(text, "yellow", nn + "○"))
    return s


def render_console(results: Results, stream: TextIO, color: bool = False) -> None:
    """Write the run's summary to stream."""
    summary = _summary(results)
    if color and _render_rich(summary, stream):
        return
    text = "\n".join(_plain_lines(summary, color)) + "\n"
    if not _can_encode(stream, text):
        for a, b in (("✗", "x"), ("·", "-"), ("×", "x"), ("—", "-"), ("…", "..."), ("○", "o")):
            text = text.replace(a, b)
        text = text.encode("ascii", "replace").decode("ascii")
    stream.write(text)
    stream.flush()


def _can_encode(stream: TextIO, text: str) -> bool:
    try:
        text.encode(getattr(stream, "encoding", None) or "utf-8")
        return True
    except (LookupError, UnicodeEncodeError):
        return False


def _plain_lines(s: _Summary, color: bool) -> list[str]:
    def paint(text: str, style: str) -> str:
        codes = ";".join(_ANSI[part] for part in style.split() if part in _ANSI)
        return f"\x1b[{codes}m{text}\x1b[0m" if color and codes and text else text

    out = [paint(line.text, line.style) for line in s.head] + [""]
    every = s.rows + ([s.total] if s.total else [])
    widths = [max(len(HEADER[i]), *(len(r.cells[i]) for r in every)) for i in range(len(HEADER))]

    def row(cells: list[str], styles: list[str]) -> str:
        padded = [c.rjust(widths[i]) if i else c.ljust(widths[i]) for i, c in enumerate(cells)]
        return "  ".join(paint(p, st) for p, st in zip(padded, styles, strict=True)).rstrip()

    out.append(row(HEADER, ["bold"] * len(HEADER)))
    out += [row(r.cells, r.styles) for r in s.rows]
    if s.total:
        out.append("-" * (sum(widths) + 2 * (len(widths) - 1)))
        out.append(row(s.total.cells, s.total.styles))
    if s.perf:
        out += ["", paint("Speed (your time vs others: above 1× you are faster)", "bold")]
        out += [line.text for line in s.perf]
    if s.problems:
        out += ["", paint("Problems", "bold")]
        out += [
            (paint(line.mark, line.style) + " " + line.text) if line.mark else line.text
            for line in s.problems
        ]
    if s.setup:
        out += ["", "How the grader ran: " + "; ".join(s.setup)]
    return out


def _render_rich(s: _Summary, stream: TextIO) -> bool:
    try:
        from rich import box
        from rich.console import Console
        from rich.table import Table
        from rich.text import Text
    except ImportError:
        return False
    console = Console(file=stream, force_terminal=True, highlight=False, emoji=False, markup=False)
    for line in s.head:
        console.print(Text(line.text, style=line.style or ""), soft_wrap=True)
    table = Table(box=box.SIMPLE_HEAD, show_footer=s.total is not None, pad_edge=False)
    every = s.rows + ([s.total] if s.total else [])
    widest = [max(len(name), *(len(r.cells[i]) for r in every)) for i, name in enumerate(HEADER)]
    room = console.width - sum(widest[1:]) - 3 * len(HEADER)  # numbers never squeezed; names may be cut
    for i, name in enumerate(HEADER):
        footer = Text(s.total.cells[i], style=s.total.styles[i]) if s.total else ""
        table.add_column(
            name,
            justify="left" if i == 0 else "right",
            footer=footer,
            no_wrap=True,
            overflow="ellipsis",
            min_width=widest[i] if i else None,
            max_width=max(16, room) if i == 0 else None,
        )
    for r in s.rows:
        table.add_row(*(Text(c, style=st) for c, st in zip(r.cells, r.styles, strict=True)))
    console.print(table)
    if s.perf:
        console.print(Text("Speed (your time vs others: above 1× you are faster)", style="bold"))
        for line in s.perf:
            console.print(Text(line.text), soft_wrap=True)
    if s.problems:
        console.print()
        console.print(Text("Problems", style="bold"))
        for line in s.problems:
            text = Text()
            if line.mark:
                text.append(line.mark, style=line.style)
                text.append(" ")
            text.append(line.text)
            console.print(text, soft_wrap=True)
    if s.setup:
        console.print()
        console.print(Text("How the grader ran: " + "; ".join(s.setup), style="dim"), soft_wrap=True)
    return True

