#!/usr/bin/env python3
"""Writes the chapter figures: plain SVG files in labs/NN-slug/figures/, drawn from the labs' own constants.

    python3 docs/figures/make_figures.py           # (re)write every figure
    python3 docs/figures/make_figures.py --check   # exit 1 if a committed figure differs from what this makes
    python3 docs/figures/make_figures.py --list    # the figures, one per line

Standard library only. Every figure is a self-contained SVG: no scripts, no external fonts, images or
links, a <title> and a <desc>, a viewBox, a white background (so it reads in GitHub's dark theme too),
one palette and font-family "sans-serif". Where a drawing is regular (grids, trees, networks,
timelines) it is computed, and the sizes that matter are read from the lab's code (`constexpr int kTile
= 32;` lines in its .cu and .cuh files), so a changed constant changes the figure and --check notices.
A constant that cannot be found falls back to the value written here, with a warning on stderr.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import math
import operator
import re
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape

ROOT = Path(__file__).resolve().parents[2]

# --- palette (GitHub Primer colours: dark enough for text on white, light tints for fills) -------------
INK = "#1f2328"
MUTED = "#57606a"
LINE = "#8c959f"
FAINT = "#d0d7de"
PAPER = "#ffffff"
WASH = "#f6f8fa"
BLUE, BLUE_BG = "#0969da", "#ddf4ff"
GREEN, GREEN_BG = "#1a7f37", "#dafbe1"
ORANGE, ORANGE_BG = "#bc4c00", "#fff1e5"
PURPLE, PURPLE_BG = "#8250df", "#fbefff"
RED, RED_BG = "#cf222e", "#ffebe9"
YELLOW_BG = "#fff8c5"
FONT = "sans-serif"


# --- reading the labs' constants ---------------------------------------------------------------------------

_CONSTEXPR = re.compile(r"constexpr\s+(?:[\w:]+\s+)+?(k\w+)\s*=\s*([^;{}]+);")
_SUFFIX = re.compile(r"\b(0[xX][0-9a-fA-F]+|\d+)[uUlL]+\b")
_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
        ast.Div: operator.floordiv, ast.LShift: operator.lshift, ast.RShift: operator.rshift}
WARNINGS: list[str] = []


def _eval(node: ast.AST, env: dict[str, int]) -> int:
    """An integer C++ constant expression of literals, earlier constants, + - * / << >> and parentheses."""
    if isinstance(node, ast.Expression):
        return _eval(node.body, env)
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return node.value
    if isinstance(node, ast.Name) and node.id in env:
        return env[node.id]
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_eval(node.left, env), _eval(node.right, env))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_eval(node.operand, env)
    raise ValueError("not a simple integer expression")


def lab_dir(number: str) -> Path:
    """labs/NN-slug for a lab number ("05"), whatever its slug is."""
    found = sorted((ROOT / "labs").glob(f"{number}-*/"))
    if not found:
        raise SystemExit(f"make_figures: no labs/{number}-*/ folder under {ROOT}")
    return found[0]


_CONSTANTS: dict[str, dict[str, int]] = {}


def lab_constants(number: str) -> dict[str, int]:
    """Every `constexpr <type> kName = <integer expression>;` of the lab's contract (.cuh) and student file
    (.cu; the tests are left out), in file order, expressions evaluated with the constants before them."""
    if number not in _CONSTANTS:
        env: dict[str, int] = {}
        folder = lab_dir(number)
        files = sorted(folder.glob("*.cuh")) + sorted(p for p in folder.glob("*.cu") if not p.name.startswith("test_"))
        for path in files:
            for name, expr in _CONSTEXPR.findall(path.read_text(encoding="utf-8")):
                try:
                    env[name] = _eval(ast.parse(_SUFFIX.sub(r"\1", expr.strip()), mode="eval"), env)
                except (SyntaxError, ValueError, KeyError, ZeroDivisionError):
                    pass  # not an integer constant (a function, a float, a mask we do not need)
        _CONSTANTS[number] = env
    return _CONSTANTS[number]


def const(number: str, name: str, fallback: int) -> int:
    """Constant `name` of lab `number`; `fallback` (with a warning) when the lab's code no longer has it."""
    value = lab_constants(number).get(name)
    if value is None:
        WARNINGS.append(f"lab {number}: no constexpr {name} found; the figure uses {fallback}")
        return fallback
    return value


# --- a small SVG writer ---------------------------------------------------------------------------------------


def num(v: float) -> str:
    """A coordinate as short, stable text: integers bare, others to two decimals."""
    if isinstance(v, int):
        return str(v)
    s = f"{v:.2f}".rstrip("0").rstrip(".")
    return "0" if s in ("-0", "") else s


class Svg:
    """Elements in drawing order; render() gives the whole file."""

    def __init__(self, width: int, height: int, title: str, desc: str) -> None:
        self.width, self.height, self.title, self.desc = width, height, title, desc
        self.items: list[str] = []
        self.markers: dict[str, str] = {}

    @staticmethod
    def _attrs(attrs: dict[str, object]) -> str:
        out = []
        for key, value in attrs.items():
            if value is None:
                continue
            key = key.rstrip("_").replace("_", "-")
            text = num(value) if isinstance(value, (int, float)) else str(value)
            out.append(f'{key}="{escape(text, {chr(34): "&quot;"})}"')
        return " ".join(out)

    def el(self, tag: str, **attrs: object) -> None:
        self.items.append(f"<{tag} {self._attrs(attrs)}/>")

    def rect(self, x: float, y: float, w: float, h: float, fill: str = "none", stroke: str | None = INK,
             sw: float = 1, rx: float | None = None, dash: str | None = None) -> None:
        self.el("rect", x=x, y=y, width=w, height=h, rx=rx, fill=fill, stroke=stroke,
                stroke_width=sw if stroke else None, stroke_dasharray=dash)

    def marker(self, color: str) -> str:
        if color not in self.markers:
            self.markers[color] = f"arrow{len(self.markers)}"
        return self.markers[color]

    def line(self, x1: float, y1: float, x2: float, y2: float, stroke: str = INK, sw: float = 1,
             dash: str | None = None, arrow: bool = False) -> None:
        self.el("line", x1=x1, y1=y1, x2=x2, y2=y2, stroke=stroke, stroke_width=sw, stroke_dasharray=dash,
                marker_end=f"url(#{self.marker(stroke)})" if arrow else None)

    def path(self, d: str, stroke: str = INK, sw: float = 1, fill: str = "none", dash: str | None = None,
             arrow: bool = False) -> None:
        self.el("path", d=d, fill=fill, stroke=stroke, stroke_width=sw, stroke_dasharray=dash,
                marker_end=f"url(#{self.marker(stroke)})" if arrow else None)

    def circle(self, cx: float, cy: float, r: float, fill: str = INK, stroke: str | None = None) -> None:
        self.el("circle", cx=cx, cy=cy, r=r, fill=fill, stroke=stroke)

    def text(self, x: float, y: float, s: str, size: float = 13, anchor: str = "middle", fill: str = INK,
             weight: str | None = None, italic: bool = False) -> None:
        """Text whose middle (not baseline) is at y."""
        attrs = self._attrs({"x": x, "y": y + 0.35 * size, "font-size": size, "text-anchor": anchor,
                             "fill": fill, "font-weight": weight, "font-style": "italic" if italic else None})
        self.items.append(f"<text {attrs}>{escape(s)}</text>")

    def label(self, x: float, y: float, s: str, size: float = 13, anchor: str = "middle", **kw: object) -> None:
        """Text on a white backing, for a label that sits across lines or arrows."""
        w = len(s) * size * 0.58 + 8
        left = x - w / 2 if anchor == "middle" else (x - 4 if anchor == "start" else x - w + 4)
        self.rect(left, y - size * 0.75, w, size * 1.5, fill=PAPER, stroke=None)
        self.text(x, y, s, size=size, anchor=anchor, **kw)  # type: ignore[arg-type]

    def lines(self, x: float, y: float, rows: list[str], size: float = 13, gap: float = 1.45, **kw: object) -> None:
        for i, row in enumerate(rows):
            self.text(x, y + i * size * gap, row, size=size, **kw)  # type: ignore[arg-type]

    def box(self, x: float, y: float, w: float, h: float, label: str, fill: str, stroke: str = INK,
            size: float = 12, color: str = INK, sw: float = 1, weight: str | None = None) -> None:
        self.rect(x, y, w, h, fill=fill, stroke=stroke, sw=sw)
        self.text(x + w / 2, y + h / 2, label, size=size, fill=color, weight=weight)

    def brace(self, x1: float, x2: float, y: float, label: str, up: bool = True, color: str = MUTED,
              size: float = 12) -> None:
        """A bracket over (up) or under [x1, x2] at height y, with a label beyond it."""
        t = -6 if up else 6
        self.path(f"M{num(x1)},{num(y)} v{num(t)} H{num(x2)} v{num(-t)}", stroke=color)
        self.text((x1 + x2) / 2, y + t + (-9 if up else 9), label, size=size, fill=color)

    def render(self) -> str:
        head = (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {self.width} {self.height}" '
                f'width="{self.width}" height="{self.height}" font-family="{FONT}" role="img" '
                f'aria-labelledby="title desc">')
        out = ['<?xml version="1.0" encoding="UTF-8"?>', head,
               f'<title id="title">{escape(self.title)}</title>',
               f'<desc id="desc">{escape(self.desc)}</desc>']
        if self.markers:
            out.append("<defs>")
            for color, ident in self.markers.items():
                out.append(f'<marker id="{ident}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
                           f'markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" '
                           f'fill="{color}"/></marker>')
            out.append("</defs>")
        out.append(f'<rect x="0" y="0" width="{self.width}" height="{self.height}" fill="{PAPER}"/>')
        out.extend(self.items)
        out.append("</svg>")
        return "\n".join(out) + "\n"


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def grouped(n: int) -> str:
    """12345 -> '12,345' (the READMEs write large numbers with separators)."""
    return f"{n:,}"


# =============================================================================================================
# Lab 02: indexing
# =============================================================================================================


