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
helpers, _format helpers) and all text is escaped. The statistics and charts are in class_charts.py,
the per-lab sections in class_sections.py; this module assembles the page and writes the files.
"""

from __future__ import annotations

import statistics
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path
from typing import Any


from grader.report import svg
from grader.report._format import (
    clean_text,
    first_line,
    fmt_date,
    fmt_points,
    fmt_seconds,
    gpu_device,
    gpu_line,
    gpu_name,
    parse_time,
    percent,
)
from grader.report.class_charts import grade_band, histogram, stat_text, stats
from grader.report.class_gradebook import gradebook_columns, render_gradebook_csv
from grader.report.class_sections import lab_stats, late_summary, leaderboards, pass_rates, roster_rows
from grader.report.html import environment
from grader.report.lms import write_lms_exports
from grader.report.outcomes import LabColumn, StudentOutcome, batch_labs, graded_only
from grader.report.outcomes import roster_order as _sorted
from grader.report.standing import BROKEN, COMPILED, GRADED, MISSING, NOT_COMPILED, NOT_GRADED_NO_GPU

FILES = {"html": "class-summary.html", "csv": "gradebook.csv"}


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


def _distribution(outcomes: list[StudentOutcome]) -> dict[str, Any]:
    """The scores of the graded outcomes; the rows without one are counted by why ("1 broken, 1 missing")."""
    without = Counter(o.status for o in outcomes if not o.graded)
    graded = [o.results for o in graded_only(outcomes) if o.results is not None]
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
    st = stats(values)
    pcts = [percent(r.score, r.max_score) for r in graded]
    return {
        "chart": histogram(values, top, unit_label=unit_label, title="Distribution of total scores")
        if graded
        else None,
        "unit": unit_label,
        "top": fmt_points(top),
        "n": len(values),
        "left_out": sum(without.values()),
        "left_out_why": ", ".join(f"{n} {status}" for status, n in sorted(without.items())),
        "mean": stat_text(st["mean"]) if st else "–",
        "median": stat_text(st["median"]) if st else "–",
        "min": stat_text(st["min"]) if st else "–",
        "max": stat_text(st["max"]) if st else "–",
        "stdev": stat_text(st["stdev"]) if st else "–",
        "mean_pct": f"{statistics.fmean(pcts):.1f}" if pcts else "0",
        "mean_pct_text": f"{statistics.fmean(pcts):.0f} %" if pcts else "–",
        "grade": grade_band(statistics.fmean(pcts)) if pcts else "none",
        "full": sum(1 for r in graded if r.max_score > 0 and r.score >= r.max_score - 1e-9),
        "zero": sum(1 for r in graded if r.score <= 0),
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
        "distribution": _distribution(outcomes),
        "lab_stats": lab_stats(graded, labs),
        "pass_rates": pass_rates(graded, labs),
        "leaderboards": leaderboards(graded, labs),
        "lab_columns": [
            {"number": f"{c.number:02d}", "title": c.title, "max": fmt_points(c.max_score)} for c in labs
        ],
        "roster": roster_rows(outcomes, labs),
        "any_links": any(o.report_dir for o in outcomes),
        "missing": [o.student for o in _sorted(outcomes) if o.status == MISSING],
        "unmatched": [{"name": n, "why": why} for n, why in (unmatched or [])],
        "late": late_summary(outcomes),
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
    unmatched: the submissions a roster matched to nobody (grader/course/roster.py), listed on the page."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {fmt: out_dir / name for fmt, name in FILES.items()}
    _write(paths["html"], render_class_summary(outcomes, title, unmatched, _similarity_link(out_dir)))
    _write(paths["csv"], render_gradebook_csv(outcomes))
    paths.update(write_lms_exports(outcomes, out_dir))  # gradebook-canvas.csv, gradebook-moodle.csv
    return paths


def _similarity_link(out_dir: Path) -> dict[str, Any] | None:
    """The class summary's link to OUT/similarity.html, from OUT/similarity.json (grader/course/similarity.py)."""
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
