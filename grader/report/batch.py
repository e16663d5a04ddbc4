"""Class-level reports for instructors: one page over a whole batch of submissions and a gradebook CSV.

    render_class_summary(outcomes)   self-contained HTML: score distribution, per-lab statistics, the
                                     tests most students fail, speed leaderboards, and the roster
    render_gradebook_csv(outcomes)   one row per student, wide: total, per-lab and per-task scores
    write_batch_reports(outcomes, out_dir)

A StudentOutcome whose submission could not be graded (results None) is never dropped: it is counted,
listed with its error, and gets a gradebook row with empty scores. Neither is one without a score
(not graded: no GPU; a compile check): the page says so first, and only graded outcomes enter the
statistics, pass rates and leaderboards (grader/report/outcomes.py). Everything is read from the result
model; the page is built like the single-run report (html.environment(), the same style partial, svg
helpers, _format helpers) and all text is escaped.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import quote

from markupsafe import Markup

from grader.report import svg
from grader.report._format import (
    STATUS_LABEL,
    category_label,
    clean_text,
    first_line,
    fmt_date,
    fmt_num,
    fmt_points,
    fmt_ratio,
    fmt_seconds,
    gpu_device,
    gpu_line,
    gpu_name,
    is_perf,
    lower_is_better,
    parse_time,
    percent,
    split_test_name,
    truncate,
    unit,
)
from grader.report.class_gradebook import gradebook_columns, render_gradebook_csv
from grader.report.html import environment
from grader.report.lms import write_lms_exports
from grader.report.outcomes import (
    LabColumn,
    StudentOutcome,
    batch_labs,
    graded_only,
)
from grader.report.outcomes import build_failed as _build_failed
from grader.report.outcomes import by_name as _by_name
from grader.report.outcomes import roster_order as _sorted
from grader.report.standing import (
    BROKEN,
    COMPILED,
    GRADED,
    MISSING,
    NOT_COMPILED,
    NOT_GRADED_NO_GPU,
    STATE_COMPILED,
    compile_state,
)
from grader.results import Status

FILES = {"html": "class-summary.html", "csv": "gradebook.csv"}
_ERROR_LIMIT = 4_000
_SHOWN_TESTS = 12  # per lab, the tests with the lowest pass rates shown open; the rest fold


# --- statistics ---------------------------------------------------------------------------------------


def _stats(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    return {
        "n": len(values),
        "mean": statistics.fmean(values),
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "stdev": statistics.pstdev(values) if len(values) > 1 else 0.0,
    }


def _stat(value: float | None) -> str:
    """A class statistic: one decimal at most, 72.7 · 90 · 0."""
    if value is None or not math.isfinite(value):
        return "–"
    text = f"{value:,.1f}"
    return text.removesuffix(".0")


def _grade(pct: float) -> str:
    return "good" if pct >= 90 else ("mid" if pct >= 50 else "low")


def histogram(
    values: list[float], top: float, *, unit_label: str, title: str, bins: int = 10, width: float = 760
) -> Markup:
    """Vertical bars: how many scores fall in each of `bins` equal ranges of 0..top, with the mean and
    the median drawn as labelled lines. A score of exactly `top` counts in the last range."""
    top = top if top > 0 else max(values, default=1.0) or 1.0
    step = top / bins
    counts = [0] * bins
    for v in values:
        counts[min(bins - 1, max(0, int(v / step + 1e-9)))] += 1
    left, right, head, foot = 44.0, 16.0, 48.0, 40.0
    plot_h = 170.0
    plot_w = width - left - right
    height = head + plot_h + foot
    ticks = [t for t in svg.nice_ticks(max(counts, default=0) or 1, 4) if float(t).is_integer()]
    cmax = ticks[-1] or 1

    def x(v: float) -> float:
        return left + plot_w * max(0.0, min(v, top)) / top

    def y(c: float) -> float:
        return head + plot_h * (1 - c / cmax)

    ranges = [(i * step, (i + 1) * step) for i in range(bins)]
    desc = f"{len(values)} scores in {bins} ranges of {fmt_num(step)} {unit_label}: " + "; ".join(
        f"{svg.fmt_tick(lo)}–{svg.fmt_tick(hi)}: {c}" for (lo, hi), c in zip(ranges, counts, strict=True)
    )
    st = _stats(values)
    if st:
        desc += f". Mean {_stat(st['mean'])}, median {_stat(st['median'])}."
    chart = svg.Svg(width, height, title, desc, cls="chart hist")
    chart.text(4, head - 8, "students", cls="axis-title")
    for t in ticks:
        chart.el("line", x1=left, x2=left + plot_w, y1=y(t), y2=y(t), class_="grid")
        chart.text(left - 6, y(t) + 4, svg.fmt_tick(t), cls="tick", anchor="end")
    gap = min(4.0, plot_w / bins * 0.12)
    for (lo, hi), c in zip(ranges, counts, strict=True):
        x0, x1 = x(lo) + gap / 2, x(hi) - gap / 2
        last = hi >= top - 1e-9
        what = f"{svg.fmt_tick(lo)}–{svg.fmt_tick(hi)} {unit_label}{'' if last else ' (upper end excluded)'}"
        who = f"{c} student{'s' if c != 1 else ''}"
        if c:
            chart.el(
                "rect",
                x=x0,
                y=y(c),
                width=max(1.0, x1 - x0),
                height=plot_h - (y(c) - head),
                rx=2,
                class_="bar b-hist",
                title=f"{what}: {who}",
            )
            chart.text((x0 + x1) / 2, y(c) - 4, str(c), cls="val hist-count", anchor="middle")
        else:
            chart.el(
                "rect",
                x=x0,
                y=head,
                width=max(1.0, x1 - x0),
                height=plot_h,
                class_="hit",
                title=f"{what}: {who}",
            )
    chart.el("line", x1=left, x2=left + plot_w, y1=head + plot_h, y2=head + plot_h, class_="axis")
    for i in range(bins + 1):
        chart.text(
            x(i * step), head + plot_h + 14, svg.fmt_tick(round(i * step, 6)), cls="tick", anchor="middle"
        )
    chart.text(left + plot_w, head + plot_h + 30, f"total score ({unit_label})", cls="tick", anchor="end")
    if st:
        # two label rows above the plot, so the labels never collide however close the values are
        for row, (name, value, cls) in enumerate(
            (("mean", st["mean"], "mark-mean"), ("median", st["median"], "mark-median"))
        ):
            mx = x(value)
            ly = 12.0 + 13.0 * row
            chart.el(
                "line",
                x1=mx,
                x2=mx,
                y1=ly + 3,
                y2=head + plot_h,
                class_=f"mark {cls}",
                title=f"{name}: {_stat(value)} {unit_label}",
            )
            on_left = mx > left + plot_w - 110
            chart.text(
                mx + (-4 if on_left else 4),
                ly + 4,
                f"{name} {_stat(value)}",
                cls=f"mark-label {cls}",
                anchor="end" if on_left else "start",
            )
    return chart.markup()


def strip(values: list[tuple[str, float]], top: float, title: str, width: float = 220) -> Markup:
    """One lab's scores as ticks on a 0..top line, and the mean as a triangle: the spread at a glance."""
    left, right, height = 6.0, 6.0, 26.0
    plot_w = width - left - right
    top = top if top > 0 else max((v for _, v in values), default=1.0) or 1.0

    def x(v: float) -> float:
        return left + plot_w * max(0.0, min(v, top)) / top

    mean = statistics.fmean([v for _, v in values]) if values else None
    desc = ", ".join(f"{who}: {fmt_points(v)}" for who, v in values)
    chart = svg.Svg(width, height, title, desc, cls="chart strip")
    chart.el("line", x1=left, x2=left + plot_w, y1=14.0, y2=14.0, class_="axis")
    for who, v in values:
        pct = percent(v, top)
        chart.el(
            "rect",
            x=x(v) - 1.5,
            y=6.0,
            width=3.0,
            height=16.0,
            rx=1,
            class_=f"tick-{_grade(pct)}",
            title=f"{who}: {fmt_points(v)} / {fmt_points(top)}",
        )
    if mean is not None:
        mx = x(mean)
        chart.el(
            "path",
            d=f"M{mx - 4:.1f},0 L{mx + 4:.1f},0 L{mx:.1f},5 Z",
            class_="mark-mean-fill",
            title=f"mean {fmt_num(mean)}",
        )
    return chart.markup()


