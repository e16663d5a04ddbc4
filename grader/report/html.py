"""The HTML report: one self-contained page (inline CSS and SVG, no network), rendered with Jinja2
from a plain view model built here. Templates only loop and test; every number and label is
formatted in this module, every chart is drawn by grader.report.svg, and all text is escaped."""

from __future__ import annotations

import functools
import statistics
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape
from markupsafe import Markup

from grader.model.hidden import counts
from grader.report.profile_view import profile_view
from grader.report import svg
from grader.report._format import (
    STATUS_LABEL,
    STATUS_MARK,
    category_label,
    clean_text,
    elapsed_seconds,
    floor_value,
    fmt_commit,
    fmt_date,
    fmt_num,
    fmt_points,
    fmt_ratio,
    fmt_seconds,
    gpu_facts,
    is_perf,
    lab_id,
    lower_is_better,
    percent,
    perf_rows,
    slug,
    split_notes,
    split_test_name,
    step_parts,
    unit,
)
from grader.report.failures import group_failures
from grader.report.standing import NOT_GRADED, build_label, lab_standing, standing
from grader.model.results import CheckpointScore, LabResult, Perf, Results, Status, TestResult

TEMPLATES = Path(__file__).parent / "templates"


def _finalize(value: Any) -> Any:
    """Every {{ expression }} passes here before escaping: control characters and ANSI codes never
    reach the page (Markup from the SVG builder is already clean)."""
    if value is None:
        return ""
    if isinstance(value, Markup):
        return value
    if isinstance(value, str):
        return clean_text(value)
    return value


@functools.lru_cache(maxsize=1)
def environment() -> Environment:
    """One environment per process: templates compile once (a batch renders many reports)."""
    return Environment(
        loader=FileSystemLoader(str(TEMPLATES)),
        autoescape=select_autoescape(default=True, default_for_string=True),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        finalize=_finalize,
    )


def render_html(results: Results) -> str:
    """The whole report as one HTML document."""
    svg.reset_ids()
    return environment().get_template("report.html.j2").render(**view(results))


# --- view model ------------------------------------------------------------------------------------


def _grade(pct: float) -> str:
    return "good" if pct >= 90 else ("mid" if pct >= 50 else "low")


def view(results: Results) -> dict[str, Any]:
    run = results.run
    labs = [_lab_view(lab, run.mode) for lab in results.labs]
    every = counts(t for lab in results.labs for t in lab.tests)
    totals = {s.value: every[s] for s in Status}
    overall = standing(results)
    pct = percent(results.score, results.max_score)
    elapsed = elapsed_seconds(run)
    meta = [
        ("mode", "solution (reference code)" if run.mode == "solution" else run.mode or "student"),
        ("date", fmt_date(run.started)),
        ("commit", fmt_commit(run.commit)),
        ("toolkit", run.toolkit),
        ("submission", run.submission),
        ("host", run.host),
        ("duration", fmt_seconds(elapsed) if elapsed else ""),
        ("sandboxed", "yes" if run.sandboxed else ""),
        ("grader", run.grader_version),
    ]
    waiting = totals["skipped"] + totals["not_run"]
    labs_names = ", ".join(f"{lab.number:02d}" for lab in results.labs)
    return {
        "title": f"cudalab report — {'lab ' + labs_names if labs_names else 'no labs'}",
        "mode": run.mode or "student",
        "meta": [(k, v) for k, v in meta if v],
        "notes": split_notes(run.notes)[0],
        "setup_notes": split_notes(run.notes)[1],
        "gpu_available": run.gpu_available,
        "gpu_reason": run.gpu_reason or "no CUDA device was found",
        "gpu_facts": gpu_facts(run),
        "gpu_waiting": waiting,
        "graded": overall.graded,
        "not_graded": overall.headline,  # "not graded: no GPU"
        "not_graded_reason": overall.reason,
        "not_graded_waiting": overall.waiting,
        "score": fmt_points(results.score),
        "max_score": fmt_points(results.max_score),
        "pct": f"{pct:.1f}",
        "pct_text": f"{pct:.0f} %" if overall.graded else NOT_GRADED,
        "grade": _grade(pct),
        "totals": totals,
        "labs": labs,
        "schema_version": results.schema_version,
    }


