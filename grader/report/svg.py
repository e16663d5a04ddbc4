"""Inline SVG for the HTML report: bar charts (one perf test, a lab's progression), the 2D mismatch
heatmap and the streams timeline. Every piece of text goes through markupsafe.escape; colors come
from CSS classes in the page (so print and dark mode restyle them), and every mark carries a <title>
and a text label, so nothing is said by color alone."""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field

from markupsafe import Markup, escape

from grader.report._format import clean_text, fmt_num

_ids = threading.local()  # per thread, so pages rendered side by side get their own numbering


def _next_id(prefix: str) -> str:
    _ids.n = getattr(_ids, "n", 0) + 1
    return f"{prefix}{_ids.n}"


def reset_ids() -> None:
    """Deterministic element ids for each rendered page."""
    _ids.n = 0


def _n(x: float) -> str:
    return f"{x:.1f}".rstrip("0").rstrip(".")


def _attrs(attrs: dict[str, object]) -> str:
    out = []
    for key, value in attrs.items():
        if value is None or value is False:
            continue
        name = key.rstrip("_").replace("_", "-")
        if isinstance(value, (int, float)):
            out.append(f' {name}="{_n(float(value))}"')
        else:
            out.append(f' {name}="{escape(clean_text(value))}"')
    return "".join(out)


class Svg:
    def __init__(self, width: float, height: float, title: str, desc: str = "", cls: str = "chart") -> None:
        self.width, self.height = width, height
        self.title, self.desc, self.cls = title, desc, cls
        self.parts: list[str] = []

    def el(self, tag: str, text: str | None = None, title: str | None = None, **attrs: object) -> None:
        inner = ""
        if title:
            inner += f"<title>{escape(clean_text(title))}</title>"
        if text is not None:
            inner += str(escape(clean_text(text)))
        self.parts.append(f"<{tag}{_attrs(attrs)}>{inner}</{tag}>" if inner else f"<{tag}{_attrs(attrs)}/>")

    def text(
        self, x: float, y: float, text: str, cls: str = "", anchor: str = "start", **attrs: object
    ) -> None:
        self.el(
            "text",
            text,
            x=float(x),
            y=float(y),
            class_=cls or None,
            text_anchor=anchor if anchor != "start" else None,
            **attrs,
        )

    def markup(self) -> Markup:
        tid, did = _next_id("t"), _next_id("d")
        head = (
            f'<svg xmlns="http://www.w3.org/2000/svg" class="{escape(self.cls)}" role="img" '
            f'width="{_n(self.width)}" height="{_n(self.height)}" '
            f'viewBox="0 0 {_n(self.width)} {_n(self.height)}" aria-labelledby="{tid} {did}">'
            f'<title id="{tid}">{escape(clean_text(self.title))}</title>'
            f'<desc id="{did}">{escape(clean_text(self.desc))}</desc>'
        )
        return Markup(head + "".join(self.parts) + "</svg>")


def nice_ticks(vmax: float, count: int = 5) -> list[float]:
    """0 and round steps (1, 2, 2.5, 5 x 10^k) up to at least vmax, with the least headroom for
    about `count` intervals: 0, 500, ..., 3500 for 3025."""
    if vmax <= 0 or not math.isfinite(vmax):
        return [0.0, 1.0]
    mag = 10 ** math.floor(math.log10(vmax / count))
    best: tuple[float, float] | None = None
    for scale in (0.1, 1, 10):
        for m in (1, 2, 2.5, 5):
            step = m * mag * scale
            n = math.ceil(vmax / step - 1e-9)
            if count - 2 <= n <= count + 2 and (best is None or n * step < best[0] * best[1]):
                best = (n, step)
    n, step = best if best else (math.ceil(vmax / mag), mag)
    return [round(i * step, 12) for i in range(int(n) + 1)]


def fmt_tick(value: float) -> str:
    """Axis labels: 0 · 0.25 · 1 · 2,500 (no trailing zeros, unlike values)."""
    return f"{value:,.6f}".rstrip("0").rstrip(".")


def _short(label: str, limit: int = 28) -> str:
    return label if len(label) <= limit else label[: limit - 1] + "…"


# --- bar charts ------------------------------------------------------------------------------------


@dataclass
class Bar:
    kind: str  # css class suffix: impl, reference, baseline, variant
    value: float | None
    text: str  # the numeric label drawn after the bar
    tooltip: str = ""


@dataclass
class Group:
    label: str
    bars: list[Bar] = field(default_factory=list)
    tooltip: str = ""


