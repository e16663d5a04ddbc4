"""A lab's profile (grade --profile) as the HTML report shows it: per perf test a table of Nsight Compute's
numbers, yours beside the reference's and the library's, the top stall reasons, the advice, and one
roofline (SVG) that places every kernel by arithmetic intensity and FP32 rate under the GPU's peaks."""

from __future__ import annotations

import math
from typing import Any

from markupsafe import Markup

from grader.model.profile import KernelProfile, LabProfile
from grader.profile.advice import short_name
from grader.profile.metrics import METRICS
from grader.report.svg import Svg

ROLE_LABEL = {"yours": "yours", "reference": "reference", "library": "library"}
# The table's rows: the metrics that tell a lesson, in METRICS' order.
ROWS = ("duration_us", "dram_pct", "l2_pct", "sm_pct", "fma_pct", "lsu_pct", "occupancy_pct", "occupancy_max_pct",
        "registers", "block_size", "shared_bytes", "shared_ld_ways", "shared_st_ways", "ld_sectors", "st_sectors")


def _value(key: str, value: float | None) -> str:
    if value is None:
        return "–"
    if key.endswith("_pct"):
        return f"{value:.1f}%"
    if key.endswith("_ways"):
        return f"{value:.2f}×"
    if key in ("ld_sectors", "st_sectors"):
        return f"{value:.1f}"
    if key == "duration_us":
        return f"{value:,.1f} µs"
    return f"{value:,.0f}"


def _role(k: KernelProfile) -> str:
    """A column's head: whose kernel it is; another variant of the test by the test's name for it."""
    return k.variant if k.role == "variant" and k.variant else ROLE_LABEL.get(k.role, k.role)


def _cut(name: str, limit: int = 30) -> str:
    """A library kernel's name runs to 120 characters: the table shows its start, the title the rest."""
    return name if len(name) <= limit else name[: limit - 1] + "…"


def profile_view(p: LabProfile | None) -> dict[str, Any] | None:
    if p is None:
        return None
    view: dict[str, Any] = {"status": p.status, "message": p.message, "tool": p.tool, "tests": [], "roofline": None}
    if p.status != "ok":
        return view
    by_test: dict[str, list[KernelProfile]] = {}
    for k in p.kernels:
        by_test.setdefault(k.test, []).append(k)
    for test, kernels in by_test.items():
        rows = [{"label": METRICS[key][0], "cells": [_value(key, k.metrics.get(key)) for k in kernels]}
                for key in ROWS if any(key in k.metrics for k in kernels)]
        rows.append({"label": "occupancy limited by", "cells": [k.limiter or "–" for k in kernels]})
        view["tests"].append({
            "name": test,
            "columns": [{"role": _role(k), "kernel": _cut(short_name(k.kernel)), "full": k.kernel} for k in kernels],
            "rows": rows,
            "stalls": [[f"{name} ({v:g})" for name, v in k.stalls] for k in kernels],
            "advice": [(ROLE_LABEL.get(k.role, k.role), a) for k in kernels for a in k.advice],
        })
    view["roofline"] = roofline(p)
    view["variants"] = any(k.role == "variant" for k in p.kernels)
    return view


