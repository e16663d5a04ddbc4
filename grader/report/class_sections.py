"""The class summary's per-lab sections, each a list of rows for the template: statistics per lab and
task, the tests most students fail, the speed leaderboards, the roster, and the late-policy summary."""

from __future__ import annotations

import statistics
from collections import Counter
from typing import Any
from urllib.parse import quote


from grader.report._format import (
    STATUS_LABEL,
    category_label,
    clean_text,
    first_line,
    fmt_num,
    fmt_points,
    fmt_ratio,
    fmt_seconds,
    gpu_name,
    is_perf,
    lower_is_better,
    percent,
    split_test_name,
    truncate,
    unit,
)
from grader.report.class_charts import grade_band, stat_text, stats, strip
from grader.report.outcomes import LabColumn, StudentOutcome
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
from grader.model.results import Status

_ERROR_LIMIT = 4_000
_SHOWN_TESTS = 12  # per lab, the tests with the lowest pass rates shown open; the rest fold


def _link(report_dir: str, page: str = "report.html") -> str:
    """A relative URL to a file in the student's folder (the folder itself for page=""); quoted, so no
    name can become a scheme, a query or markup."""
    if not report_dir:
        return ""
    path = report_dir.replace("\\", "/").rstrip("/")
    return quote(f"{path}/{page}", safe="/")


def lab_stats(outcomes: list[StudentOutcome], labs: list[LabColumn]) -> list[dict[str, Any]]:
    rows = []
    for col in labs:
        mine = [(o.student, _by_name(o.results).get(col.name)) for o in outcomes if o.results is not None]
        results = [(who, lab) for who, lab in mine if lab is not None]
        scores = [lab.score for _, lab in results]
        st = stats(scores)
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
                    "mean": stat_text(earned),
                    "points": fmt_points(top),
                    "pct": f"{percent(earned, top):.1f}",
                    "grade": grade_band(percent(earned, top)) if top > 0 else "none",
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
                "mean": stat_text(st["mean"]) if st else "–",
                "median": stat_text(st["median"]) if st else "–",
                "min": fmt_points(st["min"]) if st else "–",
                "max": fmt_points(st["max"]) if st else "–",
                "stdev": stat_text(st["stdev"]) if st else "–",
                "pct": f"{mean_pct:.1f}",
                "grade": grade_band(mean_pct) if st else "none",
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


def pass_rates(outcomes: list[StudentOutcome], labs: list[LabColumn]) -> list[dict[str, Any]]:
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
                    "grade": grade_band(100 * rate),
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


def leaderboards(outcomes: list[StudentOutcome], labs: list[LabColumn]) -> list[dict[str, Any]]:
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


def roster_rows(outcomes: list[StudentOutcome], labs: list[LabColumn]) -> list[dict[str, Any]]:
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
                    "grade": grade_band(pct) if lab.max_score > 0 else "none",
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
                "grade": grade_band(pct) if scored and r is not None and r.max_score > 0 else "none",
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


def late_summary(outcomes: list[StudentOutcome]) -> dict[str, Any] | None:
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