# --- the class summary view model -------------------------------------------------------------------


def _link(report_dir: str, page: str = "report.html") -> str:
    """A relative URL to a file in the student's folder (the folder itself for page=""); quoted, so no
    name can become a scheme, a query or markup."""
    if not report_dir:
        return ""
    path = report_dir.replace("\\", "/").rstrip("/")
    return quote(f"{path}/{page}", safe="/")


def _students_line(outcomes: list[StudentOutcome]) -> str:
    """'40 (35 graded, 5 broken)', with every status that has a row."""
    count = Counter(o.status for o in outcomes)
    shown = [GRADED] if not (count[COMPILED] or count[NOT_COMPILED]) or count[GRADED] else []
    shown += [s for s in (NOT_GRADED_NO_GPU, COMPILED, NOT_COMPILED) if count[s]] + [BROKEN]
    shown += [MISSING] if count[MISSING] else []
    return f"{len(outcomes)} (" + ", ".join(f"{count[s]} {s}" for s in shown) + ")"


def _header(outcomes: list[StudentOutcome], labs: list[LabColumn]) -> dict[str, Any]:
    graded = [o.results for o in outcomes if o.results is not None]  # every run, for its facts
    gpus = Counter(gpu_name(r.run) for r in graded if r.run.gpu_available)
    with_gpu = next((r for r in graded if r.run.gpu_available), None)
    toolkit = next((r.run.toolkit for r in graded if r.run.toolkit), "")
    parsed = [t for t in (parse_time(r.run.started) for r in graded) if t is not None]
    aware = sorted(t for t in parsed if t.tzinfo is not None)
    times = aware or sorted(t for t in parsed if t.tzinfo is None)  # naive and aware times do not compare
    if times:
        first, last = fmt_date(times[0].isoformat()), fmt_date(times[-1].isoformat())
        date = first if first == last else f"{first} – {last}"
    else:
        date = fmt_date(datetime.now(timezone.utc).isoformat(timespec="seconds"))
    no_gpu = sum(1 for o in outcomes if o.status == NOT_GRADED_NO_GPU)
    total_seconds = sum(o.seconds for o in outcomes)
    meta = [
        ("labs", ", ".join(f"{lab.number:02d} · {lab.title}" for lab in labs) or "none"),
        ("students", _students_line(outcomes)),
        ("GPU", gpu_line(with_gpu.run) if with_gpu else "none: no submission was graded on a GPU"),
        ("toolkit", toolkit),
        ("date", date),
        ("grading time", fmt_seconds(total_seconds)),
    ]
    if len(gpus) > 1:
        meta.insert(
            3, ("GPUs seen", ", ".join(f"{name or 'unknown'} ({n})" for name, n in gpus.most_common()))
        )
    devices = Counter(d for d in (gpu_device(r.run) for r in graded) if d)  # a batch with --gpus
    if devices:
        meta.insert(3, ("GPUs used", ", ".join(f"{d}: {n} student(s)" for d, n in sorted(devices.items()))))
    modes = {r.run.mode for r in graded if r.run.mode and r.run.mode != "student"}
    if modes:
        meta.append(("mode", ", ".join(sorted(modes))))
    reason = next((clean_text(r.run.gpu_reason) for r in graded if not r.run.gpu_available and r.run.gpu_reason), "")
    return {"meta": [(k, v) for k, v in meta if v], "no_gpu": no_gpu, "gpus": len(gpus), "gpu_reason": reason}