def bar_chart(
    groups: list[Group],
    *,
    title: str,
    unit: str,
    lower_is_better: bool,
    floor: float | None = None,
    floor_text: str = "",
    width: float = 620,
) -> Markup:
    """Horizontal bars, one row per group (a group holds one bar, or a pair: you and the reference),
    a value axis with gridlines, and the floor as a dashed line across the plot."""
    longest = max((len(_short(g.label)) for g in groups), default=8)
    label_w = min(190.0, max(80.0, 6.6 * longest + 18))
    right_pad, top, axis_h = 100.0, 22.0, 30.0
    plot_w = width - label_w - right_pad
    heights = [26.0 if len(g.bars) <= 1 else 36.0 for g in groups]
    height = top + sum(heights) + axis_h + 4
    values = [b.value for g in groups for b in g.bars if b.value is not None and b.value > 0]
    if floor is not None and floor > 0:
        values.append(floor)
    ticks = nice_ticks(max(values) if values else 1.0)
    vmax = ticks[-1]

    def x(v: float) -> float:
        return label_w + plot_w * max(0.0, v) / vmax

    better = "lower is better" if lower_is_better else "higher is better"
    desc = f"{unit}, {better}. " + "; ".join(
        f"{g.label}: " + ", ".join(b.text for b in g.bars) for g in groups
    )
    if floor is not None:
        desc += f"; floor: {floor_text or fmt_num(floor)}"
    svg = Svg(width, height, title, desc, cls="chart bars")
    svg.text(label_w, 13, f"{unit} — {better}", cls="axis-title")
    plot_bottom = top + sum(heights)
    every = max(1, math.ceil(44 / (plot_w / max(1, len(ticks) - 1))))  # keep tick labels apart
    for i, t in enumerate(ticks):
        svg.el("line", x1=x(t), x2=x(t), y1=top - 4, y2=plot_bottom, class_="grid")
        if i % every == 0:
            svg.text(x(t), plot_bottom + 14, fmt_tick(t), cls="tick", anchor="middle")
    svg.el("line", x1=label_w, x2=label_w, y1=top - 4, y2=plot_bottom, class_="axis")

    y = top
    for g, h in zip(groups, heights, strict=False):
        svg.text(label_w - 8, y + h / 2 + 4, _short(g.label), cls="row-label", anchor="end")
        if g.tooltip or len(g.label) > 28:
            svg.el("rect", x=0.0, y=y, width=label_w - 4, height=h, class_="hit", title=g.tooltip or g.label)
        thick = [14.0] if len(g.bars) <= 1 else [13.0, 8.0]
        by = y + (h - sum(thick) - 3 * (len(thick) - 1)) / 2
        for bar, bh in zip(g.bars, thick, strict=False):
            if bar.value is not None and bar.value > 0:
                end = x(bar.value)
                svg.el(
                    "rect",
                    x=label_w,
                    y=by,
                    width=max(1.0, end - label_w),
                    height=bh,
                    rx=2,
                    class_=f"bar b-{bar.kind}",
                    title=bar.tooltip or f"{g.label}: {bar.text}",
                )
                svg.text(end + 5, by + bh / 2 + 4, bar.text, cls=f"val v-{bar.kind}")
            else:
                svg.text(label_w + 5, by + bh / 2 + 4, bar.text or "not measured", cls="val v-none")
            by += bh + 3
        y += h

    if floor is not None and floor > 0:
        fx = x(floor)
        svg.el(
            "line",
            x1=fx,
            x2=fx,
            y1=top - 8,
            y2=plot_bottom,
            class_="floor-line",
            title=f"floor: {floor_text or fmt_num(floor)}",
        )
        anchor = "end" if fx > label_w + plot_w * 0.6 else "start"
        svg.text(
            fx + (-4 if anchor == "end" else 4),
            top - 10 + 12,
            f"floor {fmt_num(floor)}",
            cls="floor-label",
            anchor=anchor,
        )
    return svg.markup()


# --- mismatch heatmap ------------------------------------------------------------------------------


def parse_mismatch_map(shape: str, cells: str) -> tuple[int, int, list[list[int]]] | None:
    """('1024x768', '0012/0090') -> (1024, 768, [[0,0,1,2],[0,0,9,0]]), or None when malformed."""
    try:
        rows_s, cols_s = shape.lower().split("x")
        rows, cols = int(rows_s), int(cols_s)
    except ValueError:
        return None
    lines = cells.strip().split("/")
    if any(not line or line.strip("0123456789") for line in lines) or len({len(ln) for ln in lines}) != 1:
        return None
    grid = [[int(c) for c in line] for line in lines]
    if rows <= 0 or cols <= 0:
        return None
    if len(grid) > 256 or len(grid[0]) > 256:
        return None
    return rows, cols, grid


