"""The class summary's statistics and charts: mean/median/stdev of a list of scores, the grade band of a
percentage, and the two inline SVG charts (a histogram of totals, a strip of one lab's scores)."""

from __future__ import annotations

import math
import statistics

from markupsafe import Markup

from grader.report import svg
from grader.report._format import fmt_num, fmt_points, percent

# --- statistics ---------------------------------------------------------------------------------------


def stats(values: list[float]) -> dict[str, float] | None:
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


def stat_text(value: float | None) -> str:
    """A class statistic: one decimal at most, 72.7 · 90 · 0."""
    if value is None or not math.isfinite(value):
        return "–"
    text = f"{value:,.1f}"
    return text.removesuffix(".0")


def grade_band(pct: float) -> str:
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
    st = stats(values)
    if st:
        desc += f". Mean {stat_text(st['mean'])}, median {stat_text(st['median'])}."
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
                title=f"{name}: {stat_text(value)} {unit_label}",
            )
            on_left = mx > left + plot_w - 110
            chart.text(
                mx + (-4 if on_left else 4),
                ly + 4,
                f"{name} {stat_text(value)}",
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
            class_=f"tick-{grade_band(pct)}",
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