def _distribution(outcomes: list[StudentOutcome], left_out: int) -> dict[str, Any]:
    """The scores of the graded outcomes; left_out: the submissions without a score."""
    graded = [o.results for o in outcomes if o.results is not None]
    maxima = {round(r.max_score, 6) for r in graded}
    same = len(maxima) == 1 and next(iter(maxima)) > 0
    if same:
        top = next(iter(maxima))
        values = [r.score for r in graded]
        unit_label = "points"
    else:  # different labs per submission: compare percentages
        top = 100.0
        values = [percent(r.score, r.max_score) for r in graded]
        unit_label = "%"
    st = _stats(values)
    pcts = [percent(r.score, r.max_score) for r in graded]
    return {
        "chart": histogram(values, top, unit_label=unit_label, title="Distribution of total scores")
        if graded
        else None,
        "unit": unit_label,
        "top": fmt_points(top),
        "n": len(values),
        "left_out": left_out,
        "mean": _stat(st["mean"]) if st else "–",
        "median": _stat(st["median"]) if st else "–",
        "min": _stat(st["min"]) if st else "–",
        "max": _stat(st["max"]) if st else "–",
        "stdev": _stat(st["stdev"]) if st else "–",
        "mean_pct": f"{statistics.fmean(pcts):.1f}" if pcts else "0",
        "mean_pct_text": f"{statistics.fmean(pcts):.0f} %" if pcts else "–",
        "grade": _grade(statistics.fmean(pcts)) if pcts else "none",
        "full": sum(1 for r in graded if r.max_score > 0 and r.score >= r.max_score - 1e-9),
        "zero": sum(1 for r in graded if r.score <= 0),
    }