def heatmap(rows: int, cols: int, grid: list[list[int]], title: str) -> Markup:
    """Where the wrong elements of a 2D output are: one cell per band of rows x band of columns."""
    map_r, map_c = len(grid), len(grid[0])
    cell = max(4.0, min(14.0, 280.0 / max(map_r, map_c)))
    left, top = 44.0, 20.0
    legend_w = 150.0
    width = left + map_c * cell + 24 + legend_w
    height = max(top + map_r * cell + 24, top + 120)
    wrong = sum(1 for line in grid for d in line if d > 0)
    desc = (
        f"{rows} x {cols} output in {map_r} x {map_c} cells; {wrong} cells hold wrong elements "
        "(shade 1-9 = rising fraction wrong)."
    )
    svg = Svg(width, height, title, desc, cls="chart heat")
    svg.text(left, 12, f"columns 0 … {cols - 1} →", cls="tick")
    svg.text(left - 6, top + 9, "row 0", cls="tick", anchor="end")
    svg.text(left - 6, top + map_r * cell, f"{rows - 1}", cls="tick", anchor="end")
    for i, line in enumerate(grid):
        r0, r1 = i * rows // map_r, max(i * rows // map_r, (i + 1) * rows // map_r - 1)
        for j, d in enumerate(line):
            c0, c1 = j * cols // map_c, max(j * cols // map_c, (j + 1) * cols // map_c - 1)
            what = "no wrong elements" if d == 0 else f"density {d}/9 wrong"
            svg.el(
                "rect",
                x=left + j * cell,
                y=top + i * cell,
                width=cell,
                height=cell,
                class_=f"hm hm{d}",
                title=f"rows {r0}–{r1}, cols {c0}–{c1}: {what}",
            )
    svg.el("rect", x=left, y=top, width=map_c * cell, height=map_r * cell, class_="hm-frame")
    lx = left + map_c * cell + 24
    svg.text(lx, top + 9, "wrong elements", cls="tick")
    for k, d in enumerate((0, 1, 3, 5, 7, 9)):
        ly = top + 18 + k * 15
        svg.el("rect", x=lx, y=ly, width=11.0, height=11.0, class_=f"hm hm{d}")
        label = "none" if d == 0 else ("all or nearly all" if d == 9 else f"≈ {round(100 * d / 9)} %")
        svg.text(lx + 16, ly + 9.5, label, cls="tick")
    return svg.markup()


# --- timeline --------------------------------------------------------------------------------------


@dataclass
class Span:
    stage: str
    chunk: str
    start: float
    end: float


def parse_timeline(text: str) -> list[Span]:
    """'h2d:0:0.00:0.41;kernel:0:0.41:0.60;...' -> spans; malformed entries are dropped."""
    spans = []
    for item in text.split(";"):
        parts = item.strip().split(":")
        if len(parts) != 4:
            continue
        try:
            start, end = float(parts[2]), float(parts[3])
        except ValueError:
            continue
        if math.isfinite(start) and math.isfinite(end) and end >= start >= 0:
            spans.append(Span(parts[0].strip() or "?", parts[1].strip(), start, end))
    return spans[:2000]


def timeline(spans: list[Span], title: str, width: float = 500) -> Markup:
    """A Gantt chart: one row per stage (copy in, kernel, copy out), one bar per chunk."""
    stages: list[str] = []
    for s in spans:
        if s.stage not in stages:
            stages.append(s.stage)
    label_w, right_pad, top, row_h = 72.0, 16.0, 10.0, 26.0
    plot_w = width - label_w - right_pad
    height = top + row_h * len(stages) + 30
    t0 = min(s.start for s in spans)
    ticks = nice_ticks(max(s.end for s in spans) - t0, 6)
    tmax = ticks[-1] or 1.0

    def x(t: float) -> float:
        return label_w + plot_w * (t - t0) / tmax

    span_total = max(s.end for s in spans) - t0
    busy = {st: sum(s.end - s.start for s in spans if s.stage == st) for st in stages}
    desc = f"{len(spans)} spans over {fmt_num(span_total)} ms; " + "; ".join(
        f"{st}: busy {fmt_num(b)} ms" for st, b in busy.items()
    )
    svg = Svg(width, height, title, desc, cls="chart timeline")
    bottom = top + row_h * len(stages)
    every = max(1, math.ceil(40 / (plot_w / max(1, len(ticks) - 1))))
    for i, t in enumerate(ticks):
        svg.el("line", x1=x(t0 + t), x2=x(t0 + t), y1=top, y2=bottom, class_="grid")
        if i % every == 0:
            svg.text(x(t0 + t), bottom + 14, fmt_tick(t), cls="tick", anchor="middle")
    svg.text(width - right_pad, bottom + 27, "ms from the first operation", cls="tick", anchor="end")
    for i, st in enumerate(stages):
        y = top + i * row_h
        svg.text(label_w - 8, y + row_h / 2 + 4, _short(st, 12), cls="row-label", anchor="end")
        for s in (s for s in spans if s.stage == st):
            x0, x1 = x(s.start), x(s.end)
            w = max(1.0, x1 - x0)
            svg.el(
                "rect",
                x=x0,
                y=y + 4,
                width=w,
                height=row_h - 8,
                rx=2,
                class_=f"span s{i % 6}",
                title=f"{st} chunk {s.chunk}: {fmt_num(s.start)}–{fmt_num(s.end)} ms",
            )
            if w >= 7 * len(s.chunk) + 6 and s.chunk:
                svg.text(x0 + w / 2, y + row_h / 2 + 4, s.chunk, cls="span-label", anchor="middle")
    return svg.markup()