def fig_02_global_id_1d() -> Svg:
    grid, block = 4, 8  # illustrative: a 1-D grid of 4 blocks of 8 threads
    hb, ht = 2, 3  # the highlighted thread
    cell, gap, x0, y0 = 22, 14, 112, 62
    width = x0 + grid * block * cell + (grid - 1) * gap + 28
    s = Svg(width, 218, "From blockIdx.x and threadIdx.x to a global id (1-D)",
            f"A 1-D grid of {grid} blocks of {block} threads. Each cell is a thread, labelled with its threadIdx.x; "
            f"below each cell is its global id, blockIdx.x * blockDim.x + threadIdx.x. The thread with "
            f"blockIdx.x = {hb} and threadIdx.x = {ht} has global id {hb * block + ht}.")
    s.text(x0 - 12, y0 + cell / 2, "threadIdx.x", size=12, anchor="end", fill=MUTED)
    s.text(x0 - 12, y0 + cell + 16, "global id", size=12, anchor="end", fill=MUTED)
    for b in range(grid):
        bx = x0 + b * (block * cell + gap)
        s.brace(bx, bx + block * cell, y0 - 6, f"blockIdx.x = {b}", color=ORANGE if b == hb else MUTED)
        for t in range(block):
            x = bx + t * cell
            on = b == hb and t == ht
            fill = ORANGE_BG if on else (BLUE_BG if b % 2 == 0 else WASH)
            s.box(x, y0, cell, cell, str(t), fill=fill, stroke=ORANGE if on else LINE, size=11,
                  sw=2 if on else 1, weight="bold" if on else None)
            s.text(x + cell / 2, y0 + cell + 16, str(b * block + t), size=11,
                   fill=ORANGE if on else INK, weight="bold" if on else None)
    hx = x0 + hb * (block * cell + gap) + ht * cell + cell / 2
    s.line(hx, y0 + cell + 28, hx, y0 + cell + 52, stroke=ORANGE)
    s.text(hx, y0 + cell + 66,
           f"global id = blockIdx.x · blockDim.x + threadIdx.x = {hb} · {block} + {ht} = {hb * block + ht}",
           size=13, fill=ORANGE)
    s.text(width / 2, y0 + cell + 98,
           f"gridDim.x = {grid} blocks, blockDim.x = {block} threads: ids 0 … {grid * block - 1}, each exactly once",
           size=12, fill=MUTED)
    return s