def _lab_stats(outcomes: list[StudentOutcome], labs: list[LabColumn]) -> list[dict[str, Any]]:
    rows = []
    for col in labs:
        mine = [(o.student, _by_name(o.results).get(col.name)) for o in outcomes if o.results is not None]
        results = [(who, lab) for who, lab in mine if lab is not None]
        scores = [lab.score for _, lab in results]
        st = _stats(scores)
        mean_pct = percent(st["mean"], col.max_score) if st else 0.0
        tasks = []
        for tid, title in col.tasks:
            got = [
                (t.earned + t.perf_earned, t.points + t.perf_points)
                for _, lab in results
                for t in lab.tasks
                if t.id == tid
            ]
            if not got:
                continue
            earned = statistics.fmean(e for e, _ in got)
            top = max(p for _, p in got)
            full = sum(1 for e, p in got if p > 0 and e >= p - 1e-9)
            tasks.append(
                {
                    "id": tid,
                    "title": title,
                    "mean": _stat(earned),
                    "points": fmt_points(top),
                    "pct": f"{percent(earned, top):.1f}",
                    "grade": _grade(percent(earned, top)) if top > 0 else "none",
                    "full": full,
                    "n": len(got),
                }
            )
        rows.append(
            {
                "anchor": f"lab-{col.number:02d}",
                "number": f"{col.number:02d}",
                "name": col.name,
                "title": col.title,
                "max_score": fmt_points(col.max_score),
                "n": len(results),
                "missing": len(mine) - len(results),
                "mean": _stat(st["mean"]) if st else "–",
                "median": _stat(st["median"]) if st else "–",
                "min": fmt_points(st["min"]) if st else "–",
                "max": fmt_points(st["max"]) if st else "–",
                "stdev": _stat(st["stdev"]) if st else "–",
                "pct": f"{mean_pct:.1f}",
                "grade": _grade(mean_pct) if st else "none",
                "full": sum(1 for s in scores if col.max_score > 0 and s >= col.max_score - 1e-9),
                "build_failed": sum(1 for _, lab in results if _build_failed(lab)),
                "strip": strip(
                    [(clean_text(w), lab.score) for w, lab in results],
                    col.max_score,
                    f"Lab {col.number:02d} scores",
                )
                if results
                else None,
                "tasks": tasks,
            }
        )
    return rows