def _step_view(step: CheckpointScore) -> dict[str, str]:
    head, counts = step_parts(step)
    return {"state": step.state, "head": head, "counts": counts}


def _lab_view(lab: LabResult, mode: str) -> dict[str, Any]:
    anchor = f"lab-{lab.number:02d}"
    pct = percent(lab.score, lab.max_score)
    c = counts(lab.tests)
    graded = lab_standing(lab).graded
    tests = [_test_view(t, anchor) for t in lab.tests]
    by_name = dict(zip((t.name for t in lab.tests), zip(lab.tests, tests, strict=True), strict=False))
    groups = []
    seen: set[str] = set()
    for task in lab.tasks:
        members = [by_name[t.name] for t in lab.tests if t.task == task.id]
        if members:
            groups.append(_group(task.title, task.challenge, members))
            seen.update(m["name"] for _, m in members)
    rest = [(t, v) for t, v in zip(lab.tests, tests, strict=True) if v["name"] not in seen]
    if rest:
        groups.append(_group("Other tests" if groups else "All tests", False, rest))
    perf_tests = [t for t in lab.tests if t.perf is not None]
    return {
        "anchor": anchor,
        "id": lab_id(lab),
        "number": f"{lab.number:02d}",
        "name": lab.name,
        "title": lab.title,
        "graded": graded,
        "score": fmt_points(lab.score),
        "max_score": fmt_points(lab.max_score),
        "late": _late_text(lab) if graded else "",
        "pct": f"{pct:.1f}",
        "grade": _grade(pct),
        "passed": c[Status.PASSED],
        "failed": c[Status.FAILED],
        "skipped": c[Status.SKIPPED],
        "not_run": c[Status.NOT_RUN],
        "total": sum(c.values()),
        "build": build_label(lab),  # built, build failed, refused
        "messages": lab.messages,
        "tasks": [
            {
                "title": t.title,
                "id": t.id,
                "challenge": t.challenge,
                "points": fmt_points(t.points),
                "earned": fmt_points(t.earned) if graded else "–",
                "pct": f"{percent(t.earned, t.points):.1f}",
                "grade": _grade(percent(t.earned, t.points)) if t.points > 0 and graded else "none",
                "tests": f"{t.tests_passed} / {t.tests_total}" if t.tests_total else "–",
                "all_passed": t.tests_total > 0 and t.tests_passed == t.tests_total,
                "perf": (f"{fmt_points(t.perf_earned)} / {fmt_points(t.perf_points)}" if graded else "–")
                if t.perf_points else "",
                "notes": t.notes,
                # A big task's steps, shown once one of them fails (issue 29's checkpoints)
                "checkpoints": [_step_view(c)
                                for c in t.checkpoints] if any(not c.ok for c in t.checkpoints) else [],
            }
            for t in lab.tasks
        ],
        "any_perf_points": any(t.perf_points for t in lab.tasks),
        "builds": [
            {
                "target": b.target,
                "ok": b.ok,
                "seconds": fmt_seconds(b.seconds),
                "category": category_label(b.category),
                "message": b.message,
                "log": b.log,
            }
            for b in lab.builds
        ],
        "test_groups": groups,
        "failure_modes": [
            {"name": g.test.name, "anchor": by_name[g.test.name][1]["anchor"] if g.test.name in by_name else "",
             "what": g.what, "also": g.also_text, "hint": g.test.hint}
            for g in group_failures(lab)
        ],
        "progressions": _progressions(lab, mode),
        "perf_cards": [_perf_card(t, anchor, mode) for t in perf_tests],
        "profile": profile_view(lab.profile),
        "answers": lab.answers,
    }


def _late_text(lab: LabResult) -> str:
    """How a course file's late policy treated the lab (grader/course/policy.py), for the student."""
    if lab.late is None:
        return ""
    from grader.report.late import explain

    return explain(lab.late, lab.max_score)


def _group(title: str, challenge: bool, members: list[tuple[TestResult, dict[str, Any]]]) -> dict[str, Any]:
    """A task's tests: open when something in it failed or did not run, folded when all is well. A
    hidden summary row counts the tests it stands for."""
    count = counts(t for t, _ in members)
    return {
        "title": title,
        "challenge": challenge,
        "tests": [v for _, v in members],
        "passed": count[Status.PASSED],
        "failed": count[Status.FAILED],
        "skipped": count[Status.SKIPPED],
        "not_run": count[Status.NOT_RUN],
        "total": sum(count.values()),
        "open": bool(count[Status.FAILED] or count[Status.NOT_RUN]),
    }