def roofline(p: LabProfile, width: float = 560, height: float = 300) -> Markup | None:
    """Log-log: x arithmetic intensity (FLOP per DRAM byte), y FP32 FLOP/s; the ceilings are the DRAM
    bandwidth (slope) and the FP32 peak (flat), both at the clocks ncu profiled at."""
    points = [k for k in p.kernels if k.metrics.get("flop") and k.metrics.get("dram_bytes") and
              k.metrics.get("flop_per_s")]
    if not points or p.peak_flop_per_s <= 0 or p.peak_bytes_per_s <= 0:
        return None
    left, right, top, bottom = 64.0, 16.0, 24.0, 40.0
    x_lo, x_hi = 1e-2, 1e3
    y_hi = 10 ** math.ceil(math.log10(p.peak_flop_per_s * 1.5))
    y_lo = y_hi / 1e5

    def x(v: float) -> float:
        v = min(max(v, x_lo), x_hi)
        return left + (math.log10(v) - math.log10(x_lo)) / (math.log10(x_hi) - math.log10(x_lo)) * (width - left - right)

    def y(v: float) -> float:
        v = min(max(v, y_lo), y_hi)
        return height - bottom - (math.log10(v) - math.log10(y_lo)) / (math.log10(y_hi) - math.log10(y_lo)) * (
            height - top - bottom)

    svg = Svg(width, height, "Roofline", "each profiled kernel by arithmetic intensity and FP32 rate, under the "
              "GPU's DRAM bandwidth and FP32 peak", cls="chart roofline")
    for e in range(-2, 4):
        svg.el("line", x1=x(10.0 ** e), x2=x(10.0 ** e), y1=top, y2=height - bottom, class_="grid")
        svg.text(x(10.0 ** e), height - bottom + 14, f"{10.0 ** e:g}", cls="tick", anchor="middle")
    for e in range(int(math.log10(y_lo)), int(math.log10(y_hi)) + 1):
        svg.el("line", x1=left, x2=width - right, y1=y(10.0 ** e), y2=y(10.0 ** e), class_="grid")
        svg.text(left - 6, y(10.0 ** e) + 4, f"{10.0 ** e / 1e12:g} T", cls="tick", anchor="end")
    ridge = p.peak_flop_per_s / p.peak_bytes_per_s
    start = max(x_lo, y_lo / p.peak_bytes_per_s)
    svg.el("polyline", points=f"{x(start):.1f},{y(start * p.peak_bytes_per_s):.1f} {x(ridge):.1f},"
           f"{y(p.peak_flop_per_s):.1f} {x(x_hi):.1f},{y(p.peak_flop_per_s):.1f}", class_="roof")
    svg.text(x(ridge) + 6, y(p.peak_flop_per_s) - 6, f"FP32 peak {p.peak_flop_per_s / 1e12:.1f} TFLOP/s", cls="tick")
    svg.text(x(start) + 4, y(start * p.peak_bytes_per_s) - 8, f"DRAM {p.peak_bytes_per_s / 1e12:.2f} TB/s", cls="tick")
    svg.text(left + (width - left - right) / 2, height - 6, "arithmetic intensity (FLOP per DRAM byte)",
             cls="axis-title", anchor="middle")
    placed: list[tuple[float, float, float, float]] = []  # the labels' boxes so far: none is drawn over another
    seen: set[tuple[str, str]] = set()
    for k in points:
        if (k.role, short_name(k.kernel)) in seen:  # cuBLAS, profiled once per perf test: one dot is enough
            continue
        seen.add((k.role, short_name(k.kernel)))
        m = k.metrics
        ai = m["flop"] / m["dram_bytes"]
        tip = (f"{short_name(k.kernel)} ({_role(k)}, {k.test}): {ai:.2f} FLOP/byte, "
               f"{m['flop_per_s'] / 1e12:.2f} TFLOP/s")
        cx, cy = x(ai), y(m["flop_per_s"])
        svg.el("circle", cx=cx, cy=cy, r=5, class_=f"pt pt-{k.role}", title=tip)
        label = _cut(short_name(k.kernel), 28)
        box = _label_box(label, cx, cy, width - right, placed)
        if box is not None:  # no room: the dot's tooltip and the tables below still name it
            placed.append(box)
            svg.text(box[0], box[3] - 3, label, cls="pt-label")
    return svg.markup()


LABEL_CHAR_PX, LABEL_LINE_PX = 6.0, 13.0  # the label font's average advance and line height


def _label_box(label: str, cx: float, cy: float, right_edge: float,
               placed: list[tuple[float, float, float, float]]) -> tuple[float, float, float, float] | None:
    """Where a dot's label goes (x0, y0, x1, y1): right of the dot, or left of it near the right edge, moved
    down a line at a time past labels already placed; None when three lines down still overlap."""
    w = len(label) * LABEL_CHAR_PX
    x0 = cx + 8 if cx + 8 + w <= right_edge else cx - 8 - w
    for step in range(4):
        y0 = cy - 8 + step * LABEL_LINE_PX
        box = (x0, y0, x0 + w, y0 + LABEL_LINE_PX)
        if not any(box[0] < b[2] and b[0] < box[2] and box[1] < b[3] and b[1] < box[3] for b in placed):
            return box
    return None