def _pass_rates(outcomes: list[StudentOutcome], labs: list[LabColumn]) -> list[dict[str, Any]]:
    """Per lab: every test with how many of the students who ran it passed it, lowest rate first."""
    groups = []
    for col in labs:
        seen: dict[str, dict[str, Any]] = {}
        for o in outcomes:
            lab = _by_name(o.results).get(col.name)
            if lab is None:
                continue
            for t in lab.tests:
                row = seen.setdefault(
                    t.name,
                    {
                        "name": t.name,
                        "kind": "perf" if is_perf(t) else "correctness",
                        "binary": t.binary,
                        "task": t.task or "",
                        "counts": Counter(),
                        "why": Counter(),
                    },
                )
                row["counts"][t.status] += 1
                if t.status is not Status.PASSED:
                    untimed = is_perf(t) and t.status is Status.SKIPPED and t.category is None
                    row["why"][
                        "not timed" if untimed else (category_label(t.category) or STATUS_LABEL[t.status])
                    ] += 1
        rows = []
        for r in seen.values():
            c: Counter[Status] = r["counts"]
            total = sum(c.values())
            rate = c[Status.PASSED] / total if total else 0.0
            suite, short = split_test_name(r["name"])
            rows.append(
                {
                    "name": r["name"],
                    "suite": suite,
                    "short": short,
                    "kind": r["kind"],
                    "hidden": r["binary"] == "hidden",
                    "task": r["task"],
                    "rate": rate,
                    "pct": f"{100 * rate:.1f}",
                    "pct_text": f"{100 * rate:.0f} %",
                    "grade": _grade(100 * rate),
                    "passed": c[Status.PASSED],
                    "failed": c[Status.FAILED],
                    "skipped": c[Status.SKIPPED],
                    "not_run": c[Status.NOT_RUN],
                    "total": total,
                    "why": ", ".join(f"{label} ×{n}" for label, n in r["why"].most_common(3)),
                }
            )
        # correctness first: a timed test skips itself when the function is wrong, so its rate repeats theirs
        rows.sort(key=lambda r: (r["kind"] == "perf", r["rate"], -r["failed"], r["name"]))
        trouble = [r for r in rows if r["rate"] < 1.0]
        groups.append(
            {
                "anchor": f"tests-{col.number:02d}",
                "number": f"{col.number:02d}",
                "title": col.title,
                "rows": trouble[:_SHOWN_TESTS],
                "more": trouble[_SHOWN_TESTS:],
                "trouble": len(trouble),
                "all_passed": [r for r in rows if r["rate"] >= 1.0],
                "total": len(rows),
            }
        )
    return groups


def _leaderboards(outcomes: list[StudentOutcome], labs: list[LabColumn]) -> list[dict[str, Any]]:
    """Per perf test that carries speed points: the students whose test passed, fastest first. Within
    one GPU the measured value ranks them; across several GPUs the ratio to the reference (timed side
    by side in each student's own run) does, since raw numbers from different GPUs do not compare."""
    boards = []
    for col in labs:
        tests: dict[str, dict[str, Any]] = {}
        for o in outcomes:
            lab = _by_name(o.results).get(col.name)
            if lab is None or o.results is None:
                continue
            for t in lab.tests:
                board = tests.setdefault(t.name, {"points": 0.0, "entries": [], "unranked": 0, "perf": None})
                if t.perf is not None:
                    board["points"] = max(board["points"], t.perf.points)
                    board["perf"] = board["perf"] or t.perf
                value = t.perf.rate(t.perf.impl) if t.perf is not None else None
                if t.status is Status.PASSED and t.perf is not None and value is not None:
                    board["entries"].append((o, t, value, gpu_name(o.results.run)))
                elif is_perf(t):
                    board["unranked"] += 1
        for name, board in tests.items():
            perf0 = board["perf"]
            if board["points"] <= 0 or perf0 is None:
                continue
            entries = board["entries"]
            lower = lower_is_better(perf0)
            u = unit(perf0)
            by_ratio = len({g for *_, g in entries}) > 1
            if by_ratio:
                entries.sort(key=lambda e: (-(e[1].perf.ratio_to_reference or 0.0), clean_text(e[0].student)))
            else:
                entries.sort(key=lambda e: ((e[2] if lower else -e[2]), clean_text(e[0].student)))
            best = entries[0][2] if entries else None
            refs = [v for v in (e[1].perf.rate(e[1].perf.reference) for e in entries) if v is not None]
            rows = []
            for rank, (o, t, value, gpu) in enumerate(entries, start=1):
                perf = t.perf
                rel = (best / value if lower else value / best) if best and value else 0.0
                rows.append(
                    {
                        "rank": rank,
                        "student": o.student,
                        "value": f"{fmt_num(value)} {u}",
                        "ratio": fmt_ratio(perf.ratio_to_reference),
                        "faster": (perf.ratio_to_reference or 0) >= 1.0,
                        "baseline": fmt_ratio(perf.ratio_to_baseline) if perf.baseline else "",
                        "points": f"{fmt_points(perf.earned)} / {fmt_points(perf.points)}",
                        "pct": f"{100 * rel:.1f}",
                        "gpu": gpu,
                        "link": _link(o.report_dir),
                    }
                )
            boards.append(
                {
                    "lab": f"{col.number:02d}",
                    "name": name,
                    "label": perf0.label,
                    "unit": u,
                    "better": "lower is better" if lower else "higher is better",
                    "baseline": perf0.baseline or "",
                    "by_ratio": by_ratio,
                    "reference": f"{fmt_num(statistics.median(refs))} {u}" if refs else "",
                    "points": fmt_points(board["points"]),
                    "rows": rows,
                    "unranked": board["unranked"],
                }
            )
    return boards