def _test_anchor(lab_anchor: str, name: str) -> str:
    return f"{lab_anchor}-{slug(name)}"


def _test_view(t: TestResult, lab_anchor: str) -> dict[str, Any]:
    suite, short = split_test_name(t.name)
    message = t.message or t.properties.get("skip_reason", "")
    heat, heat_note = None, ""
    shape, cells = t.properties.get("mismatch_shape", ""), t.properties.get("mismatch_map", "")
    if shape and cells and t.status is not Status.PASSED:
        parsed = svg.parse_mismatch_map(shape, cells)
        if parsed is not None:
            rows, cols, grid = parsed
            heat = svg.heatmap(rows, cols, grid, f"Where {t.name} is wrong ({rows} x {cols})")
            if t.properties.get("mismatch_map_complete", "true") == "false":
                heat_note = "drawn from the first mismatches only; the output has more"
    perf_note = ""
    if t.perf is not None:
        bits = []
        r = t.perf.rate(t.perf.impl)
        if r is not None:
            bits.append(f"{fmt_num(r)} {unit(t.perf)}")
        if t.perf.ratio_to_reference is not None:
            bits.append(f"{fmt_ratio(t.perf.ratio_to_reference)} reference")
        perf_note = " · ".join(bits)
    return {
        "name": t.name,
        "suite": suite,
        "short": short,
        "anchor": _test_anchor(lab_anchor, t.name),
        "status": t.status.value,
        "status_label": STATUS_LABEL[t.status],
        "mark": STATUS_MARK[t.status],
        "kind": "perf" if is_perf(t) else "correctness",
        "binary": t.binary if t.binary not in ("", "student") else "",
        "category": category_label(t.category),
        "hint": t.hint,
        "message": message,
        "duration": fmt_seconds(t.duration_s),
        "heatmap": heat,
        "heatmap_note": heat_note,
        "perf_note": perf_note,
        "perf_anchor": f"perf-{_test_anchor(lab_anchor, t.name)}" if t.perf is not None else "",
        # failures get a detail row (message in <pre>, hint, heatmap); skips and not-runs a short line
        "show_detail": t.status is Status.FAILED and bool(message or t.hint or heat is not None),
        "note": message if t.status in (Status.SKIPPED, Status.NOT_RUN) else "",
    }


def _perf_card(t: TestResult, lab_anchor: str, mode: str) -> dict[str, Any]:
    perf = t.perf
    assert perf is not None
    rows = perf_rows(perf, mode)
    u = unit(perf)
    groups = [
        svg.Group(
            r.label,
            [
                svg.Bar(
                    r.kind,
                    r.value,
                    f"{fmt_num(r.value)} {u}" if r.value is not None else "",
                    tooltip=f"{r.label}: median {fmt_num(r.series.median_ms)} ms"
                    + (f", noise {fmt_num(r.series.noise_pct, 2)} %" if r.series.noise_pct else "")
                    + (f", {r.series.samples} samples" if r.series.samples else ""),
                )
            ],
        )
        for r in rows
    ]
    floor = floor_value(perf)
    floor_text = (
        f"{fmt_num(floor)} {u} ({fmt_num(perf.floor_ms)} ms)" if floor is not None and perf.floor_ms else ""
    )
    chart = svg.bar_chart(
        groups,
        title=f"{t.name}{' — ' + perf.label if perf.label else ''}",
        unit=u,
        lower_is_better=lower_is_better(perf),
        floor=floor,
        floor_text=floor_text,
        width=500,
    )
    ratios = []
    if mode != "solution" and perf.ratio_to_reference is not None:
        ratios.append(("vs reference", fmt_ratio(perf.ratio_to_reference)))
    if perf.ratio_to_baseline is not None:
        ratios.append((f"vs {perf.baseline}", fmt_ratio(perf.ratio_to_baseline)))
    if perf.floor_ms and perf.impl is not None and perf.impl.median_ms > 0:
        ratios.append(("floor speed reached", f"{100 * perf.floor_ms / perf.impl.median_ms:.0f} %"))
    spans = svg.parse_timeline(t.properties.get("timeline", ""))
    return {
        "anchor": f"perf-{_test_anchor(lab_anchor, t.name)}",
        "name": t.name,
        "label": perf.label,
        "status": t.status.value,
        "status_label": STATUS_LABEL[t.status],
        "chart": chart,
        "ratios": ratios,
        "points": f"{fmt_points(perf.earned)} / {fmt_points(perf.points)}" if perf.points else "",
        "lower_is_better": lower_is_better(perf),
        "unit": u,
        "table": [
            {
                "label": r.label,
                "median": fmt_num(r.series.median_ms),
                "min": fmt_num(r.series.min_ms) if r.series.min_ms else "–",
                "noise": f"{fmt_num(r.series.noise_pct, 2)} %" if r.series.samples else "–",
                "samples": r.series.samples or "–",
                "value": fmt_num(r.value),
            }
            for r in rows
        ],
        "floor_ms": fmt_num(perf.floor_ms) if perf.floor_ms else "",
        "floor": fmt_num(floor) if floor is not None else "",
        "timeline": svg.timeline(spans, f"{t.name}: stages over time") if spans else None,
    }


