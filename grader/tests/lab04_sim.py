"""Lab 04's test buffers simulated for the hint tests (test_hints_lab04.py): the output a mutant's kernel
leaves, on the test's own pitched layout, wrapped in the messages of the test's EXPECT_* lines."""

from __future__ import annotations

import random

from grader.tests.gtest_failures import POISON, ceil_div, compare, equal, f32, from_bits, value_of

PITCHED = "04-pitched-memory"


# =====================================================================================================
# Lab 04: pitched memory. The test's PitchedBuffer, simulated word by word: rows `pitch` bytes apart, the
# image starting one guard row and col_offset floats in, everything else poison (outputs) or junk (inputs).
# =====================================================================================================

K_SEED, K_A, K_B = 4004, 2.5, 7.25
PITCHED_AT = "/home/s/labs/04-pitched-memory/test_pitched.cu"


def malloc_pitch(row_bytes: int) -> int:
    """cudaMallocPitch's pitch on an H100 or H200: rows rounded up to 512 bytes (README: 33 floats get 512,
    1000 floats 4096, 8190 floats 32768)."""
    return max(512, -(-row_bytes // 512) * 512)


class Pitched:
    """A PitchedBuffer (test_pitched.cu): words of 4 bytes; None is a word nobody wrote (the poison)."""

    def __init__(self, width: int, height: int, extra: int = 0, guard: bool = True, own_pitch: int = 0,
                 col_offset: int = 0, junk: random.Random | None = None) -> None:
        self.w, self.h, self.off = width, height, col_offset
        self.pitch = own_pitch or malloc_pitch((col_offset + width) * 4 + extra)
        self.pw = self.pitch // 4
        self.first = 1 if guard else 0
        self.rows = 4 * height + 2 if guard else height
        size = self.rows * self.pw
        self.words: list[float | None] = (
            [None] * size if junk is None else [from_bits(junk.getrandbits(32)) for _ in range(size)])

    def at(self, x: int, y: int, step: int | None = None) -> int:
        """The word of element (x, y), rows `step` words apart (the pitch, unless a bug says otherwise)."""
        return (self.first * self.pw + self.off) + y * (self.pw if step is None else step) + x

    def upload(self, host: list[float]) -> None:
        for y in range(self.h):
            for x in range(self.w):
                self.words[self.at(x, y)] = host[y * self.w + x]

    def image(self) -> list[float]:
        got = [self.words[self.at(x, y)] for y in range(self.h) for x in range(self.w)]
        return [POISON if v is None else v for v in got]

    def first_touched(self) -> tuple[int, str]:
        """expect_image's count of bytes written outside the image rows, and where the first one is."""
        touched, first = 0, ""
        begin = 4 * self.off
        for r in range(self.rows):
            in_image = self.first <= r < self.first + self.h
            end = begin + 4 * self.w if in_image else 0
            for c in range(0, self.pitch, 4):
                if (in_image and begin <= c < end) or self.words[r * self.pw + c // 4] is None:
                    continue
                if touched == 0:
                    if in_image:
                        first = (("before" if c < begin else "padding of")
                                 + f" image row {r - self.first}, byte {c} of the row")
                    else:
                        first = ("the row above the image" if r < self.first
                                 else f"{r - self.first - self.h + 1} rows below the image")
                touched += 4
        return touched, first


def expect_image(out: Pitched, expected: list[float], rel: float, seed: int, what: str) -> list[str]:
    """PitchedBuffer::expect_image: the values, then the bytes outside the image rows (two EXPECTs)."""
    failures = []
    rule = f"tolerance rel {rel:g} abs {rel:g}"
    body = compare(expected, out.image(), seed, rule, cols=out.w)
    if body:
        failures.append(value_of(f"{PITCHED_AT}:138", "AllNear(expected, image, tol, seed, shape)", body,
                                 f"{what}, {out.w} x {out.h}, pitch {out.pitch} B ([row y, col x])"))
    touched, first = out.first_touched()
    if touched:
        failures.append(equal(f"{PITCHED_AT}:140", "touched", str(touched), "0u", "0",
                              f"{what} wrote {touched} bytes outside the image rows (first: {first}). "
                              f"Rows are pitch = {out.pitch} bytes apart, not width * 4 = {4 * out.w}; "
                              "threads past width or height must do nothing"))
    return failures


def layouts(width: int, own_pitches: bool) -> tuple[dict, dict]:
    """The input and output layouts of a map or filter test: cudaMallocPitch's (the output's rows 1000 bytes
    longer), or pitches the test picks (OwnPitches: packed input rows, output rows of width + 3 floats
    starting one float in)."""
    if own_pitches:
        return {"own_pitch": 4 * width}, {"own_pitch": 4 * (width + 3), "col_offset": 1}
    return {}, {"extra": 1000}


def run_map(width: int, height: int, *, test: str = "MapAffine", what: str = "map_affine",
            grid_rows: int = 8, guard: str = "or", row_unit: str = "bytes", swap_pitches: bool = False,
            seed_factor: int = 3) -> list[str]:
    """map_affine (one thread per element, blocks of 32 x 8) with one of its bugs, on the layout of the test:
    grid_rows, the rows one block is taken to cover when the grid is sized; guard "or" (right), "and" or "le"
    (x <= width); row_unit "bytes" (right) or "floats" (row_ptr adding y * pitch to a float pointer);
    swap_pitches: each array's rows found with the other's pitch."""
    own = test == "OwnPitches"
    seed = K_SEED + (17 if own else seed_factor) * width * height
    rng = random.Random(seed)
    host = [f32(rng.uniform(1.0, 100.0)) for _ in range(width * height)]
    in_layout, out_layout = layouts(width, own)
    src, out = Pitched(width, height, junk=rng, **in_layout), Pitched(width, height, **out_layout)
    src.upload(host)
    in_step, out_step = (out.pw, src.pw) if swap_pitches else (src.pw, out.pw)
    if row_unit == "floats":
        in_step, out_step = 4 * in_step, 4 * out_step
    for y in range(ceil_div(height, grid_rows) * 8):
        for x in range(ceil_div(width, 32) * 32):
            skip = {"or": x >= width or y >= height, "and": x >= width and y >= height,
                    "le": x > width or y >= height, "x-only": x >= width}[guard]
            if not skip:
                out.words[out.at(x, y, out_step)] = f32(K_A * src.words[src.at(x, y, in_step)] + K_B)
    return expect_image(out, [K_A * v + K_B for v in host], 1e-6, seed,
                        what + (" (own pitches)" if own else ""))


def run_fast(width: int, height: int, *, test: str = "MapAffineFast", tile_rows: int = 32,
             consecutive: bool = False, guard_stores: bool = True, guard_columns: bool = True,
             out_uses_in_pitch: bool = False, grid_floor: bool = False) -> list[str]:
    """map_affine_fast as the reference writes it (blocks of 32 x 8 threads over 32 x 32 tiles, each thread
    loading its kRows = 4 rows, kBlockY = 8 apart, before it stores them), with one of the challenge's bugs;
    grid_floor: height / kTileY block rows, rounded down."""
    own = test == "OwnPitches"
    seed = K_SEED + (19 if own else 5) * width * height
    rng = random.Random(seed)
    host = [f32(rng.uniform(1.0, 100.0)) for _ in range(width * height)]
    in_layout, out_layout = layouts(width, own)
    src, out = Pitched(width, height, junk=rng, **in_layout), Pitched(width, height, **out_layout)
    src.upload(host)
    out_step = src.pw if out_uses_in_pitch else out.pw
    for by in range(height // 32 if grid_floor else ceil_div(height, 32)):
        for ty in range(8):
            for x in range(ceil_div(width, 32) * 32):
                if guard_columns and x >= width:
                    continue
                rows = [by * tile_rows + ty + k * (1 if consecutive else 8) for k in range(4)]
                values = [src.words[src.at(x, y)] if y < height else 0.0 for y in rows]
                for y, v in zip(rows, values):
                    if y < height or not guard_stores:
                        out.words[out.at(x, y, out_step)] = f32(K_A * v + K_B)
    return expect_image(out, [K_A * v + K_B for v in host], 1e-6, seed,
                        "map_affine_fast" + (" (own pitches)" if own else ""))


def filter_weights() -> list[float]:
    """Nine different weights in [0.25, 1.25), none symmetric to another (filter_weights(kSeed + 77, ...))."""
    rng = random.Random(K_SEED + 77)
    return [f32(rng.uniform(0.25, 1.25)) for _ in range(9)]


FILTER_WHAT = "filter3x3 (clamp-to-edge; wrong values at an edge mean a read outside the image rows)"


def run_filter(width: int, height: int, *, weights: list[float] | None = None,
               kernel_weights: list[float] | None = None, seed: int | None = None, transposed: bool = False,
               rows_clamp: str = "height", zero_border: bool = False, guard: bool = True, grid_rows: int = 8,
               launched: bool = True) -> list[str]:
    """filter3x3 over check_filter's layout with one of its bugs: kernel_weights, what c_weights holds (the
    weights set, unless a bug says otherwise); rows_clamp "height" (right), "width" or "no-lower"; grid_rows,
    the rows one block is taken to cover when the grid is sized."""
    seed = K_SEED + 7 * width * height if seed is None else seed
    rng = random.Random(seed)
    w = weights or filter_weights()
    c_weights = kernel_weights or w
    host = [f32(rng.uniform(1.0, 2.0)) for _ in range(width * height)]
    src, out = Pitched(width, height, junk=rng), Pitched(width, height, extra=1000)
    src.upload(host)

    def clamp(v: int, hi: int) -> int:
        return min(max(v, 0), hi)

    expected = [sum(w[r * 3 + c] * host[clamp(y + r - 1, height - 1) * width + clamp(x + c - 1, width - 1)]
                    for r in range(3) for c in range(3)) for y in range(height) for x in range(width)]
    for y in range(ceil_div(height, grid_rows) * 8 if launched else 0):
        for x in range(ceil_div(width, 32) * 32):
            if guard and (x >= width or y >= height):
                continue
            total = 0.0
            for r in range(3):
                yy = y + r - 1
                if zero_border and not 0 <= yy < height:
                    continue
                yy = {"height": clamp(yy, height - 1), "width": clamp(yy, width - 1),
                      "no-lower": min(yy, height - 1), "none": yy}["none" if zero_border else rows_clamp]
                for c in range(3):
                    xx = x + c - 1
                    if zero_border and not 0 <= xx < width:
                        continue
                    xx = xx if zero_border else clamp(xx, width - 1)
                    total += c_weights[c * 3 + r if transposed else r * 3 + c] * src.words[src.at(xx, yy)]
            out.words[out.at(x, y)] = f32(total)
    return expect_image(out, expected, 1e-5, seed, FILTER_WHAT)