def _roster(outcomes: list[StudentOutcome], labs: list[LabColumn]) -> list[dict[str, Any]]:
    rows = []
    for o in _sorted(outcomes):
        r = o.results
        mine = _by_name(r)
        cells = []
        status = o.status
        for col in labs:
            lab = mine.get(col.name)
            if lab is None:
                cells.append({"text": "0" if status == MISSING else "–", "grade": "low" if status == MISSING else "none",
                              "title": "no submission" if status == MISSING else "not graded", "build_failed": False})
                continue
            if status in (COMPILED, NOT_COMPILED):
                state, why = compile_state(lab)
                cells.append({"text": state, "grade": "good" if state == STATE_COMPILED else "low",
                              "title": why or state, "build_failed": False})
                continue
            if status == NOT_GRADED_NO_GPU:
                cells.append({"text": "–", "grade": "none", "title": "not graded: no GPU",
                              "build_failed": _build_failed(lab)})
                continue
            pct = percent(lab.score, lab.max_score)
            late = lab.late
            cells.append(
                {
                    "text": fmt_points(lab.score),
                    "grade": _grade(pct) if lab.max_score > 0 else "none",
                    "title": f"{fmt_points(lab.score)} / {fmt_points(lab.max_score)}: {lab.passed} passed, "
                    f"{lab.failed} failed, {lab.skipped} skipped, {lab.not_run} not run"
                    + (f"; raw {fmt_points(late.raw_score)}, late penalty {fmt_points(late.penalty)}, "
                       f"{late.late_days_used} late day(s) used; submitted {late.submitted or 'at an unknown time'}"
                       f"{' (' + late.source + ')' if late.source else ''}" if late is not None else ""),
                    "build_failed": _build_failed(lab),
                    "late": (f"−{fmt_points(late.penalty)} late" if late is not None and late.penalty else "")
                    + (f"{' · ' if late.penalty else ''}{late.late_days_used} late day"
                       f"{'s' if late.late_days_used != 1 else ''}"
                       if late is not None and late.late_days_used else ""),
                }
            )
        scored = status == GRADED and r is not None
        pct = percent(r.score, r.max_score) if scored and r is not None else 0.0
        rows.append(
            {
                "student": o.student,
                "name": o.name,
                "broken": status == BROKEN,
                "status": status,
                "scored": scored,
                "score": fmt_points(r.score) if scored and r is not None else "",
                "max_score": fmt_points(r.max_score) if scored and r is not None else "",
                "pct": f"{pct:.1f}",
                "grade": _grade(pct) if scored and r is not None and r.max_score > 0 else "none",
                "cells": cells,
                "error": truncate(clean_text(o.error), _ERROR_LIMIT) if o.error else "",
                "error_line": first_line(clean_text(o.error), 140) if o.error else "",
                "error_more": bool(o.error)
                and clean_text(o.error).strip() != first_line(clean_text(o.error), 140),
                "no_gpu": status == NOT_GRADED_NO_GPU,
                "seconds": fmt_seconds(o.seconds),
                "link": _link(o.report_dir, "" if r is None else "report.html"),
                "link_text": "folder" if r is None else "report",
            }
        )
    return rows


def _late_summary(outcomes: list[StudentOutcome]) -> dict[str, Any] | None:
    """With a course file: how many labs were late, penalized, and the late days spent."""
    records = [lab.late for o in outcomes if o.status == GRADED and o.results is not None
               for lab in o.results.labs if lab.late is not None]
    if not records:
        return None
    return {
        "late": sum(1 for r in records if r.late_seconds > 0),
        "penalized": sum(1 for r in records if r.penalty > 0),
        "points": fmt_points(sum(r.penalty for r in records)),
        "days": sum(r.late_days_used for r in records),
        "unknown": sum(1 for r in records if r.due and not r.submitted),
        "sources": ", ".join(f"{s} {n}" for s, n in sorted(Counter(r.source or "unknown" for r in records).items())),
    }