def _step_label(names: list[str]) -> list[str]:
    shorts = [split_test_name(n)[1] for n in names]
    tails = {s.rpartition("/")[2] for s in shorts if "/" in s}
    if len(tails) == 1 and all("/" in s for s in shorts):
        shorts = [s.rpartition("/")[0] for s in shorts]
    if len(set(shorts)) < len(shorts):  # names collide without their suites: keep them
        return names
    return shorts


def _progressions(lab: LabResult, mode: str) -> list[dict[str, Any]]:
    """One chart per perf_label shared by two or more perf tests: every step side by side."""
    buckets: dict[tuple[str, str], list[TestResult]] = {}
    for t in lab.tests:
        if t.perf is not None and t.perf.label:
            buckets.setdefault((t.perf.label, unit(t.perf)), []).append(t)
    charts = []
    for (label, u), tests in buckets.items():
        if len(tests) < 2:
            continue
        perfs: list[Perf] = [t.perf for t in tests if t.perf is not None]
        groups = []
        for name, perf in zip(_step_label([t.name for t in tests]), perfs, strict=False):
            you = perf.rate(perf.impl)
            bars = [
                svg.Bar(
                    "impl",
                    you,
                    f"{fmt_num(you)} {u}" if you is not None else "",
                    tooltip=f"{name}: {'impl' if mode == 'solution' else 'you'} {fmt_num(you)} {u}",
                )
            ]
            if mode != "solution" and perf.reference is not None:
                ref = perf.rate(perf.reference)
                bars.append(
                    svg.Bar(
                        "reference",
                        ref,
                        f"ref {fmt_num(ref)}",
                        tooltip=f"{name}: reference {fmt_num(ref)} {u}",
                    )
                )
            groups.append(svg.Group(name, bars))
        libraries: dict[str, list[float]] = {}
        for perf in perfs:
            base = perf.series(perf.baseline) if perf.baseline else None
            value = perf.rate(base)
            if base is not None and value is not None:
                libraries.setdefault(base.name, []).append(value)
        for name, values in libraries.items():
            med = statistics.median(values)
            note = f" (median of {len(values)} runs)" if len(values) > 1 else ""
            groups.append(
                svg.Group(
                    f"{name} (library)",
                    [
                        svg.Bar(
                            "baseline",
                            med,
                            f"{fmt_num(med)} {u}",
                            tooltip=f"{name}{note}: {fmt_num(med)} {u}",
                        )
                    ],
                )
            )
        floors = [f for f in (floor_value(p) for p in perfs) if f is not None]
        floor = (min(floors) if lower_is_better(perfs[0]) else max(floors)) if floors else None
        chart = svg.bar_chart(
            groups,
            title=f"Lab {lab.number:02d} progression at {label}",
            unit=u,
            lower_is_better=lower_is_better(perfs[0]),
            floor=floor,
            width=820,
        )
        charts.append({"label": label, "chart": chart, "steps": len(tests)})
    return charts