def fig_02_warps_in_block() -> Svg:
    warp = const("02", "kWarp", 32)
    bx, by = 20, 5  # illustrative block shape (the tests and questions use others)
    n = bx * by
    warps = ceil_div(n, warp)
    cell, x0, y0 = 30, 108, 58
    fills = [BLUE_BG, ORANGE_BG, GREEN_BG, PURPLE_BG]
    strokes = [BLUE, ORANGE, GREEN, PURPLE]
    width = x0 + bx * cell + 40
    s = Svg(width, y0 + by * cell + 112, f"How a {bx} × {by} block is cut into warps",
            f"A block of {bx} by {by} threads. Each cell holds the thread's number in the block, threadIdx.x + "
            f"threadIdx.y * blockDim.x, and is coloured by its warp, number / {warp}. The {n} threads fill "
            f"{warps} warps; warps run across row boundaries, and the last warp has {n - (warps - 1) * warp} "
            f"active lanes.")
    s.text(x0, 18, "threadIdx.x →", size=12, fill=MUTED, anchor="start")
    for x in range(bx):
        s.text(x0 + x * cell + cell / 2, 40, str(x), size=11, fill=MUTED)
    s.text(x0 - 12, 40, "threadIdx.y ↓", size=12, fill=MUTED, anchor="end")
    for y in range(by):
        s.text(x0 - 12, y0 + y * cell + cell / 2, str(y), size=11, fill=MUTED, anchor="end")
        for x in range(bx):
            t = x + y * bx
            w = t // warp
            s.box(x0 + x * cell, y0 + y * cell, cell, cell, str(t), fill=fills[w % 4], stroke=LINE, size=11)
    # thick outline where the warp changes
    for t in range(n):
        x, y = t % bx, t // bx
        if x > 0 and (t // warp) != ((t - 1) // warp):
            s.line(x0 + x * cell, y0 + y * cell, x0 + x * cell, y0 + (y + 1) * cell, stroke=INK, sw=2.5)
    ly = y0 + by * cell + 26
    for w in range(warps):
        first, last = w * warp, min(n, (w + 1) * warp) - 1
        col = w % 2
        xx = x0 + col * (bx * cell / 2)
        yy = ly + (w // 2) * 24
        s.rect(xx, yy - 8, 16, 16, fill=fills[w % 4], stroke=strokes[w % 4])
        idle = (w + 1) * warp - 1 - last
        note = f", {idle} idle lanes" if idle else ""
        s.text(xx + 24, yy, f"warp {w}: threads {first}–{last} (lanes 0–{last - first}{note})", size=12, anchor="start")
    s.text(width / 2, ly + 24 * ceil_div(warps, 2) + 14,
           f"thread number = threadIdx.x + threadIdx.y · blockDim.x;   warp = number / {warp},  lane = number % {warp}",
           size=12, fill=MUTED)
    return s


def fig_02_image_grid() -> Svg:
    bw = const("02", "kImageBlockX", 32)
    bh = const("02", "kImageBlockY", 8)
    width, height = 76, 62  # the README's worked example
    gx, gy = ceil_div(width, bw), ceil_div(height, bh)
    px = 5  # drawing scale: pixels of the figure per image pixel
    x0, y0 = 112, 52
    hb, ht = (2, 1), (5, 3)
    hx, hy = hb[0] * bw + ht[0], hb[1] * bh + ht[1]
    W = x0 + gx * bw * px + 390
    H = y0 + gy * bh * px + 44
    s = Svg(W, H, f"A {width} × {height} image covered by {bw} × {bh} blocks",
            f"A {gx} by {gy} grid of {bw} by {bh} thread blocks covers a {width} by {height} pixel image: "
            f"{gx * bw} by {gy * bh} threads. Threads with x >= {width} or y >= {height} lie outside the image and "
            f"must fail the guard. The thread at threadIdx ({ht[0]}, {ht[1]}) of block ({hb[0]}, {hb[1]}) "
            f"handles pixel x = {hx}, y = {hy}, at index {hy * width + hx}.")
    gw, gh = gx * bw * px, gy * bh * px
    s.rect(x0, y0, gw, gh, fill=RED_BG, stroke=None)
    s.rect(x0, y0, width * px, height * px, fill=BLUE_BG, stroke=BLUE, sw=1.5)
    for i in range(gx + 1):
        s.line(x0 + i * bw * px, y0, x0 + i * bw * px, y0 + gh, stroke=INK, sw=1)
    for j in range(gy + 1):
        s.line(x0, y0 + j * bh * px, x0 + gw, y0 + j * bh * px, stroke=INK, sw=1)
    for i in range(gx):
        for j in range(gy):
            if (i, j) != hb:
                s.text(x0 + i * bw * px + 6, y0 + (j + 0.5) * bh * px, f"({i}, {j})", size=11, fill=MUTED,
                       anchor="start")
    s.rect(x0 + hb[0] * bw * px, y0 + hb[1] * bh * px, bw * px, bh * px, fill=ORANGE_BG, stroke=ORANGE, sw=2)
    s.rect(x0 + hx * px, y0 + hy * px, px, px, fill=ORANGE, stroke=None)
    s.brace(x0, x0 + width * px, y0 - 6, f"width = {width}", color=BLUE)
    s.text(x0 + width * px + (gw - width * px) / 2, y0 - 21, f"x ≥ {width}", size=11, fill=RED)
    s.path(f"M{x0 - 6},{y0} h-6 V{y0 + height * px} h6", stroke=BLUE)
    s.text(x0 - 16, y0 + height * px / 2, f"height = {height}", size=12, fill=BLUE, anchor="end")
    s.text(x0 - 16, y0 + height * px + (gh - height * px) / 2, f"y ≥ {height}", size=11, fill=RED, anchor="end")
    s.text(x0 + gw / 2, y0 + gh + 20, f"grid = ({gx}, {gy}) blocks of ({bw}, {bh}) threads = "
           f"{gx * bw} × {gy * bh} threads", size=12, fill=MUTED)
    # the worked thread, on the right
    tx = x0 + gw + 36
    s.line(x0 + hx * px + px, y0 + hy * px + px / 2, tx - 6, y0 + 40, stroke=ORANGE, arrow=True)
    rows = [(0, f"block ({hb[0]}, {hb[1]}), thread ({ht[0]}, {ht[1]}):", "bold"),
            (0, "x = blockIdx.x · blockDim.x + threadIdx.x", None),
            (14, f"= {hb[0]} · {bw} + {ht[0]} = {hx}", None),
            (0, "y = blockIdx.y · blockDim.y + threadIdx.y", None),
            (14, f"= {hb[1]} · {bh} + {ht[1]} = {hy}", None),
            (0, f"index = y · width + x = {hy} · {width} + {hx} = {hy * width + hx}", None)]
    for i, (indent, row, weight) in enumerate(rows):
        s.text(tx + indent, y0 + 40 + i * 12.5 * 1.45, row, size=12.5, anchor="start", weight=weight)
    ly = y0 + 40 + 6 * 12.5 * 1.45 + 22
    s.rect(tx, ly - 8, 16, 16, fill=BLUE_BG, stroke=BLUE)
    s.text(tx + 24, ly, f"a thread with a pixel: x < {width} and y < {height}", size=12, anchor="start")
    s.rect(tx, ly + 16, 16, 16, fill=RED_BG, stroke=None)
    s.text(tx + 24, ly + 24, "no pixel: the guard sends it home", size=12, anchor="start")
    s.text(tx, ly + 52, f"each block row is one warp: {bw} consecutive x, one y", size=12, anchor="start", fill=MUTED)
    return s


# =============================================================================================================
# Lab 04: pitched memory
# =============================================================================================================


def fig_04_pitched_rows() -> Svg:
    warp_x = const("04", "kBlockX", 32)
    floats, pitch, rows = 100, 512, 4  # 400-byte rows get a 512-byte pitch from cudaMallocPitch on an H100
    row_bytes = floats * 4
    sc = 1.25  # figure pixels per byte
    x0, y0, rh, gap = 96, 92, 30, 12
    W = int(x0 + pitch * sc + 170)
    H = y0 + rows * (rh + gap) + 84
    ex, ey = 37, 2  # the element whose address is worked out
    s = Svg(W, H, "Pitched rows: width · sizeof(float) bytes of data, padded up to the pitch",
            f"A {floats}-float-wide image stored with cudaMallocPitch: each row holds {row_bytes} bytes of data "
            f"followed by {pitch - row_bytes} bytes of padding, so consecutive rows start {pitch} bytes (the pitch) "
            f"apart, on aligned addresses. Element (x, y) is at byte y * pitch + x * 4: element ({ex}, {ey}) is at "
            f"byte {ey * pitch + ex * 4}.")
    # byte ruler
    for b in range(0, pitch + 1, 128):
        xx = x0 + b * sc
        s.line(xx, y0 - 14, xx, y0 - 4, stroke=LINE)
        s.text(xx, y0 - 24, str(b), size=11, fill=MUTED)
    s.text(x0 - 12, y0 - 24, "byte", size=11, fill=MUTED, anchor="end")
    s.brace(x0, x0 + row_bytes * sc, y0 - 40, f"width · sizeof(float) = {floats} · 4 = {row_bytes} bytes", color=BLUE)
    s.brace(x0 + row_bytes * sc, x0 + pitch * sc, y0 - 40, f"padding: {pitch - row_bytes}", color=MUTED)
    for y in range(rows):
        yy = y0 + y * (rh + gap)
        s.text(x0 - 12, yy + rh / 2 - 7, f"row {y}", size=12, anchor="end")
        s.text(x0 - 12, yy + rh / 2 + 8, f"byte {y * pitch}", size=10.5, anchor="end", fill=MUTED)
        s.rect(x0, yy, row_bytes * sc, rh, fill=BLUE_BG, stroke=BLUE)
        s.rect(x0 + row_bytes * sc, yy, (pitch - row_bytes) * sc, rh, fill=WASH, stroke=LINE, dash="4 3")
        s.text(x0 + row_bytes * sc + (pitch - row_bytes) * sc / 2, yy + rh / 2, "padding", size=11, fill=MUTED)
        if y != ey:
            s.text(x0 + row_bytes * sc / 2, yy + rh / 2, f"(0,{y})  (1,{y})  (2,{y})  …  ({floats - 1},{y})", size=11)
        # the first warp's 32 floats of the row
    s.rect(x0, y0, warp_x * 4 * sc, rh, fill="none", stroke=GREEN, sw=2)
    # the worked element
    yy = y0 + ey * (rh + gap)
    s.text(x0 + 20 * 4 * sc / 2, yy + rh / 2, f"(0,{ey}) …", size=11)
    s.rect(x0 + ex * 4 * sc, yy, 4 * sc, rh, fill=ORANGE, stroke=None)
    s.text(x0 + (ex + 1) * 4 * sc + 8, yy + rh / 2, f"({ex},{ey})", size=11, anchor="start", fill=ORANGE, weight="bold")
    s.text(x0 + row_bytes * sc * 0.72, yy + rh / 2, f"… ({floats - 1},{ey})", size=11)
    # right-hand labels
    rx = x0 + pitch * sc + 14
    s.path(f"M{num(rx)},{y0} h6 V{y0 + rows * (rh + gap) - gap} h-6", stroke=INK)
    s.text(rx + 14, y0 + (rows * (rh + gap) - gap) / 2 - 8, f"{rows} rows,", size=12, anchor="start")
    s.text(rx + 14, y0 + (rows * (rh + gap) - gap) / 2 + 10, f"pitch = {pitch} B each", size=12, anchor="start")
    by = y0 + rows * (rh + gap) - gap + 8
    s.brace(x0, x0 + pitch * sc, by, f"pitch = {pitch} bytes (chosen by cudaMallocPitch)", up=False, color=INK)
    s.text(x0, by + 44, f"element ({ex},{ey}) = ((float*)((char*)base + {ey} · pitch))[{ex}]"
           f"  →  byte {ey} · {pitch} + {ex} · 4 = {ey * pitch + ex * 4}", size=12.5, anchor="start", fill=ORANGE)
    s.rect(x0, by + 62, 16, 12, fill="none", stroke=GREEN, sw=2)
    s.text(x0 + 24, by + 68, f"one warp of a {warp_x}-wide block reads {warp_x} consecutive floats = {warp_x * 4} bytes",
           size=12, anchor="start", fill=GREEN)
    return s


# =============================================================================================================
# Lab 05: tiled matmul
# =============================================================================================================


def fig_05_tile_walk() -> Svg:
    T = const("05", "kMatTile", 32)
    mt, kt, nt = 3, 4, 3  # tiles of C down, phases along k, tiles of C across
    br, bc = 1, 2  # the block's tile of C
    cur = 1  # the phase drawn as current
    u = 46  # figure pixels per tile
    ax, by0 = 40, 40
    bx = ax + kt * u + 36
    cy = by0 + kt * u + 36
    W = bx + nt * u + 380
    H = cy + mt * u + 64
    s = Svg(W, H, "The tile walk of the tiled matmul",
            f"C = A times B in tiles of {T} by {T}. The block that computes tile ({br}, {bc}) of C walks along k in "
            f"{kt} phases. In phase p it loads tile ({br}, p) of A and tile (p, {bc}) of B into shared memory, "
            f"waits, accumulates {T} products per thread, and waits again. Phase {cur} is highlighted.")
    A = (ax, cy)
    B = (bx, by0)
    C = (bx, cy)

    def grid(x: float, y: float, rows: int, cols: int) -> None:
        s.rect(x, y, cols * u, rows * u, fill=WASH, stroke=LINE)
        for i in range(1, cols):
            s.line(x + i * u, y, x + i * u, y + rows * u, stroke=FAINT)
        for j in range(1, rows):
            s.line(x, y + j * u, x + cols * u, y + j * u, stroke=FAINT)

    grid(*A, mt, kt)
    grid(*B, kt, nt)
    grid(*C, mt, nt)
    for p in range(kt):
        on = p == cur
        s.box(A[0] + p * u, A[1] + br * u, u, u, f"p={p}", fill=ORANGE if on else ORANGE_BG,
              stroke=ORANGE, size=12, color=PAPER if on else ORANGE, weight="bold" if on else None)
        s.box(B[0] + bc * u, B[1] + p * u, u, u, f"p={p}", fill=BLUE if on else BLUE_BG,
              stroke=BLUE, size=12, color=PAPER if on else BLUE, weight="bold" if on else None)
    s.box(C[0] + bc * u, C[1] + br * u, u, u, "acc", fill=GREEN_BG, stroke=GREEN, size=12, color=GREEN, sw=2,
          weight="bold")
    s.text(A[0] + kt * u / 2, A[1] + mt * u + 18, f"A (m × k), k = {kt}·T", size=13, weight="bold")
    s.text(B[0] + nt * u / 2, B[1] - 16, "B (k × n)", size=13, weight="bold")
    s.text(C[0] + nt * u / 2, C[1] + mt * u + 18, "C (m × n)", size=13, weight="bold")
    # the strips of A and B feed the C tile
    s.path(f"M{A[0] + kt * u + 2},{A[1] + br * u + u / 2} H{C[0] + bc * u - 3}", stroke=ORANGE, sw=1.5, arrow=True)
    s.path(f"M{B[0] + bc * u + u / 2},{B[1] + kt * u + 2} V{C[1] + br * u - 3}", stroke=BLUE, sw=1.5, arrow=True)
    # the T label on one tile
    s.brace(C[0] + bc * u, C[0] + (bc + 1) * u, C[1] + mt * u + 34, f"T = {T}", up=False, color=MUTED, size=11)
    tx = C[0] + nt * u + 36
    rows = [(0, f"one block: T × T = {T} × {T} threads,", INK, "bold"),
            (0, f"one T × T tile of C: tile ({br}, {bc})", INK, "bold"),
            (0, "", INK, None),
            (0, f"for p = 0 … {kt - 1}   (phase {cur} drawn dark):", INK, None),
            (16, f"load A tile ({br}, p): a[row][p·T + tx]", ORANGE, None),
            (16, f"load B tile (p, {bc}): b[p·T + ty][col]", BLUE, None),
            (16, "__syncthreads()  (1) both tiles in place", INK, None),
            (16, f"acc += {T} products from shared memory", GREEN, None),
            (16, "__syncthreads()  (2) done reading them", INK, None),
            (0, "store c[row][col] = acc  (if inside C)", GREEN, None),
            (0, "", INK, None),
            (0, "each element loaded from global memory", MUTED, None),
            (0, f"is used T = {T} times from shared memory", MUTED, None)]
    for i, (indent, row, color, weight) in enumerate(rows):
        s.text(tx + indent, by0 + 10 + i * 19, row, size=12.5, anchor="start", fill=color, weight=weight)
    return s


def fig_05_smem_banks() -> Svg:
    T = const("05", "kTile", 32)
    banks = 32  # shared memory on sm_90: 32 banks, each 4 bytes wide
    cell = 11
    col = 0  # the tile column a warp reads
    x0s = [80, 80 + banks * cell + 110]
    y0 = 92
    rows_pad = ceil_div(T * (T + 1), banks)
    W = x0s[1] + banks * cell + 30
    H = y0 + rows_pad * cell + 96
    s = Svg(W, H, "Shared-memory banks: reading a tile column with and without padding",
            f"Shared memory drawn as rows of {banks} banks of 4 bytes. Left: float tile[{T}][{T}]; element (r, c) is "
            f"word {T}r + c, in bank c, so the {T} elements of column {col} all fall in bank {col}: a {T}-way "
            f"conflict, {T} passes. Right: float tile[{T}][{T + 1}]; element (r, c) is word {T + 1}r + c, in bank "
            f"(r + c) % {banks}, so column {col} touches {banks} different banks: one pass.")
    for panel, pad in enumerate((0, 1)):
        x0 = x0s[panel]
        stride = T + pad
        words = T * stride
        mem_rows = ceil_div(words, banks)
        head = f"float tile[{T}][{stride}]"
        s.text(x0 + banks * cell / 2, 18, head, size=14, weight="bold")
        s.text(x0 + banks * cell / 2, 38,
               f"element (r, c) = word {stride}·r + c, bank " + ("c" if pad == 0 else f"(r + c) % {banks}"),
               size=12, fill=MUTED)
        for b in range(0, banks, 4):
            s.text(x0 + b * cell + cell / 2, y0 - 24, str(b), size=10, fill=MUTED)
        s.text(x0 + (banks - 1) * cell + cell / 2, y0 - 24, str(banks - 1), size=10, fill=MUTED)
        s.text(x0 - 8, y0 - 24, "bank", size=10, fill=MUTED, anchor="end")
        s.text(x0 - 8, y0 + cell / 2, "byte 0", size=10, fill=MUTED, anchor="end")
        s.text(x0 - 8, y0 + (mem_rows - 0.5) * cell, str((mem_rows - 1) * banks * 4), size=10, fill=MUTED, anchor="end")
        hits = {}
        for r in range(T):
            w = r * stride + col
            hits[w] = r
        hit_fill = RED if pad == 0 else GREEN
        fills = [hit_fill if w in hits else FAINT if w % stride >= T  # FAINT: the padding word of a row
                 else BLUE_BG if (w // stride) % 2 == 0 else PAPER for w in range(words)]
        for mr in range(mem_rows):  # runs of equal fill within a memory row: one rect each
            b = 0
            while b < banks and mr * banks + b < words:
                fill = fills[mr * banks + b]
                e = b
                while e + 1 < banks and mr * banks + e + 1 < words and fills[mr * banks + e + 1] == fill:
                    e += 1
                if fill != PAPER:
                    s.rect(x0 + b * cell, y0 + mr * cell, (e - b + 1) * cell, cell, fill=fill, stroke=None)
                b = e + 1
        for b in range(1, banks):
            s.line(x0 + b * cell, y0, x0 + b * cell, y0 + mem_rows * cell, stroke=FAINT, sw=0.5)
        for mr in range(1, mem_rows):
            s.line(x0, y0 + mr * cell, x0 + banks * cell, y0 + mr * cell, stroke=FAINT, sw=0.5)
        s.rect(x0, y0, banks * cell, mem_rows * cell, fill="none", stroke=LINE)
        used = {(r * stride + col) % banks for r in range(T)}
        ways = T // len(used) if T % len(used) == 0 else math.ceil(T / len(used))
        verdict = (f"column {col}: {T} lanes, {len(used)} bank → {ways}-way conflict, {ways} passes" if len(used) == 1
                   else f"column {col}: {T} lanes, {len(used)} banks → 1 pass")
        s.text(x0 + banks * cell / 2, y0 + mem_rows * cell + 22, verdict, size=12.5,
               fill=RED if pad == 0 else GREEN, weight="bold")
    ly = H - 40
    items = [(BLUE_BG, "one row of the tile (rows alternate shades)"), (FAINT, "padding word, never used"),
             (RED, f"column {col} read by a warp: one bank"), (GREEN, f"column {col} read by a warp: {banks} banks")]
    for i, (fill, label) in enumerate(items):
        x = x0s[i % 2]
        yy = ly + (i // 2) * 20
        s.rect(x, yy - 6, 12, 12, fill=fill, stroke=LINE, sw=0.5)
        s.text(x + 18, yy, label, size=11.5, anchor="start")
    return s


# =============================================================================================================
# Lab 06: reduce
# =============================================================================================================


def fig_06_reduction_tree() -> Svg:
    block = const("06", "kBlock", 256)
    n = 16  # drawn: 16 values; the kernel's block has kBlock
    values = [3, 1, 7, 0, 4, 1, 6, 3, 2, 5, 0, 4, 1, 2, 3, 6]
    cell, x0, y0, rowgap = 38, 170, 46, 62
    steps = int(math.log2(n))
    W = x0 + n * cell + 104
    H = y0 + (steps + 1) * (cell + rowgap) - rowgap + 48
    s = Svg(W, H, "Tree reduction with sequential addressing",
            f"A shared-memory tree reduction of {n} values with sequential addressing. At each step with stride s, "
            f"threads 0 to s - 1 add s_data[tid + s] into s_data[tid]; s halves from {n // 2} to 1, with a "
            f"__syncthreads() between steps. The active threads stay packed at the start. The total, "
            f"{sum(values)}, ends in s_data[0].")
    s.text(x0 - 14, 18, "tid", size=11, fill=MUTED, anchor="end")
    for t in range(n):
        s.text(x0 + t * cell + cell / 2, 18, str(t), size=11, fill=MUTED)
    data = values[:]
    y = y0
    s.text(x0 - 14, y + cell / 2, "load s_data", size=12, anchor="end")
    for t in range(n):
        s.box(x0 + t * cell, y, cell, cell, str(data[t]), fill=BLUE_BG, stroke=LINE, size=12)
    stride = n // 2
    while stride >= 1:
        ny = y + cell + rowgap
        s.line(x0 - 150, y + cell + rowgap / 2, x0 + n * cell + 6, y + cell + rowgap / 2, stroke=FAINT, dash="4 3")
        s.text(x0 + n * cell + 10, y + cell + rowgap / 2, "__syncthreads()", size=10.5, fill=MUTED, anchor="start")
        new = data[:]
        for t in range(stride):
            new[t] = data[t] + data[t + stride]
            sx = x0 + (t + stride) * cell + cell / 2
            tx = x0 + t * cell + cell / 2
            s.line(sx, y + cell, tx + (4 if t + stride > t else 0), ny - 2, stroke=ORANGE, sw=1.2, arrow=True)
            s.line(tx, y + cell, tx, ny - 2, stroke=INK, sw=1.2, arrow=True)
        for t in range(n):
            if t < stride:
                s.box(x0 + t * cell, ny, cell, cell, str(new[t]), fill=ORANGE_BG, stroke=ORANGE, size=12,
                      weight="bold")
            else:
                s.box(x0 + t * cell, ny, cell, cell, str(new[t]), fill=WASH, stroke=FAINT, size=12, color=LINE)
        s.text(x0 - 14, ny + cell / 2 - 8, f"stride {stride}", size=12, anchor="end", weight="bold")
        s.text(x0 - 14, ny + cell / 2 + 8, f"tid < {stride} adds", size=11, anchor="end", fill=MUTED)
        data = new
        y = ny
        stride //= 2
    s.text(x0, y + cell + 24, f"s_data[0] = {data[0]}: the block's sum. A block of kBlock = {block} runs strides "
           f"{block // 2}, {block // 4}, …, 1: {int(math.log2(block))} steps.", size=12, anchor="start", fill=MUTED)
    return s


# =============================================================================================================
# Lab 07: scan
# =============================================================================================================

SCAN_IN = [3, 1, 7, 0, 4, 1, 6, 3]  # the README's example


def _scan_row(s: Svg, x0: float, y: float, cell: float, vals: list[int], fills: list[str], strokes: list[str],
              colors: list[str] | None = None) -> None:
    for i, v in enumerate(vals):
        s.box(x0 + i * cell, y, cell, cell, str(v), fill=fills[i], stroke=strokes[i], size=13,
              color=(colors[i] if colors else INK))


def fig_07_hillis_steele() -> Svg:
    vals = SCAN_IN[:]
    n = len(vals)
    cell, x0, y0, gap = 46, 190, 40, 58
    steps = int(math.log2(n))
    W = x0 + n * cell + 170
    H = y0 + (steps + 1) * (cell + gap) - gap + 56
    s = Svg(W, H, "Hillis–Steele inclusive scan",
            f"An inclusive Hillis–Steele scan of {vals}. At step d, every element x[t] with t >= 2^d adds "
            f"x[t - 2^d] from the previous step; the others are copied. Each step reads one buffer and writes the "
            f"other. After log2({n}) = {steps} steps each element holds the sum of everything up to it.")
    for t in range(n):
        s.text(x0 + t * cell + cell / 2, 16, f"t = {t}", size=11, fill=MUTED)
    y = y0
    s.text(x0 - 14, y + cell / 2, "in   (s_buf[0])", size=12, anchor="end")
    _scan_row(s, x0, y, cell, vals, [BLUE_BG] * n, [LINE] * n)
    for d in range(steps):
        off = 1 << d
        ny = y + cell + gap
        new = [vals[t] + (vals[t - off] if t >= off else 0) for t in range(n)]
        for t in range(n):
            cx = x0 + t * cell + cell / 2
            s.line(cx, y + cell, cx, ny - 2, stroke=LINE if t < off else INK, sw=1, arrow=True)
            if t >= off:
                s.line(x0 + (t - off) * cell + cell / 2 + 4, y + cell, cx - 5, ny - 2, stroke=ORANGE, sw=1.2,
                       arrow=True)
        act = [t >= off for t in range(n)]
        if d == steps - 1:
            _scan_row(s, x0, ny, cell, new, [GREEN_BG] * n, [GREEN] * n)
        else:
            _scan_row(s, x0, ny, cell, new, [ORANGE_BG if a else WASH for a in act],
                      [ORANGE if a else FAINT for a in act], [INK if a else MUTED for a in act])
        s.text(x0 - 14, ny + cell / 2 - 8, f"d = {d}: offset {off}", size=12, anchor="end", weight="bold")
        s.text(x0 - 14, ny + cell / 2 + 8, f"writes s_buf[{(d + 1) % 2}]", size=11, anchor="end", fill=MUTED)
        s.text(x0 + n * cell + 14, ny + cell / 2, f"t ≥ {off}: x[t] += x[t − {off}]", size=12, anchor="start",
               fill=ORANGE)
        vals = new
        y = ny
    s.text(x0 + n * cell / 2, y + cell + 24, f"the inclusive scan, after log₂ {n} = {steps} steps", size=12,
           fill=GREEN, weight="bold")
    return s


def fig_07_blelloch() -> Svg:
    vals = SCAN_IN[:]
    n = len(vals)
    cell, x0, y0, gap = 46, 150, 36, 40
    rows: list[tuple[str, list[int], set[int], list[tuple[int, int, str]]]] = []
    # up-sweep
    x = vals[:]
    rows.append(("in", x[:], set(), []))
    sstep = 1
    while sstep < n:
        arrows = []
        changed = set()
        for t in range(n // (2 * sstep)):
            left, right = sstep * (2 * t + 1) - 1, sstep * (2 * t + 2) - 1
            x[right] += x[left]
            arrows.append((left, right, "add"))
            changed.add(right)
        rows.append((f"up, s = {sstep}", x[:], changed, arrows))
        sstep *= 2
    total = x[n - 1]
    x[n - 1] = 0
    rows.append(("clear root", x[:], {n - 1}, []))
    sstep = n // 2
    while sstep >= 1:
        arrows = []
        changed = set()
        for t in range(n // (2 * sstep)):
            left, right = sstep * (2 * t + 1) - 1, sstep * (2 * t + 2) - 1
            old_left = x[left]
            x[left] = x[right]
            x[right] += old_left
            arrows.append((right, left, "copy"))
            arrows.append((left, right, "add"))
            changed |= {left, right}
        rows.append((f"down, s = {sstep}", x[:], changed, arrows))
        sstep //= 2
    assert x == [sum(vals[:i]) for i in range(n)], "Blelloch figure: the down-sweep must give the exclusive scan"
    up_rows = int(math.log2(n))
    W = x0 + n * cell + 250
    H = y0 + len(rows) * (cell + gap) - gap + 40
    s = Svg(W, H, "Blelloch scan: up-sweep, clear the root, down-sweep",
            f"A work-efficient Blelloch exclusive scan of {vals}. Up-sweep: at stride s the element at s(2t+2) - 1 "
            f"adds the one at s(2t+1) - 1, and the last element ends with the total, {total}. The last element is "
            f"then set to 0. Down-sweep: at each node the left child gets the node's value, and the right child gets "
            f"that value plus the left child's old value. The result is the exclusive scan {x}.")
    for t in range(n):
        s.text(x0 + t * cell + cell / 2, 14, f"{t}", size=11, fill=MUTED)
    prev_y = None
    for r, (label, row, changed, arrows) in enumerate(rows):
        y = y0 + r * (cell + gap)
        down = label.startswith("down")
        hl_fill, hl_stroke = (PURPLE_BG, PURPLE) if down else (ORANGE_BG, ORANGE)
        if label == "clear root":
            hl_fill, hl_stroke = (RED_BG, RED)
        fills = [hl_fill if i in changed else (BLUE_BG if r == 0 else WASH) for i in range(n)]
        strokes = [hl_stroke if i in changed else (LINE if r == 0 else FAINT) for i in range(n)]
        colors = [INK if (i in changed or r == 0) else MUTED for i in range(n)]
        if r == len(rows) - 1:
            fills, strokes, colors = [GREEN_BG] * n, [GREEN] * n, [INK] * n
        _scan_row(s, x0, y, cell, row, fills, strokes, colors)
        s.text(x0 - 14, y + cell / 2, label, size=12, anchor="end", weight="bold" if r else None)
        if prev_y is not None:
            for src, dst, kind in arrows:
                sx = x0 + src * cell + cell / 2
                dx = x0 + dst * cell + cell / 2
                color = PURPLE if kind == "copy" else ORANGE
                s.line(sx + (3 if dx > sx else -3), prev_y + cell, dx - (6 if dx > sx else -6), y - 2, stroke=color,
                       sw=1.3, arrow=True)
                if kind == "add":
                    s.line(dx, prev_y + cell, dx, y - 2, stroke=color, sw=1.3, arrow=True)
            if label == "clear root":
                cx = x0 + (n - 1) * cell + cell / 2
                s.line(cx, prev_y + cell, cx, y - 2, stroke=RED, sw=1.3, arrow=True)
        prev_y = y
    # phase brackets on the right
    bx = x0 + n * cell + 16
    ys = [y0 + r * (cell + gap) for r in range(len(rows))]

    def bracket(r1: int, r2: int, text: list[str], color: str) -> None:
        top, bottom = ys[r1], ys[r2] + cell
        s.path(f"M{bx},{top} h8 V{bottom} h-8", stroke=color, sw=1.5)
        s.lines(bx + 18, (top + bottom) / 2 - (len(text) - 1) * 9, text, size=12, anchor="start", fill=color)

    bracket(1, up_rows, ["up-sweep:", "right += left", f"(root ends with {total})"], ORANGE)
    bracket(up_rows + 1, up_rows + 1, ["root = 0"], RED)
    bracket(up_rows + 2, len(rows) - 1, ["down-sweep:"], PURPLE)
    mid = (ys[up_rows + 2] + ys[len(rows) - 1] + cell) / 2
    s.text(bx + 18, mid + 18, "left ← node (copy)", size=12, anchor="start", fill=PURPLE)
    s.text(bx + 18, mid + 36, "right ← node + old left", size=12, anchor="start", fill=ORANGE)
    s.text(x0 + n * cell / 2, H - 16, "exclusive scan", size=12, fill=GREEN, weight="bold")
    return s


def fig_07_lookback() -> Svg:
    totals = [12, 9, 15, 11, 10, 14, 8, 13, 16]  # illustrative tile totals
    me = len(totals) - 1
    prefix = [sum(totals[: i + 1]) for i in range(len(totals))]
    first = ["P", "P", "P", "P", "A", "X", "A", "A", "A"]
    second = ["P", "P", "P", "P", "P", "A", "A", "A", "A"]
    waiting = first.index("X")
    nearest = max(i for i in range(me) if second[i] == "P")
    got = prefix[nearest] + sum(totals[nearest + 1:me])
    assert got == prefix[me - 1], "look-back figure: the prefix must be the sum of the tiles before"
    cw, ch, gap = 72, 46, 14
    x0, y0 = 112, 62
    W = x0 + len(totals) * (cw + gap) + 16
    H = 488
    s = Svg(W, H, "Decoupled look-back: tile status flags X, A and P",
            f"Tiles 0 to {me} with their status words. Tile {me}'s block has published A (its aggregate, "
            f"{totals[me]}) and looks back. First look: tile {waiting} is still X, so it waits. Next look: the "
            f"nearest P is tile {nearest} with inclusive prefix {prefix[nearest]}; adding the aggregates of tiles "
            f"{nearest + 1} to {me - 1} gives the exclusive prefix {got}. The block then publishes P = {got} + "
            f"{totals[me]} = {got + totals[me]} and writes its tile.")
    styles = {"X": (WASH, LINE, MUTED), "A": (YELLOW_BG, ORANGE, ORANGE), "P": (GREEN_BG, GREEN, GREEN)}

    def tx(i: int) -> float:
        return x0 + i * (cw + gap)

    def status(i: int, y: float, f: str, value: str, mine: bool = False) -> None:
        fill, stroke, color = styles[f]
        s.rect(tx(i), y, cw, ch, fill=fill, stroke=BLUE if mine else stroke, sw=2.5 if mine else 1.2)
        s.text(tx(i) + 15, y + ch / 2, f, size=16, weight="bold", fill=color)
        s.line(tx(i) + 29, y + 8, tx(i) + 29, y + ch - 8, stroke=stroke)
        s.text(tx(i) + 29 + (cw - 29) / 2, y + ch / 2, value, size=14, fill=MUTED if f == "X" else INK)

    def row(y: float, flags: list[str], label: str) -> None:
        s.text(x0 - 14, y + ch / 2, label, size=12.5, anchor="end", weight="bold")
        for i, f in enumerate(flags):
            status(i, y, f, "—" if f == "X" else str(prefix[i] if f == "P" else totals[i]), i == me)

    def frame(i: int, y: float, color: str) -> None:
        s.rect(tx(i) - 4, y - 4, cw + 8, ch + 8, fill="none", stroke=color, sw=2)

    def back(y: float, to: int, color: str) -> None:
        s.path(f"M{tx(me) + cw / 2},{y + ch + 5} v16 H{tx(to) + cw / 2} v-12", stroke=color, sw=1.4, arrow=True)

    for i in range(len(totals)):
        s.text(tx(i) + cw / 2, y0 - 36, f"tile {i}", size=12, fill=BLUE if i == me else MUTED,
               weight="bold" if i == me else None)
    s.text(tx(me) + cw / 2, y0 - 18, "(this block)", size=11, fill=BLUE)
    row(y0, first, "first look")
    frame(waiting, y0, RED)
    back(y0, waiting, RED)
    s.text(tx(waiting) + cw / 2, y0 + ch + 38, f"tile {waiting} is X: wait, then look again", size=12, fill=RED)
    y2 = y0 + ch + 86
    row(y2, second, "next look")
    frame(nearest, y2, GREEN)
    for i in range(nearest + 1, me):
        frame(i, y2, ORANGE)
    back(y2, nearest, INK)
    terms = " + ".join([str(prefix[nearest])] + [str(totals[i]) for i in range(nearest + 1, me)])
    s.text(tx(nearest), y2 + ch + 38, f"nearest P (tile {nearest}) + the A's after it (tiles {nearest + 1}–{me - 1}) "
           f"= {terms} = {got}", size=12.5, anchor="start")
    y3 = y2 + ch + 84
    s.text(x0 - 14, y3 + ch / 2, "publish", size=12.5, anchor="end", weight="bold")
    status(me, y3, "P", str(got + totals[me]), mine=True)
    s.text(tx(me) - 14, y3 + ch / 2 - 9, f"P = exclusive prefix + own total = {got} + {totals[me]} = "
           f"{got + totals[me]}", size=12.5, anchor="end")
    s.text(tx(me) - 14, y3 + ch / 2 + 10, f"then write the tile: each item of its own scan + {got}", size=12.5,
           anchor="end", fill=MUTED)
    # legend
    ly = H - 64
    items = [("X", "nothing published yet"), ("A", "aggregate: the tile's own total"),
             ("P", "inclusive prefix: all tiles up to and including it")]
    lx = 24
    for f, text in items:
        fill, stroke, color = styles[f]
        s.rect(lx, ly - 12, 26, 24, fill=fill, stroke=stroke)
        s.text(lx + 13, ly, f, size=13, weight="bold", fill=color)
        s.text(lx + 34, ly, text, size=12, anchor="start")
        lx += 34 + len(text) * 6.6 + 28
    s.text(24, ly + 32, "Flag and value share one 64-bit status word. The real look-back reads the 32 tiles before "
           "it at once, one per lane of a warp.", size=12, anchor="start", fill=MUTED)
    return s


# =============================================================================================================
# Lab 08: histogram
# =============================================================================================================


def fig_08_privatization() -> Svg:
    block_threads = const("08", "kBlock", 256)
    bins_real = const("08", "kNumBins", 256)
    nb, grid, bdim, n = 8, 3, 4, 36  # drawn: 8 bins, 3 blocks of 4 threads, 36 input bytes
    seed = 7
    data = []
    for _ in range(n):  # a fixed linear congruential sequence: the same bytes every run
        seed = (seed * 1103515245 + 12345) % (1 << 31)
        data.append((seed >> 16) % nb)
    owner = [(i // bdim) % grid for i in range(n)]  # grid-stride loop: block b takes i = b*bdim + tid + k*grid*bdim
    local = [[0] * nb for _ in range(grid)]
    for v, b in zip(data, owner):
        local[b][v] += 1
    total = [sum(local[b][v] for b in range(grid)) for v in range(nb)]
    colors = [(BLUE, BLUE_BG), (ORANGE, ORANGE_BG), (PURPLE, PURPLE_BG)]
    cell = 22
    x0, y0 = 40, 48
    W = x0 * 2 + n * cell
    bw = 28
    pw = nb * bw
    span = (W - 2 * x0 - grid * pw) / (grid - 1)
    maxc = max(max(r) for r in local)
    unit = 12
    box_top = y0 + cell + 64
    box_h = 44 + maxc * unit + 40
    gmax = max(total)
    gunit = 9
    g_top = box_top + box_h + 80
    g_h = 40 + gmax * gunit + 40
    H = g_top + g_h + 64
    s = Svg(W, H, "Privatization: one shared histogram per block, merged into the global one",
            f"{n} input bytes handled by {grid} blocks of {bdim} threads in a grid-stride loop (colours show which "
            f"block reads each byte). Each block counts its bytes into its own {nb}-bin histogram in shared memory "
            f"with shared atomics, then adds each non-zero bin to the global histogram with one global atomicAdd.")
    s.text(x0, y0 - 26, f"input bytes, values 0–{nb - 1}: a grid-stride loop gives block b the runs of {bdim} bytes "
           f"at b·{bdim}, b·{bdim} + {grid * bdim}, b·{bdim} + {2 * grid * bdim}, …", size=12, anchor="start",
           fill=MUTED)
    for i, v in enumerate(data):
        c, bg = colors[owner[i]]
        s.box(x0 + i * cell, y0, cell, cell, str(v), fill=bg, stroke=c, size=11)

    def bars(px: float, base: float, counts: list[list[int]], u: float, blocks: list[int]) -> None:
        for v in range(nb):
            yy = base
            for b in blocks:
                c, bg = colors[b]
                h = counts[b][v] * u
                if h:
                    s.rect(px + v * bw + 3, yy - h, bw - 6, h, fill=bg, stroke=c)
                yy -= h
            count = sum(counts[b][v] for b in blocks)
            if count:
                s.text(px + v * bw + bw / 2, yy - 9, str(count), size=11,
                       fill=colors[blocks[0]][0] if len(blocks) == 1 else INK)
            s.text(px + v * bw + bw / 2, base + 11, str(v), size=10.5, fill=MUTED)
        s.line(px, base, px + nb * bw, base, stroke=INK)

    for b in range(grid):
        c, bg = colors[b]
        px = x0 + b * (pw + span)
        s.rect(px - 8, box_top, pw + 16, box_h, fill=PAPER, stroke=c, sw=1.5)
        s.text(px + pw / 2, box_top + 16, f"block {b}", size=12.5, fill=c, weight="bold")
        s.text(px + pw / 2, box_top + 33, "s_bins in shared memory", size=11.5, fill=c)
        bars(px, box_top + 44 + maxc * unit + 14, local, unit, [b])
        s.line(px + pw / 2, y0 + cell + 6, px + pw / 2, box_top - 4, stroke=c, sw=1.3, arrow=True)
    s.label(x0 + pw / 2 + 8, (y0 + cell + box_top) / 2, "atomicAdd(&s_bins[byte], 1u)   (shared)", size=11.5,
            anchor="start", fill=BLUE)
    gpx = (W - pw) / 2
    s.rect(gpx - 8, g_top, pw + 16, g_h, fill=WASH, stroke=INK, sw=1.5)
    s.text(W / 2, g_top + 16, "bins in global memory", size=12.5, weight="bold")
    s.text(W / 2, g_top + 33, "(bars split by the block that added them)", size=11, fill=MUTED)
    bars(gpx, g_top + 40 + gmax * gunit + 18, local, gunit, list(range(grid)))
    for b in range(grid):
        c, _ = colors[b]
        px = x0 + b * (pw + span)
        s.line(px + pw / 2, box_top + box_h + 4, W / 2 + (b - 1) * 60, g_top - 4, stroke=c, sw=1.3, arrow=True)
    s.lines(gpx + pw + 28, g_top + 20, ["commit, after the second barrier:", "atomicAdd(&bins[v], s_bins[v])",
                                         "once per non-zero bin per block", "(global atomics)"], size=11.5,
            anchor="start")
    steps = ["zero s_bins", "__syncthreads()", "count (shared atomics)", "__syncthreads()", "commit (global atomics)"]
    s.text(x0, H - 42, "each block:  " + "  →  ".join(steps), size=12.5, anchor="start")
    s.text(x0, H - 20, f"drawn: {nb} bins, blocks of {bdim} threads; in the lab: kNumBins = {bins_real} bins, blocks "
           f"of kBlock = {block_threads} threads", size=11.5, anchor="start", fill=MUTED)
    return s


# =============================================================================================================
# Lab 09: streams
# =============================================================================================================


def fig_09_pipeline() -> Svg:
    chunks = 4  # drawn: 4 chunks on 4 streams (the perf test uses 16 and 16)
    t_h2d, t_ker, t_d2h = 1.0, 1.4, 1.0  # whole-array times; the README's balanced case: kernel ≈ 1.4 copies
    c_h2d, c_ker, c_d2h = t_h2d / chunks, t_ker / chunks, t_d2h / chunks
    # One H2D copy engine, the SMs, one D2H copy engine; each chunk's stages in order in its stream.
    sched = []
    h_free = k_free = d_free = 0.0
    for c in range(chunks):
        h0 = h_free
        h1 = h0 + c_h2d
        k0 = max(h1, k_free)
        k1 = k0 + c_ker
        d0 = max(k1, d_free)
        d1 = d0 + c_d2h
        h_free, k_free, d_free = h1, k1, d1
        sched.append(((h0, h1), (k0, k1), (d0, d1)))
    serial = t_h2d + t_ker + t_d2h
    longest = max(t_h2d, t_ker, t_d2h)
    bound = longest + (serial - longest) / chunks
    piped = sched[-1][2][1]
    assert abs(piped - bound) < 1e-9, "pipeline figure: the drawn schedule should meet the bound"
    sc = 196  # pixels per time unit
    x0, rh = 96, 28
    W = int(x0 + serial * sc + 40)
    H = 420
    s = Svg(W, H, "Copy, compute, copy: serial versus a pipeline of chunks over streams",
            f"Top: the serial program copies the whole array in, runs the kernel, copies it out: "
            f"{t_h2d:g} + {t_ker:g} + {t_d2h:g} = {serial:g} time units. Bottom: the array in {chunks} chunks, "
            f"chunk c in stream c; H2D copies, kernels and D2H copies each run one after another on their own "
            f"engine, but overlap with each other, so the pipeline takes max + (sum - max) / k = {bound:g} units.")
    stage = [("H2D", BLUE, BLUE_BG), ("kernel", GREEN, GREEN_BG), ("D2H", ORANGE, ORANGE_BG)]

    def bar(x1: float, x2: float, y: float, k: int, label: str) -> None:
        _, c, bg = stage[k]
        s.rect(x0 + x1 * sc, y, (x2 - x1) * sc, rh, fill=bg, stroke=c, sw=1.2)
        s.text(x0 + (x1 + x2) / 2 * sc, y + rh / 2, label, size=11.5, fill=INK)

    y = 46
    s.text(12, 18, "serial (one stream)", size=13, anchor="start", weight="bold")
    s.text(x0 - 10, y + rh / 2, "stream 0", size=12, anchor="end")
    bar(0, t_h2d, y, 0, "H2D, whole array")
    bar(t_h2d, t_h2d + t_ker, y, 1, "kernel, whole array")
    bar(t_h2d + t_ker, serial, y, 2, "D2H, whole array")
    y2 = y + rh + 72
    s.text(12, y2 - 28, f"pipelined: {chunks} chunks, chunk c in stream s[c]", size=13, anchor="start", weight="bold")
    for c, ((h0, h1), (k0, k1), (d0, d1)) in enumerate(sched):
        yy = y2 + c * (rh + 8)
        s.text(x0 - 10, yy + rh / 2, f"s[{c}]", size=12, anchor="end")
        bar(h0, h1, yy, 0, f"H2D {c}")
        bar(k0, k1, yy, 1, f"kernel {c}")
        bar(d0, d1, yy, 2, f"D2H {c}")
    bottom = y2 + chunks * (rh + 8) - 8
    # time axis
    ay = bottom + 30
    s.line(x0, ay, x0 + serial * sc + 10, ay, stroke=INK, arrow=True)
    s.text(x0 + (piped + serial) / 2 * sc, ay + 14, "time →", size=11.5, fill=MUTED)
    for mark, label, color in ((piped, f"{piped:g}", GREEN), (serial, f"{serial:g}", RED)):
        s.line(x0 + mark * sc, y - 8 if mark == serial else y2 - 8, x0 + mark * sc, ay, stroke=color, dash="5 4")
        s.text(x0 + mark * sc, ay + 14, label, size=11.5, fill=color)
    s.text(x0, ay + 14, "0", size=11.5, fill=MUTED)
    s.text(x0 + piped * sc - 6, y2 - 16, "pipeline ends", size=11.5, fill=GREEN, anchor="end")
    s.text(x0 + serial * sc - 6, y - 14, "serial ends", size=11.5, fill=RED, anchor="end")
    ty = ay + 40
    s.text(x0, ty, f"serial: T₁ + T₂ + T₃ = {t_h2d:g} + {t_ker:g} + {t_d2h:g} = {serial:g}", size=12.5,
           anchor="start")
    s.text(x0, ty + 20, f"pipeline of k = {chunks}: max(T₁, T₂, T₃) + (T₁ + T₂ + T₃ − max) / k = {longest:g} + "
           f"{serial - longest:g} / {chunks} = {bound:g}", size=12.5, anchor="start")
    s.text(x0, ty + 42, "the kernels wait for the SMs, each copy for its engine: the longest stage runs back to back",
           size=12, anchor="start", fill=MUTED)
    return s


# =============================================================================================================
# Lab 10: cooperative groups
# =============================================================================================================


def fig_10_tiles() -> Svg:
    threads = const("10", "kThreads", 256)
    tile = const("10", "kTileSize", 32)
    ntiles = threads // tile
    tw, gap = 84, 8
    x0, y0 = 40, 56
    W = x0 * 2 + ntiles * tw + (ntiles - 1) * gap
    H = 418
    s = Svg(W, H, f"A block of {threads} threads as {ntiles} tiles of {tile}",
            f"cg::tiled_partition<{tile}> splits a block of {threads} threads into {ntiles} warp-sized tiles. Each "
            f"tile reduces its values with cg::reduce; the first thread of each tile stores the tile's sum in "
            f"shared memory; after block.sync(), tile 0 reduces the {ntiles} tile sums, and thread 0 holds the "
            f"block's sum.")
    s.text(W / 2, 18, f"cg::tiled_partition<{tile}>(block): a block of {threads} threads as {ntiles} tiles",
           size=13)
    s.rect(x0 - 8, y0 - 12, ntiles * tw + (ntiles - 1) * gap + 16, 72, fill=WASH, stroke=LINE, dash="5 3")
    for i in range(ntiles):
        x = x0 + i * (tw + gap)
        s.rect(x, y0, tw, 48, fill=BLUE_BG, stroke=BLUE)
        s.text(x + tw / 2, y0 + 15, f"tile {i}", size=12, weight="bold", fill=BLUE)
        s.text(x + tw / 2, y0 + 32, f"{i * tile}–{(i + 1) * tile - 1}", size=11, fill=MUTED)
        s.line(x + tw / 2, y0 + 50, x + tw / 2, y0 + 98, stroke=BLUE, arrow=True)
        s.box(x + 6, y0 + 102, tw - 12, 30, f"sum {i}", fill=ORANGE_BG, stroke=ORANGE, size=12)
    s.label(W / 2, y0 + 76, f"cg::reduce(tile, v, cg::plus<…>()): all {tile} lanes call it, each gets the sum",
            size=11.5, fill=BLUE)
    # shared array
    sy = y0 + 176
    s.text(W / 2, sy + 42, f"__shared__ float tile_sums[{ntiles}]: thread_rank() 0 of each tile stores its sum "
           "at meta_group_rank()", size=11.5, fill=ORANGE)
    sw_ = 44
    sx0 = (W - ntiles * sw_) / 2
    for i in range(ntiles):
        x = x0 + i * (tw + gap)
        s.line(x + tw / 2, y0 + 134, sx0 + i * sw_ + sw_ / 2, sy - 2, stroke=ORANGE, arrow=True)
        s.box(sx0 + i * sw_, sy, sw_, 28, str(i), fill=ORANGE_BG, stroke=ORANGE, size=12)
    s.line(x0 - 8, sy + 66, W - x0 + 8, sy + 66, stroke=RED, sw=2, dash="6 4")
    s.label(W - x0 + 8, sy + 66, "block.sync()", size=12, fill=RED, anchor="end", weight="bold")
    ry = sy + 90
    s.box(W / 2 - 150, ry, 300, 34, f"tile 0 reduces the {ntiles} sums (lanes ≥ {ntiles} give 0)", fill=GREEN_BG,
          stroke=GREEN, size=12)
    s.line(W / 2, sy + 54, W / 2, ry - 2, stroke=GREEN, arrow=True)
    s.text(W / 2, ry + 58, "thread 0 holds the block's sum", size=12.5, fill=GREEN, weight="bold")
    return s


def fig_10_grid_sync() -> Svg:
    threads = const("10", "kThreads", 256)
    blocks = 6  # drawn; the real grid is blocks per SM x SMs, all resident at once
    phase1 = [2.1, 2.6, 1.8, 2.9, 2.3, 2.0]  # illustrative: blocks finish phase 1 at different times
    phase2 = [1.6, 1.4, 1.7, 1.5, 1.8, 1.6]
    sc = 96
    x0, y0, rh = 80, 64, 26
    sync_t = max(phase1) + 0.25
    W = int(x0 + (sync_t + max(phase2)) * sc + 250)
    H = y0 + blocks * (rh + 10) + 124
    s = Svg(W, H, "A grid-wide barrier: grid.sync() in a cooperative kernel",
            f"{blocks} blocks of a cooperative grid run phase 1 (each block reduces its share and stores a partial "
            f"sum) and reach grid.sync() at different times; the early ones wait. Once every block of the grid has "
            f"arrived, all partials are visible to all blocks, and phase 2 starts: every block adds the partials "
            f"in the same order and subtracts the mean.")
    s.lines(x0 + sync_t * sc - 14, 14, ["phase 1: each block reduces its share,", "stores partials[blockIdx.x]"],
            size=12, fill=BLUE, anchor="end")
    s.lines(x0 + sync_t * sc + 14, 14, ["phase 2: every block adds all partials", "in the same order → the mean"],
            size=12, fill=GREEN, anchor="start")
    for b in range(blocks):
        y = y0 + b * (rh + 10)
        s.text(x0 - 12, y + rh / 2, f"block {b}", size=12, anchor="end")
        s.rect(x0, y, phase1[b] * sc, rh, fill=BLUE_BG, stroke=BLUE)
        s.text(x0 + phase1[b] * sc / 2, y + rh / 2, f"partial {b}", size=11.5)
        if phase1[b] < sync_t - 0.05:
            s.line(x0 + phase1[b] * sc + 2, y + rh / 2, x0 + sync_t * sc - 3, y + rh / 2, stroke=LINE, dash="2 3")
        s.rect(x0 + sync_t * sc, y, phase2[b] * sc, rh, fill=GREEN_BG, stroke=GREEN)
        s.text(x0 + (sync_t + phase2[b] / 2) * sc, y + rh / 2, "out = in − mean", size=11.5)
    gx = x0 + sync_t * sc
    bottom = y0 + blocks * (rh + 10) - 10
    s.line(gx, y0 - 18, gx, bottom + 14, stroke=RED, sw=2.5)
    s.text(gx, bottom + 28, "grid.sync()", size=13, fill=RED, weight="bold")
    s.text(gx, bottom + 46, "every block has arrived; its writes are visible to all", size=11.5, fill=RED)
    s.text(16, bottom + 78, "Waiting (dotted) is safe only because every block is resident at once: "
           "cudaLaunchCooperativeKernel refuses a grid", size=12, anchor="start", fill=MUTED)
    s.text(16, bottom + 96, f"larger than blocks per SM (occupancy API, {threads} threads per block) × the number "
           "of SMs.", size=12, anchor="start", fill=MUTED)
    return s


# =============================================================================================================
# Lab 11: quicksort
# =============================================================================================================


def bitonic_passes(p: int) -> list[tuple[int, int, list[tuple[int, int]]]]:
    """The comparators of the lab's bitonic network for p slots, pass by pass: (k, j, [(lo, hi), ...]), exactly as
    quicksort.cu's bitonic_sort_block describes them (hi = lo ^ (k - 1) when j == k / 2, else lo ^ j)."""
    passes = []
    k = 2
    while k <= p:
        j = k // 2
        while j >= 1:
            comps = []
            for i in range(p // 2):
                lo = ((i & ~(j - 1)) << 1) | (i & (j - 1))
                hi = lo ^ (k - 1) if j == k // 2 else lo ^ j
                comps.append((lo, hi))
            passes.append((k, j, comps))
            j //= 2
        k *= 2
    return passes


def _run_network(keys: list[int], passes: list[tuple[int, int, list[tuple[int, int]]]]) -> list[int]:
    keys = keys[:]
    for _, _, comps in passes:
        for lo, hi in comps:
            if keys[lo] > keys[hi]:
                keys[lo], keys[hi] = keys[hi], keys[lo]
    return keys


def sorts_every_01_input(p: int, passes: list[tuple[int, int, list[tuple[int, int]]]]) -> bool:
    """The 0-1 principle: a comparator network sorts every input if it sorts every input of 0s and 1s. All 2^p
    such inputs run at once, one per bit: wire i is an integer whose bit b is bit i of input b."""
    n = 1 << p
    wires = []
    for i in range(p):
        period = 2 << i
        mask = ((1 << (1 << i)) - 1) << (1 << i)  # bit b set where bit i of b is 1, for b < period
        while period < n:
            mask |= mask << period
            period *= 2
        wires.append(mask)
    for _, _, comps in passes:
        for lo, hi in comps:
            wires[lo], wires[hi] = wires[lo] & wires[hi], wires[lo] | wires[hi]
    return all(wires[i] & ~wires[i + 1] == 0 for i in range(p - 1))


def fig_11_bitonic() -> Svg:
    p = 16
    passes = bitonic_passes(p)
    assert sorts_every_01_input(p, passes), "bitonic figure: the network does not sort"
    keys = [10, 3, 14, 7, 1, 12, 5, 9, 15, 0, 8, 11, 2, 13, 6, 4]
    block_max = const("11", "kBlockSortMax", 8192)
    sort_block = const("11", "kSortBlock", 1024)
    wire, y0, x0 = 26, 56, 64
    sub, pass_gap, vbox = 13, 12, 30

    # sub-columns per pass: comparators whose spans overlap go side by side
    def columns(comps: list[tuple[int, int]]) -> list[int]:
        ends: list[int] = []
        out = []
        for lo, hi in sorted(comps):
            for ci, end in enumerate(ends):
                if end < lo:
                    ends[ci] = hi
                    out.append(ci)
                    break
            else:
                ends.append(hi)
                out.append(len(ends) - 1)
        return out

    layout = []  # (x_start, width, k, j, [(lo, hi, x)])
    x = x0 + vbox + 16
    value_x = [x0]
    stage_span = {}
    last_k = 2
    for k, j, comps in passes:
        if k != last_k:
            value_x.append(x + 4)
            x += vbox + 24
            last_k = k
        cols = columns(comps)
        ncols = max(cols) + 1
        placed = [(lo, hi, x + c * sub + sub / 2) for (lo, hi), c in zip(sorted(comps), cols)]
        layout.append((x, ncols * sub, k, j, placed))
        stage_span.setdefault(k, [x, x + ncols * sub])[1] = x + ncols * sub
        x += ncols * sub + pass_gap
    value_x.append(x + 4)
    W = int(x + vbox + 40)
    H = y0 + p * wire + 106
    s = Svg(W, H, f"The bitonic sorting network for {p} keys, as lab 11 builds it",
            f"{p} wires, one per key slot, top = index 0. Stages k = 2, 4, 8, 16; in stage k, passes j = k/2 down "
            f"to 1 ({len(passes)} passes, {p // 2} comparators each). Every comparator puts the smaller key on the "
            f"upper wire. In the first pass of a stage (j = k/2) slot lo is compared with its mirror lo ^ (k - 1); "
            f"in the other passes with lo ^ j. Boxes show an example input and the keys after each stage: after "
            f"stage k every run of k keys is sorted.")
    for w in range(p):
        yy = y0 + w * wire + wire / 2
        s.line(x0 + vbox, yy, value_x[-1], yy, stroke=LINE, sw=1)
        s.text(x0 - 10, yy, str(w), size=10.5, fill=MUTED, anchor="end")
    s.text(x0 - 10, y0 - 10, "slot", size=10.5, fill=MUTED, anchor="end")
    for xs, wd, k, j, placed in layout:
        flip = j == k // 2
        color = ORANGE if flip else BLUE
        for lo, hi, cx in placed:
            ya, yb = y0 + lo * wire + wire / 2, y0 + hi * wire + wire / 2
            s.line(cx, ya, cx, yb, stroke=color, sw=1.6)
            s.circle(cx, ya, 3.2, fill=color)
            s.circle(cx, yb, 3.2, fill=color)
        s.text(xs + wd / 2, y0 + p * wire + 14, str(j), size=10.5, fill=color)
    s.text(x0 - 10, y0 + p * wire + 14, "j =", size=10.5, fill=MUTED, anchor="end")
    for k, (a, b) in stage_span.items():
        s.brace(a - 2, b + 2, y0 - 6, f"stage k = {k}", color=INK, size=12)
    # values at the stage boundaries
    vals = keys[:]
    stage_vals = [vals[:]]
    for k in sorted(stage_span):
        vals = _run_network(vals, [ps for ps in passes if ps[0] == k])
        stage_vals.append(vals[:])
    for col, (vx, vs) in enumerate(zip(value_x, stage_vals)):
        last = col == len(stage_vals) - 1
        kdone = 1 << col
        for w, v in enumerate(vs):
            yy = y0 + w * wire + 3
            run = (w // kdone) % 2
            fill = GREEN_BG if last else (WASH if run == 0 or col == 0 else PAPER)
            s.box(vx, yy, vbox, wire - 6, str(v), fill=fill, stroke=GREEN if last else LINE, size=11)
    s.text(value_x[0] + vbox / 2, y0 + p * wire + 14, "in", size=11, fill=MUTED)
    s.text(value_x[-1] + vbox / 2, y0 + p * wire + 14, "out", size=11, fill=GREEN, weight="bold")
    ly = y0 + p * wire + 40
    s.line(x0, ly, x0 + 22, ly, stroke=ORANGE, sw=1.6)
    s.text(x0 + 30, ly, "j = k/2: lo meets its mirror, hi = lo ^ (k − 1)", size=12, anchor="start")
    s.line(x0 + 350, ly, x0 + 372, ly, stroke=BLUE, sw=1.6)
    s.text(x0 + 380, ly, "j < k/2: hi = lo ^ j", size=12, anchor="start")
    s.text(x0, ly + 24, "Every comparator puts the smaller key on the upper wire; after stage k, every run of k keys "
           "is sorted.", size=11.5, anchor="start", fill=MUTED)
    s.text(x0, ly + 42, f"Lab 11's block sort runs this network on up to {grouped(block_max)} keys with {sort_block} "
           "threads and one __syncthreads() after every pass.", size=11.5, anchor="start", fill=MUTED)
    return s


def fig_11_quicksort_tree() -> Svg:
    leaf_max = const("11", "kBlockSortMax", 8192)
    part_tile = const("11", "kPartTile", 2048)
    n = 40000  # drawn: 40,000 random keys
    # Illustrative splits (fraction of the keys below the pivot, keys equal to it), in the order nodes are made.
    splits = iter([(0.45, 1), (0.55, 2), (0.52, 1), (0.5, 1), (0.47, 1), (0.5, 1), (0.5, 1)])
    names = {0: "input", 1: "scratch", 2: "output"}

    @dataclass
    class Node:
        begin: int
        count: int
        depth: int
        buffer: int
        leaf: bool
        children: list
        equal: int = 0
        x: float = 0.0

    def target(buf: int) -> int:
        return 2 if buf == 1 else 1  # partition_target: scratch -> output, input/output -> scratch

    def build(begin: int, count: int, depth: int, buf: int) -> Node:
        if count <= leaf_max:
            return Node(begin, count, depth, buf, True, [])
        frac, eq = next(splits)
        less = int(count * frac)
        greater = count - less - eq
        node = Node(begin, count, depth, buf, False, [], eq)
        node.children = [build(begin, less, depth + 1, target(buf)),
                         build(begin + count - greater, greater, depth + 1, target(buf))]
        return node

    root = build(0, n, 0, 0)
    leaves: list[Node] = []
    parts: list[Node] = []

    def walk(nd: Node) -> None:
        (leaves if nd.leaf else parts).append(nd)
        for ch in nd.children:
            walk(ch)

    walk(root)
    depth = max(nd.depth for nd in leaves + parts)
    leaf_w, part_w, slot = 122, 196, 136
    x0 = 30
    # leaves get evenly spaced slots in tree order; parents sit above the middle of their children
    order = iter(range(len(leaves)))

    def place(nd: Node) -> float:
        if nd.leaf:
            nd.x = x0 + next(order) * slot + slot / 2
        else:
            xs = [place(ch) for ch in nd.children]
            nd.x = sum(xs) / len(xs)
        return nd.x

    place(root)
    W = int(x0 * 2 + len(leaves) * slot + 24)
    top = 118
    level_h = 122
    part_h, leaf_h = 78, 48
    H = top + (depth + 1) * level_h + 166

    def ypos(d: int) -> float:
        return top + d * level_h

    s = Svg(W, H, "The quicksort tree: partition grids, child launches, leaf jobs, one tail-launched leaf sort",
            f"A quicksort of {grouped(n)} keys with dynamic parallelism. The root kernel schedules [0, {n}); a "
            f"partition grid of ceil(count / {part_tile}) blocks splits each segment around a pivot; its last block "
            f"fills the run of keys equal to the pivot and schedules both sides. A side of more than {leaf_max} keys "
            f"becomes a new partition grid, launched into cudaStreamFireAndForget; a smaller one becomes a leaf job. "
            f"The root tail-launches sort_leaves_kernel, which starts after the whole tree has finished and sorts "
            f"every leaf in shared memory, one block per leaf.")
    # host and root
    s.box(x0, 14, 210, 30, "host: quicksort()", fill=WASH, stroke=INK, size=12)
    s.box(x0 + 250, 14, 270, 30, "root kernel <<<1, 32>>>: schedule [0, n)", fill=WASH, stroke=INK, size=12)
    s.line(x0 + 210, 29, x0 + 248, 29, stroke=INK, arrow=True)
    s.path(f"M{x0 + 385},{44} V{top - 30} H{root.x} V{ypos(0) - 2}", stroke=INK, arrow=True)
    s.text(x0 + 392, 66, "launch (fire-and-forget)", size=11, anchor="start", fill=MUTED)

    def draw(nd: Node) -> None:
        y = ypos(nd.depth)
        if nd.leaf:
            s.rect(nd.x - leaf_w / 2, y, leaf_w, leaf_h, fill=YELLOW_BG, stroke=ORANGE, sw=1.2)
            s.text(nd.x, y + 15, "leaf job", size=11.5, fill=ORANGE, weight="bold")
            s.text(nd.x, y + 33, f"{grouped(nd.count)} keys ({names[nd.buffer]})", size=11)
            return
        blocks = ceil_div(nd.count, part_tile)
        s.rect(nd.x - part_w / 2, y, part_w, part_h, fill=BLUE_BG, stroke=BLUE, sw=1.2)
        s.text(nd.x, y + 14, f"partition [{grouped(nd.begin)}, +{grouped(nd.count)})", size=11.5, weight="bold")
        s.text(nd.x, y + 32, f"{blocks} blocks of {part_tile} keys", size=11)
        s.text(nd.x, y + 49, f"{names[nd.buffer]} → {names[target(nd.buffer)]}", size=11, fill=MUTED)
        s.text(nd.x, y + 66, f"= pivot: {nd.equal} key{'s' if nd.equal > 1 else ''}, filled into output", size=11,
               fill=GREEN)
        for side, ch in zip(("<", ">"), nd.children):
            cy = ypos(ch.depth)
            sx = nd.x + (-part_w / 4 if side == "<" else part_w / 4)
            color = BLUE if not ch.leaf else ORANGE
            s.path(f"M{sx},{y + part_h} V{y + part_h + 20} H{ch.x} V{cy - 2}", stroke=color, sw=1.3,
                   dash=None if not ch.leaf else "5 3", arrow=True)
            s.text(sx + (-6 if side == "<" else 6), y + part_h + 10, f"{side} pivot", size=10.5,
                   anchor="end" if side == "<" else "start", fill=MUTED)

        for ch in nd.children:
            draw(ch)

    draw(root)
    # leaf list and the tail launch
    ly = ypos(depth) + level_h + 8
    lx0 = x0 + 10
    lx1 = W - x0 - 14
    s.rect(lx0, ly, lx1 - lx0, 34, fill=YELLOW_BG, stroke=ORANGE)
    s.text((lx0 + lx1) / 2, ly + 17, f"leaf list: {len(leaves)} jobs recorded with push_leaf (no launch each)",
           size=12)
    for lf in leaves:
        s.line(lf.x, ypos(lf.depth) + leaf_h, lf.x, ly - 2, stroke=ORANGE, dash="5 3", arrow=True)
    ty = ly + 66
    s.rect(lx0, ty, lx1 - lx0, 44, fill=GREEN_BG, stroke=GREEN, sw=1.5)
    s.text((lx0 + lx1) / 2, ty + 14, "sort_leaves_kernel: one block per leaf, bitonic sort in shared memory → output",
           size=12, weight="bold")
    s.text((lx0 + lx1) / 2, ty + 31, "tail-launched by the root: it starts after the root and every grid it "
           "launched, recursively, has finished", size=11.5)
    s.line((lx0 + lx1) / 2, ly + 34, (lx0 + lx1) / 2, ty - 2, stroke=GREEN, arrow=True)
    rx = W - 12
    s.path(f"M{x0 + 520},29 H{rx} V{ty + 22} H{lx1 + 2}", stroke=GREEN, sw=1.3, dash="6 4", arrow=True)
    s.text(x0 + 530, 20, "tail launch", size=11, anchor="start", fill=GREEN)
    s.text(x0, H - 18, f"drawn with made-up splits; leaves: segments of at most kBlockSortMax = {grouped(leaf_max)} "
           f"keys (or at max_depth)", size=11.5, anchor="start", fill=MUTED)
    return s


# =============================================================================================================
# The figures, and writing or checking them
# =============================================================================================================


@dataclass(frozen=True)
class Figure:
    lab: str  # "05"
    name: str  # file name without .svg
    make: Callable[[], Svg]

    def path(self) -> Path:
        """Where it lives: labs/NN-slug/figures/NAME.svg under ROOT (looked up now, so tests can move ROOT)."""
        return lab_dir(self.lab) / "figures" / f"{self.name}.svg"


FIGURES = [
    Figure("02", "global-id-1d", fig_02_global_id_1d),
    Figure("02", "warps-in-a-block", fig_02_warps_in_block),
    Figure("02", "image-grid-2d", fig_02_image_grid),
    Figure("04", "pitched-rows", fig_04_pitched_rows),
    Figure("05", "tile-walk", fig_05_tile_walk),
    Figure("05", "smem-banks", fig_05_smem_banks),
    Figure("06", "reduction-tree", fig_06_reduction_tree),
    Figure("07", "hillis-steele", fig_07_hillis_steele),
    Figure("07", "blelloch", fig_07_blelloch),
    Figure("07", "lookback", fig_07_lookback),
    Figure("08", "privatization", fig_08_privatization),
    Figure("09", "pipeline", fig_09_pipeline),
    Figure("10", "tiles", fig_10_tiles),
    Figure("10", "grid-sync", fig_10_grid_sync),
    Figure("11", "bitonic-network", fig_11_bitonic),
    Figure("11", "quicksort-tree", fig_11_quicksort_tree),
]


def render_all() -> dict[Path, str]:
    """Every figure's path (relative to the repository root) and its SVG text."""
    return {fig.path().relative_to(ROOT): fig.make().render() for fig in FIGURES}


def write(out_root: Path) -> list[Path]:
    written = []
    for rel, text in render_all().items():
        dest = out_root / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(text, encoding="utf-8", newline="\n")
        written.append(rel)
    return written


def check() -> int:
    """1 if a committed figure is missing, differs from what this script makes, or is not made by it."""
    problems = []
    with tempfile.TemporaryDirectory() as tmp:
        made = write(Path(tmp))
        for rel in made:
            fresh = (Path(tmp) / rel).read_text(encoding="utf-8")
            committed = ROOT / rel
            if not committed.is_file():
                problems.append(f"{rel}: missing (run docs/figures/make_figures.py)")
            elif committed.read_text(encoding="utf-8") != fresh:
                diff = list(difflib.unified_diff(committed.read_text(encoding="utf-8").splitlines(),
                                                 fresh.splitlines(), str(rel), "regenerated", lineterm="", n=0))
                problems.append(f"{rel}: differs from what the script makes now ({len(diff)} diff lines), e.g.\n  "
                                + "\n  ".join(diff[2:6]))
        made_set = set(made)
        for svg in sorted((ROOT / "labs").glob("*/figures/*.svg")):
            if svg.relative_to(ROOT) not in made_set:
                problems.append(f"{svg.relative_to(ROOT)}: not made by this script (remove it or add its figure)")
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        print(f"make_figures --check: {len(problems)} problem(s); run python3 docs/figures/make_figures.py",
              file=sys.stderr)
        return 1
    print(f"make_figures --check: {len(made)} figures match the labs' constants")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="regenerate into a temporary folder and exit 1 if "
                        "any committed figure differs")
    parser.add_argument("--list", action="store_true", help="print the figures' paths")
    args = parser.parse_args(argv)
    if args.list:
        for fig in FIGURES:
            print(fig.path().relative_to(ROOT))
        return 0
    code = check() if args.check else 0
    if not args.check:
        for rel in write(ROOT):
            print(rel)
    for w in WARNINGS:
        print(f"warning: {w}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