def class_view(
    outcomes: list[StudentOutcome], title: str = "", unmatched: list[tuple[str, str]] | None = None
) -> dict[str, Any]:
    """The class summary's view model. Statistics, pass rates and leaderboards count the graded
    outcomes only; the roster lists everyone with their status. unmatched: (submission, why) of the
    submissions a roster matched to nobody (or to two students), which were not graded."""
    labs = batch_labs(outcomes)
    head = _header(outcomes, labs)
    broken = [o for o in _sorted(outcomes) if o.status == BROKEN]
    graded = graded_only(outcomes)
    compile_check = any(o.compile_only for o in outcomes)
    return {
        "title": title or "cudalab class summary",
        "labs": [
            {"number": f"{c.number:02d}", "title": c.title, "anchor": f"tests-{c.number:02d}"} for c in labs
        ],
        "students": len(outcomes),
        "graded": len(graded),
        "broken": [
            {"student": o.student, "line": first_line(clean_text(o.error), 160) or "not graded"}
            for o in broken
        ],
        "meta": head["meta"],
        "no_gpu": head["no_gpu"],
        "gpu_reason": head["gpu_reason"],
        "compile_check": compile_check,
        "compiled": sum(o.status == COMPILED for o in outcomes),
        "not_compiled": sum(o.status == NOT_COMPILED for o in outcomes),
        "distribution": _distribution(graded, len(outcomes) - len(graded)),
        "lab_stats": _lab_stats(graded, labs),
        "pass_rates": _pass_rates(graded, labs),
        "leaderboards": _leaderboards(graded, labs),
        "lab_columns": [
            {"number": f"{c.number:02d}", "title": c.title, "max": fmt_points(c.max_score)} for c in labs
        ],
        "roster": _roster(outcomes, labs),
        "any_links": any(o.report_dir for o in outcomes),
        "missing": [o.student for o in _sorted(outcomes) if o.status == MISSING],
        "unmatched": [{"name": n, "why": why} for n, why in (unmatched or [])],
        "late": _late_summary(outcomes),
        "names": any(o.name for o in outcomes),
    }


def render_class_summary(
    outcomes: list[StudentOutcome], title: str = "", unmatched: list[tuple[str, str]] | None = None,
    similarity: dict[str, Any] | None = None,
) -> str:
    """The class summary as one self-contained HTML document. similarity: the link to similarity.html
    and its counts (grader/report/similarity.py class_link), None without one."""
    svg.reset_ids()
    return environment().get_template("class_summary.html.j2").render(
        **class_view(outcomes, title, unmatched), similarity=similarity
    )


# --- files -----------------------------------------------------------------------------------------


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)  # a reader never sees half a report


def write_batch_reports(
    outcomes: list[StudentOutcome], out_dir: Path, title: str = "", unmatched: list[tuple[str, str]] | None = None
) -> dict[str, Path]:
    """Write class-summary.html, gradebook.csv and the LMS gradebooks (grader/report/lms.py) into out_dir;
    returns {"html", "csv", "canvas", "moodle"}: paths. The summary links OUT/similarity.html if there is one.
    unmatched: the submissions a roster matched to nobody (grader/roster.py), listed on the page."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {fmt: out_dir / name for fmt, name in FILES.items()}
    _write(paths["html"], render_class_summary(outcomes, title, unmatched, _similarity_link(out_dir)))
    _write(paths["csv"], render_gradebook_csv(outcomes))
    paths.update(write_lms_exports(outcomes, out_dir))  # gradebook-canvas.csv, gradebook-moodle.csv
    return paths


def _similarity_link(out_dir: Path) -> dict[str, Any] | None:
    """The class summary's link to OUT/similarity.html, from OUT/similarity.json (grader/similarity.py)."""
    import json

    from grader.report.similarity import class_link

    try:
        return class_link(json.loads((out_dir / "similarity.json").read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError):
        return None


__all__ = [
    "LabColumn",
    "StudentOutcome",
    "batch_labs",
    "class_view",
    "gradebook_columns",
    "histogram",
    "render_class_summary",
    "render_gradebook_csv",
    "write_batch_reports",
]
