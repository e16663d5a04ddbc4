"""The hints of labs 04 (pitched memory), 05 (tiled matmul) and 06 (reduce), each fired on the failure its
bug really produces (solutions/NN-slug/mutants/ describes the bugs), and kept away from the failures of
other tasks and other patterns.

A failure is built the way the lab's test binary reports it: the output a mutant's kernel leaves is
simulated here on the test's own layout (lab 04's pitched buffers with guard rows, lab 05's poisoned
matrices, lab 06's sums), compared as cudalab/compare.hpp does, and wrapped in the messages of the test's
EXPECT_* lines; then a GoogleTest JSON report of those failures goes through grader/execute/gtest.py
(which picks the category: a message naming a cudaError is a cuda_error) and the score stage
(scoring.score), which gives each test its task and its hint as in a real grade. compute-sanitizer
findings go through grader/execute/sanitizer.py's parser, missing techniques through the penalties."""

from __future__ import annotations

import io
import math
import random
import re
import struct
from collections.abc import Callable

import pytest

from grader.execute import gtest, sanitizer
from grader.inspect.techniques import TechniqueOutcome
from grader.model.labs import discover
from grader.model.progress import Progress
from grader.model.results import Category, LabResult, Status
from grader.model.results import TestResult as TResult
from grader.score import scoring
from grader.tests.test_hints import ROOT

LABS = {lab.name: lab for lab in discover(ROOT)}
PITCHED, MATMUL, REDUCE = "04-pitched-memory", "05-tiled-matmul", "06-reduce"


# --- values and messages as the test binaries print them --------------------------------------------------

def f32(x: float) -> float:
    """x rounded to float, as the GPU stores it (inf past the largest float)."""
    try:
        return struct.unpack("<f", struct.pack("<f", x))[0]
    except OverflowError:
        return math.copysign(math.inf, x)


def from_bits(bits: int) -> float:
    return struct.unpack("<f", struct.pack("<I", bits & 0xFFFFFFFF))[0]


POISON = from_bits(0xFFFFFFFF)  # cudalab::poison and lab 04's kPoison: 0xFF bytes, a negative NaN
SCRIBBLE = from_bits(0x5A5A5A5A)  # what the tests leave in shared memory before each call (scribble.cuh)
SCRIBBLE_INT = 0x5A5A5A5A
POISON_INT = -1515870811  # an int of 0xA5 bytes


def show(v: float | int) -> str:
    """A value as compare.hpp prints it: integers as they are, floats with 9 significant digits (glibc writes
    a NaN with its sign bit set as -nan)."""
    if isinstance(v, float):
        if math.isnan(v):
            return "-nan" if math.copysign(1.0, v) < 0 else "nan"
        if math.isinf(v):
            return "-inf" if v < 0 else "inf"
        return f"{v:.9g}"
    return str(v)


def compare(expected: list, actual: list, seed: int, rule: str = "exact",
            cols: int | None = None) -> str | None:
    """cudalab::AllEqual's (rule "exact") or AllNear's failure text, with [row r, col c] samples when the
    output is 2-D (cols per row); None when they agree."""
    if rule == "exact":
        def same(e, a) -> bool:
            return e == a
    else:  # "tolerance rel R abs A"
        words = rule.split()
        rel, tol_abs = float(words[2]), float(words[4])

        def same(e, a) -> bool:
            return abs(a - e) <= tol_abs + rel * abs(e)  # False for NaN
    bad = [i for i, (e, a) in enumerate(zip(expected, actual)) if not same(e, a)]
    if not bad:
        return None

    def where(i: int) -> str:
        return f"[{i}]" if cols is None else f"[row {i // cols}, col {i % cols}]"

    text = (f"{len(bad)} of {len(expected)} elements differ (seed {seed}, {rule}); mismatches span indices "
            f"{bad[0]}..{bad[-1]}\n")
    text += "".join(f"  {where(i)} expected {show(expected[i])}, actual {show(actual[i])}\n" for i in bad[:8])
    return text + (f"  ... and {len(bad) - 8} more" if len(bad) > 8 else "")


def value_of(where: str, expr: str, body: str, streamed: str = "") -> str:
    """EXPECT_TRUE(expr) << streamed, failed with an AssertionResult message, as GoogleTest reports it."""
    text = f"{where}\nValue of: {expr}\n  Actual: false ({body})\nExpected: true"
    return text + (f"\n{streamed}" if streamed else "")


def equal(where: str, a: str, a_is: str, b: str, b_is: str, streamed: str = "") -> str:
    """EXPECT_EQ(a, b) << streamed (GoogleTest leaves out "Which is" where an expression is its own value)."""
    def side(expr: str, value: str) -> str:
        return f"\n  {expr}" + (f"\n    Which is: {value}" if value != expr else "")
    text = f"{where}\nExpected equality of these values:{side(a, a_is)}{side(b, b_is)}"
    return text + (f"\n{streamed}" if streamed else "")


def cuda_error(name: str, text: str, call: str, where: str) -> str:
    """A cudalab::CudaError (cudalab/check.cuh) escaping the test body."""
    return ("unknown file\nC++ exception with description "
            f'"CUDA error {name} ({text}) from `{call}` at {where}" thrown in the test body.')


# --- grading a run of the lab's binary ----------------------------------------------------------------

def grade(lab_name: str, tests: list[tuple[str, list[str]]], extra: list[TResult] | None = None,
          missing: list[str] | None = None) -> dict[str, TResult]:
    """Score a run that reported these tests (name, its failures as GoogleTest writes them; none: passed),
    plus extra results (sanitizer) and the lab's techniques whose message contains one of missing: every
    test by name, with its task and hint."""
    lab = LABS[lab_name]
    suites: dict[str, list[dict]] = {}
    for name, failures in tests:
        suite, _, test = name.partition(".")
        suites.setdefault(suite, []).append({"name": test, "status": "RUN", "result": "COMPLETED",
                                             "failures": [{"failure": f} for f in failures]})
    run = gtest.parse_report({"testsuites": [{"name": s, "testsuite": t} for s, t in suites.items()]})
    result = LabResult(number=lab.number, name=lab.name, title=lab.title, max_score=100)
    result.tests = run.tests + list(extra or [])
    outcomes = [TechniqueOutcome(t, False, f"the PTX of {t.kernel}" if t.kind == "ptx"
                                 else "the functions your code calls")
                for t in lab.techniques if any(m in t.message for m in missing or [])]
    assert len(outcomes) == len(missing or []), "each missing technique names one of the lab's"
    scoring.score(lab, result, techniques=(outcomes, []) if missing else None, gpu={}, label="student",
                  progress=Progress(stream=io.StringIO()))
    return {t.name: t for t in result.tests}


def one(lab_name: str, name: str, failures: list[str]) -> TResult:
    return grade(lab_name, [(name, failures)])[name]


def sanitized(lab_name: str, tool: str, log: str) -> TResult:
    """The result of compute-sanitizer <tool> over the lab's binary, as grader/execute/sanitizer.run_tool
    makes it from the tool's log, graded (its task comes from the kernel of the finding)."""
    findings, total = sanitizer.parse_log(log, tool)
    assert findings, "the log must hold a finding"
    count = total if total is not None else sum(f.count for f in findings)
    kernels = ",".join(sorted({f.kernel for f in findings if f.kernel}))
    result = TResult(name=f"sanitizer.{tool}", status=Status.FAILED, kind="correctness",
                     category=Category.SANITIZER,
                     message="\n".join([f"compute-sanitizer {tool} reported {count} error(s):"]
                                       + [f"  {f.line()}" for f in findings]),
                     properties={"sanitizer_tool": tool, "sanitizer_kernels": kernels})
    return grade(lab_name, [], extra=[result])[result.name]


def race_log(kernel: str, write_at: str, read_at: str, hazards: int = 2048) -> str:
    return ("========= COMPUTE-SANITIZER\n"
            "========= Error: Race reported between "
            f"Write access at {kernel}+0x3f0 in /home/s/labs/{write_at}\n"
            f"=========     and Read access at {kernel}+0x410 in /home/s/labs/{read_at} [{hazards} hazards]\n"
            "=========\n"
            "========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)\n")


def memcheck_log(what: str, kernel: str, at: str, errors: int = 64) -> str:
    return ("========= COMPUTE-SANITIZER\n"
            f"========= {what}\n"
            f"=========     at {kernel}+0x2c0 in /home/s/labs/{at}\n"
            "=========     by thread (5,3,0) in block (0,1,0)\n"
            "=========     Access to 0x7f2440808000 is out of bounds\n"
            "=========     and is 1 bytes after the nearest allocation at 0x7f2440804000 of size 16,384 "
            "bytes\n"
            "=========\n"
            f"========= ERROR SUMMARY: {errors} errors\n")


def synccheck_log(kernel: str, at: str) -> str:
    return ("========= COMPUTE-SANITIZER\n"
            "========= Barrier error detected. Divergent thread(s) in block\n"
            f"=========     at {kernel}+0x270 in /home/s/labs/{at}\n"
            "=========     by thread (64,0,0) in block (0,0,0)\n"
            "=========\n"
            "========= ERROR SUMMARY: 96 errors\n")


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


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


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


def test_04_simulated_kernels_pass_without_their_bugs() -> None:
    for w, h in ((33, 7), (1, 7), (77, 41)):
        assert run_map(w, h) == run_map(w, h, test="OwnPitches") == []
        assert run_fast(w, h) == run_fast(w, h, test="OwnPitches") == []
        assert run_filter(w, h) == []


# --- task 1: transfer ---

UPLOAD_CALL = ("cudaMemcpy2D(image.data, image.pitch, host.data(), row_bytes, row_bytes, height, "
               "cudaMemcpyHostToDevice)")


def upload_failure(width: int, height: int,
                   rows: Callable[[list[float], int, int], list[float]]) -> list[str]:
    """PitchedTransferCorrectness.Upload: the device rows, read back at data + y * pitch, against the host
    vector; rows(host, width, pitch_words) is what the upload left in the device array, row after row."""
    seed = K_SEED + width * height
    rng = random.Random(seed)
    host = [f32(rng.uniform(1.0, 100.0)) for _ in range(width * height)]
    body = compare(host, rows(host, width, malloc_pitch(4 * width) // 4), seed, cols=width)
    if not body:
        return []
    return [value_of(f"{PITCHED_AT}:186", "AllEqual(host, rows, kSeed + elements(s), Shape2D{...})", body,
                     "row y of the device array starts at data + y * pitch bytes ([row y, col x])")]


def test_04_cudaMemcpy2D_refuses_a_pitch_counted_in_floats() -> None:
    call = UPLOAD_CALL.replace("host.data(), row_bytes", "host.data(), width")
    t = one(PITCHED, "PitchedTransferCorrectness.Upload/33x7", [cuda_error(
        "cudaErrorInvalidPitchValue", "invalid pitch argument", call,
        "/home/s/labs/04-pitched-memory/pitched.cu:36")])
    assert t.category is Category.CUDA_ERROR and t.task == "transfer"
    assert "the width and both pitches are counted in bytes" in t.hint


def test_04_a_pitch_not_from_cudaMallocPitch() -> None:
    """A pitch of width * 4 and cudaMalloc: the rows come out right, the pitch does not."""
    t = one(PITCHED, "PitchedTransferCorrectness.Upload/33x7", [equal(
        f"{PITCHED_AT}:177", "pitch", "132", "expected_pitch", "512",
        "cudaMallocPitch gives rows of 132 bytes a pitch of 512 bytes")])
    assert "Let cudaMallocPitch choose the pitch" in t.hint


def test_04_upload_reads_the_host_rows_with_the_device_pitch() -> None:
    """upload-host-pitch-is-device-pitch: device row y gets the host floats from y * pitch on (past the
    vector's end: whatever lies there)."""
    junk = random.Random(1)

    def rows(host: list[float], w: int, pw: int) -> list[float]:
        return [host[i] if i < len(host) else from_bits(junk.getrandbits(32))
                for y in range(len(host) // w) for i in range(y * pw, y * pw + w)]
    graded = grade(PITCHED, [("PitchedTransferCorrectness.Upload/33x1", upload_failure(33, 1, rows)),
                             ("PitchedTransferCorrectness.Upload/33x7", upload_failure(33, 7, rows)),
                             ("PitchedTransferCorrectness.Upload/1000x7", upload_failure(1000, 7, rows))])
    assert graded["PitchedTransferCorrectness.Upload/33x1"].status is Status.PASSED
    for name in ("PitchedTransferCorrectness.Upload/33x7", "PitchedTransferCorrectness.Upload/1000x7"):
        hint = graded[name].hint
        assert "the destination pitch is the device array's (image.pitch)" in hint
        assert "row_ptr" not in hint


def test_04_upload_copies_a_width_counted_in_floats() -> None:
    """upload-width-in-floats: width bytes of each row arrive, the rest is what the fresh allocation held."""
    def rows(host: list[float], w: int, pw: int) -> list[float]:
        out = []
        for y in range(7):
            row = host[y * 33:(y + 1) * 33]
            raw = b"".join(struct.pack("<f", v) for v in row)[:33] + bytes(4 * 33 - 33)
            out += list(struct.unpack("<33f", raw))
        return out
    t = one(PITCHED, "PitchedTransferCorrectness.Upload/33x7", upload_failure(33, 7, rows))
    assert "[row 0, col 8]" in t.message
    assert "the width argument of cudaMemcpy2D is the number of bytes to copy per row" in t.hint


def download_failure(width: int, height: int, test: str,
                     download: Callable[[Pitched], list[float]]) -> list[str]:
    """PitchedTransferCorrectness.Download (cudaMallocPitch's pitch) or DownloadOwnPitch (rows of width + 5
    floats starting one float in), the padding poisoned: download(buffer) is what download_pitched returns."""
    own = test == "DownloadOwnPitch"
    seed = K_SEED + (13 if own else 2) * width * height
    rng = random.Random(seed)
    host = [f32(rng.uniform(1.0, 100.0)) for _ in range(width * height)]
    buf = Pitched(width, height, guard=False, own_pitch=4 * (width + 5) if own else 0,
                  col_offset=1 if own else 0)
    buf.upload(host)
    body = compare(host, download(buf), seed, cols=width)
    tail = "(width + 5 floats); NaN means a padding byte was copied" if own else \
        "; NaN means a padding byte was copied (source pitch taken as width * 4?)"
    return [value_of(f"{PITCHED_AT}:{217 if own else 203}", "AllEqual(host, got, ...)", body,
                     f"pitch {buf.pitch} B{' ' if own else ''}{tail}")] if body else []


def flat_download(buf: Pitched) -> list[float]:
    """download-flat-memcpy: width * height floats straight from data, padding and all."""
    start = buf.at(0, 0)
    return [POISON if v is None else v for v in buf.words[start:start + buf.w * buf.h]]


def host_pitch_download(buf: Pitched) -> list[float]:
    """download-host-pitch-is-device-pitch: row y lands y * pitch bytes into the packed vector (zeros)."""
    got = [0.0] * (buf.w * buf.h)
    for y in range(buf.h):
        for x in range(buf.w):
            if y * buf.pw + x < len(got):
                got[y * buf.pw + x] = buf.words[buf.at(x, y)]
    return got


@pytest.mark.parametrize("test", ["Download", "DownloadOwnPitch"])
def test_04_download_with_one_flat_copy(test: str) -> None:
    t = one(PITCHED, f"PitchedTransferCorrectness.{test}/33x7", download_failure(33, 7, test, flat_download))
    assert "actual -nan" in t.message and t.task == "transfer"
    assert "which neither one flat cudaMemcpy nor a source pitch of width * 4 can express" in t.hint


@pytest.mark.parametrize("test, width", [("Download", 33), ("DownloadOwnPitch", 1000)])
def test_04_download_with_the_device_pitch_for_the_host(test: str, width: int) -> None:
    t = one(PITCHED, f"PitchedTransferCorrectness.{test}/{width}x7",
            download_failure(width, 7, test, host_pitch_download))
    assert "the destination is the packed host vector, whose pitch is width * sizeof(float)" in t.hint
    assert "neither one flat cudaMemcpy" not in t.hint


def test_04_free_that_never_frees() -> None:
    t = one(PITCHED, "PitchedMemoryCorrectness.FreeReleasesEverything", [value_of(
        f"{PITCHED_AT}:241", "kept.empty()", "",
        "32 more upload/free pairs kept 524288 KiB of device memory in 32 allocation(s) (cudaFree for every "
        "cudaMalloc): free_pitched must cudaFree the data").replace("  Actual: false ()", "  Actual: false")])
    assert "Reset first, and cudaFree receives a null pointer" in t.hint


def test_04_free_that_does_not_reset_the_image() -> None:
    t = one(PITCHED, "PitchedMemoryCorrectness.FreeReleasesEverything", [
        equal(f"{PITCHED_AT}:232", "image.data", "0x7f3a2c000000", "nullptr", "(nullptr)",
              "free_pitched should reset the image to PitchedImage{}"),
        equal(f"{PITCHED_AT}:233", "image.pitch", "32768", "0u", "0",
              "free_pitched should reset the image to PitchedImage{}")])
    assert "assign PitchedImage{}, so no dangling data pointer or stale pitch survives" in t.hint


# --- task 2: map ---

def launch_refused(line: int) -> list[str]:
    """CUDA 13 refuses a grid with a 0 dimension as cudaErrorInvalidValue (labs/03-vector-add/README.md)."""
    return [cuda_error("cudaErrorInvalidValue", "invalid argument", "kernel launch",
                       f"/home/s/labs/04-pitched-memory/pitched.cu:{line}")]


def test_04_map_launch_with_an_empty_grid() -> None:
    """A grid of height / kBlockY blocks: 0 for a 7-row image."""
    graded = grade(PITCHED, [("PitchedMapCorrectness.MapAffine/33x7", launch_refused(104)),
                             ("PitchedMapCorrectness.MapAffine/33x512", [])])
    t = graded["PitchedMapCorrectness.MapAffine/33x7"]
    assert t.category is Category.CUDA_ERROR and t.task == "map"
    assert "an image 1 pixel wide or 7 rows tall still needs one block each way" in t.hint


@pytest.mark.parametrize("bug", [{"row_unit": "floats"}, {"swap_pitches": True}])
def test_04_map_rows_stepped_in_the_wrong_unit(bug: dict) -> None:
    """row-ptr-float-arithmetic, map-pitches-swapped: row 0 right, every row below it wrong."""
    graded = grade(PITCHED, [(f"PitchedMapCorrectness.MapAffine/{w}x{h}", run_map(w, h, **bug))
                             for w, h in ((33, 1), (33, 7), (1000, 7), (77, 41))])
    assert graded["PitchedMapCorrectness.MapAffine/33x1"].status is Status.PASSED
    for w, h in ((33, 7), (1000, 7), (77, 41)):
        t = graded[f"PitchedMapCorrectness.MapAffine/{w}x{h}"]
        assert "[row 1, col 0]" in t.message and t.task == "map"
        assert "the mark of a row step in the wrong unit: row_ptr must add y * pitch bytes" in t.hint


@pytest.mark.parametrize("w, h, first_row", [(77, 41, 16), (33, 512, 128)])
def test_04_map_grid_that_misses_the_lower_rows(w: int, h: int, first_row: int) -> None:
    """map-grid-y-uses-block-x: ceil(height / 32) blocks of 8 rows."""
    t = one(PITCHED, f"PitchedMapCorrectness.MapAffine/{w}x{h}", run_map(w, h, grid_rows=32))
    assert f"[row {first_row}, col 0] expected" in t.message
    assert "the grid must cover every column and every row" in t.hint and "row_ptr" not in t.hint


@pytest.mark.parametrize("test, guard", [("MapAffine", "and"), ("MapAffine", "le"), ("OwnPitches", "and"),
                                         ("OwnPitches", "le")])
def test_04_map_guard_that_lets_threads_past_the_row_write(test: str, guard: str) -> None:
    """map-guard-and, map-guard-off-by-one: the values are right, the padding is not."""
    t = one(PITCHED, f"PitchedMapCorrectness.{test}/33x7", run_map(33, 7, test=test, guard=guard))
    assert "wrote" in t.message and "elements differ" not in t.message
    assert "A thread past the end of a row wrote into its padding" in t.hint


def test_04_map_guard_that_forgets_the_rows() -> None:
    """A guard on x alone: the grid's eighth row of a 7-row image writes below it."""
    t = one(PITCHED, "PitchedMapCorrectness.MapAffine/33x7", run_map(33, 7, guard="x-only"))
    assert "(first: 1 rows below the image)" in t.message
    assert "threads with y >= height exist, and they must do nothing" in t.hint


def huge_failures(what: str) -> list[str]:
    """PitchedHugeCorrectness with y * pitch in int: the output rows from 65536 on (32768-byte pitch) and the
    input rows from 67101 on (32004 bytes) wrap to 2 GiB before the image."""
    wrong = (67200 - 65536) * 8000
    return [equal(f"{PITCHED_AT}:482", "wrong", str(wrong), "0", "0",
                  f"{what}: {wrong} of 537600000 elements of a 8000 x 67200 image are wrong; its rows past "
                  "65536 start more than 2^31 bytes in: compute y * pitch in std::size_t"),
            equal(f"{PITCHED_AT}:489", "touched", str(wrong), "0", "0",
                  f"{what} wrote {wrong} floats outside the image rows")]


def test_04_map_row_offset_in_int() -> None:
    """row-ptr-int-offset: every other test passes."""
    t = one(PITCHED, "PitchedHugeCorrectness.MapAffineBeyond2GiB", huge_failures("map_affine"))
    assert t.task == "map" and "In row_ptr, keep it std::size_t from the multiplication on" in t.hint


# --- task 3: filter ---

def test_04_filter_weights_copied_once() -> None:
    """set_filter_weights that copies only on its first call: the second weights never reach c_weights."""
    w1 = [f32(v) for v in (0.3, 0.9, 1.1, 0.5, 0.7, 1.2, 0.4, 0.8, 1.0)]
    w2 = [-v for v in (0.6, 1.0, 0.3, 1.2, 0.4, 0.9, 0.5, 1.1, 0.7)]
    failures = (run_filter(77, 41, weights=w1, seed=K_SEED + 11)
                + run_filter(77, 41, weights=w2, kernel_weights=w1, seed=K_SEED + 12))
    assert len(failures) == 1
    t = one(PITCHED, "PitchedFilterWeightsCorrectness.NewWeightsTakeEffect", failures)
    assert t.task == "filter" and "New weights must take effect on the next call" in t.hint


def test_04_filter_grid_that_stops_short() -> None:
    t = one(PITCHED, "PitchedFilterCorrectness.Filter3x3/77x41", run_filter(77, 41, grid_rows=32))
    assert "launch filter3x3_kernel over the whole image" in t.hint


def test_04_filter_with_transposed_or_partly_copied_weights() -> None:
    """filter-weights-transposed; weights-copy-9-bytes (c_weights[2..8] still 0 from the start)."""
    w = filter_weights()
    nine_bytes = w[:2] + [from_bits(struct.unpack("<I", struct.pack("<f", w[2]))[0] & 0xFF)] + [0.0] * 6
    for failures in (run_filter(33, 7, transposed=True), run_filter(33, 7, kernel_weights=nine_bytes)):
        t = one(PITCHED, "PitchedFilterCorrectness.Filter3x3/33x7", failures)
        assert "231 of 231 elements differ" in t.message
        assert "Every pixel is written and every pixel is wrong, so look at what they all share" in t.hint


@pytest.mark.parametrize("w, h, bug", [
    (33, 7, {"zero_border": True}), (1000, 7, {"zero_border": True}),
    (33, 7, {"rows_clamp": "no-lower"}), (77, 41, {"rows_clamp": "no-lower"}),
])
def test_04_filter_edges_not_clamped(w: int, h: int, bug: dict) -> None:
    """filter-zero-border, filter-row-no-lower-clamp: the corner pixel is already wrong."""
    t = one(PITCHED, f"PitchedFilterCorrectness.Filter3x3/{w}x{h}", run_filter(w, h, **bug))
    assert "[row 0, col 0]" in t.message and f"{w * h} of {w * h}" not in t.message
    assert "The corner pixel (0, 0) is wrong, so look at the edges" in t.hint


@pytest.mark.parametrize("w, h, first_row", [(33, 7, 6), (1000, 7, 6), (33, 512, 32)])
def test_04_filter_rows_clamped_against_the_width(w: int, h: int, first_row: int) -> None:
    """filter-row-clamp-uses-width: wide images read below the last row, tall ones clamp too early."""
    t = one(PITCHED, f"PitchedFilterCorrectness.Filter3x3/{w}x{h}", run_filter(w, h, rows_clamp="width"))
    assert f"[row {first_row}, col 0] expected" in t.message
    assert "look at the clamp of the neighbour's row. It must stop at height - 1" in t.hint


def test_04_filter_without_a_guard() -> None:
    """filter-no-guard: every value right, the padding and the rows below written."""
    t = one(PITCHED, "PitchedFilterCorrectness.Filter3x3/33x7", run_filter(33, 7, guard=False))
    assert "elements differ" not in t.message
    assert "Clamping the neighbours they read does not make their store safe" in t.hint


# --- challenge: map_affine_fast ---

def test_04_fast_grid_rounded_down() -> None:
    """fast-grid-floor: height / kTileY block rows, 0 below 32 rows, the last partial tile missing above."""
    graded = grade(PITCHED, [
        ("PitchedFastCorrectness.MapAffineFast/33x7", launch_refused(150)),
        ("PitchedFastCorrectness.MapAffineFast/77x41", run_fast(77, 41, grid_floor=True))])
    t = graded["PitchedFastCorrectness.MapAffineFast/33x7"]
    assert t.category is Category.CUDA_ERROR and t.task == "fast"
    assert "Round the number of row tiles up (ceil_div(height, kTileY)), never down" in t.hint
    tall = graded["PitchedFastCorrectness.MapAffineFast/77x41"]
    assert "[row 32, col 0] expected" in tall.message
    assert "the grid needs ceil_div(height, kTileY) block rows" in tall.hint


def test_04_fast_output_rows_with_the_input_pitch() -> None:
    """fast-out-uses-in-pitch."""
    t = one(PITCHED, "PitchedFastCorrectness.MapAffineFast/33x7", run_fast(33, 7, out_uses_in_pitch=True))
    assert "[row 1, col 0]" in t.message and t.task == "fast"
    assert "each array has its own pitch (in_pitch to read, out_pitch to write)" in t.hint


@pytest.mark.parametrize("w, h, bug, first_row", [
    (33, 512, {"tile_rows": 8}, 152),  # fast-tile-offset-block-y: block b starts at row 8 b
    (77, 41, {"consecutive": True}, 11),  # fast-rows-consecutive: a thread's rows y0 .. y0 + 3
])
def test_04_fast_rows_nobody_wrote(w: int, h: int, bug: dict, first_row: int) -> None:
    t = one(PITCHED, f"PitchedFastCorrectness.MapAffineFast/{w}x{h}", run_fast(w, h, **bug))
    assert f"[row {first_row}, col 0] expected" in t.message and "actual -nan" in t.message
    assert "a block covers a tile of kTileY rows, so the grid needs ceil_div(height, kTileY)" in t.hint


def test_04_fast_stores_below_the_image() -> None:
    """fast-store-unguarded: the loads of rows past height are guarded, their stores are not."""
    t = one(PITCHED, "PitchedFastCorrectness.MapAffineFast/77x41", run_fast(77, 41, guard_stores=False))
    assert "elements differ" not in t.message and "rows below the image" in t.message
    assert "Guard every store by its own row, as well as every load" in t.hint


@pytest.mark.parametrize("test", ["MapAffineFast", "OwnPitches"])
def test_04_fast_without_a_column_guard(test: str) -> None:
    """fast-no-column-guard: the last block column's threads past the width write the padding."""
    t = one(PITCHED, f"PitchedFastCorrectness.{test}/33x7", run_fast(33, 7, test=test, guard_columns=False))
    assert "(first: padding of image row 0" in t.message
    assert "this kernel has no barrier, so they can simply return" in t.hint


def test_04_fast_row_offset_in_int() -> None:
    t = one(PITCHED, "PitchedHugeCorrectness.MapAffineFastBeyond2GiB", huge_failures("map_affine_fast"))
    assert t.task == "fast" and "a row offset passes through an int in the fast kernel" in t.hint


# --- lab 04: hints that must stay away ---

def test_04_hints_stay_in_their_task_and_pattern() -> None:
    # The upload's row-1 failure is a cudaMemcpy2D pitch, not row_ptr's; the map's is row_ptr's.
    def rows(host: list[float], w: int, pw: int) -> list[float]:
        return [host[i] if i < len(host) else 0.0 for y in range(7) for i in range(y * pw, y * pw + w)]
    upload = one(PITCHED, "PitchedTransferCorrectness.Upload/33x7", upload_failure(33, 7, rows))
    assert "row_ptr" not in upload.hint and "a row step in the wrong unit" not in upload.hint
    # A map that never launched: the poison everywhere is no weights problem and no pitch problem.
    nothing = one(PITCHED, "PitchedFilterCorrectness.Filter3x3/33x7", run_filter(33, 7, launched=False))
    assert "launch filter3x3_kernel over the whole image" in nothing.hint
    assert "the weights" not in nothing.hint
    # The map's padding hint is about the guard; a correct map gets no hint at all.
    ok = grade(PITCHED, [("PitchedMapCorrectness.MapAffine/33x7", run_map(33, 7))])
    assert ok["PitchedMapCorrectness.MapAffine/33x7"].hint == ""
    # The fast kernel's hints never reach a map_affine failure of the same shape.
    swapped = one(PITCHED, "PitchedMapCorrectness.MapAffine/33x7", run_map(33, 7, swap_pitches=True))
    assert "(in_pitch to read, out_pitch to write)" not in swapped.hint
    # A test of another task with a [row 1, col 0] first mismatch (the filter's) gets no map text.
    low = one(PITCHED, "PitchedFilterCorrectness.Filter3x3/33x7", run_filter(33, 7, rows_clamp="width"))
    assert "row_ptr must add" not in low.hint


# =====================================================================================================
# Lab 05: tiled matmul. The transposes and matmuls run on small shapes of the test's lists; outputs start as
# poison (NaN) between guard zones, inputs are surrounded by junk, shared memory holds the scribble.
# =====================================================================================================

M_SEED = 5005
MATMUL_AT = "/home/s/labs/05-tiled-matmul/test_matmul.cu"
GUARDED_AT = "/home/s/labs/05-tiled-matmul/../../common/include/cudalab/guarded_buffer.cuh:85"


def junk_values(seed: int) -> Callable[[], float]:
    """The guard zones' junk: random bytes (cudalab/guarded_buffer.cuh), read as floats."""
    rng = random.Random(seed)
    return lambda: from_bits(rng.getrandbits(32))


def guard_failure(what: str, count: int, before: int, after: int, first_after: int = 0) -> str:
    """GuardedBuffer::guards_intact's failure: bytes changed before and past the buffer."""
    msg = f"out-of-bounds write: a kernel changed memory outside {what} ({count} element(s) of 4 bytes):"
    if before:
        msg += f" {before} byte(s) before its start (the nearest 4 byte(s) before)"
    if before and after:
        msg += " and"
    if after:
        msg += f" {after} byte(s) past its end (the first at byte {first_after} past the end)"
    msg += ". Check the bounds guard of every thread that writes it."
    buffer, line = ("d_out", 140) if what == "the output" else ("d_c", 269)
    return value_of(f"{MATMUL_AT}:{line}", f'{buffer}.guards_intact("{what}")', msg)


class Output:
    """A poisoned output between guard zones: writes outside it are counted, not stored."""

    def __init__(self, count: int) -> None:
        self.values = [POISON] * count
        self.before: set[int] = set()
        self.after: set[int] = set()

    def store(self, i: int, v: float) -> None:
        if i < 0:
            self.before.add(i)
        elif i >= len(self.values):
            self.after.add(i - len(self.values))
        else:
            self.values[i] = v

    def guards(self, what: str) -> list[str]:
        if not self.before and not self.after:
            return []
        return [guard_failure(what, len(self.values), 4 * len(self.before), 4 * len(self.after),
                              4 * min(self.after) if self.after else 0)]


TRANSPOSE_SEED = {"Naive": 0, "Tiled": 1, "Padded": 2}
TRANSPOSE_ARGS = "(const float *, float *, int, int)"
MATMUL_ARGS = "(const float *, const float *, float *, int, int, int)"


def transpose(test: str, rows: int, cols: int, **bug) -> list[str]:
    """TransposeCorrectness.<test>/r<rows>_c<cols>: the naive kernel (32 x 4 blocks, one element a thread) or
    the tiled one (32 x 32 tiles, 32 x 4 threads, kTile / kRows elements each), with one of the bugs:
    naive: grid_swapped, guard_swapped, out_stride_cols; tiled: not_transposed, store_guard_input,
    race (a thread reads a slot another warp has not stored: the scribble), store_rows (the rows of a tile
    the store loop covers), out_col_block_x."""
    seed = M_SEED + rows * 7919 + cols + TRANSPOSE_SEED[test]
    rng = random.Random(seed)
    src = [f32(rng.uniform(1.0, 1000.0)) for _ in range(rows * cols)]
    junk = junk_values(seed)

    def load(r: int, c: int) -> float:
        return src[r * cols + c] if 0 <= r * cols + c < len(src) else junk()

    out = Output(rows * cols)
    if test == "Naive":
        gx, gy = (ceil_div(cols, 32), ceil_div(rows, 4))
        if bug.get("grid_swapped"):
            gx, gy = ceil_div(rows, 32), ceil_div(cols, 4)
        for r in range(4 * gy):
            for c in range(32 * gx):
                inside = r < cols and c < rows if bug.get("guard_swapped") else r < rows and c < cols
                if inside:
                    out.store(c * (cols if bug.get("out_stride_cols") else rows) + r, load(r, c))
    else:
        for by in range(ceil_div(rows, 32)):
            for bx in range(ceil_div(cols, 32)):
                tile = [[SCRIBBLE] * 32 for _ in range(32)]
                for j in range(32):
                    for tx in range(32):
                        r, c = by * 32 + j, bx * 32 + tx
                        if r < rows and c < cols:
                            tile[j][tx] = load(r, c)
                for j in range(bug.get("store_rows", 32)):
                    for tx in range(32):
                        orow = bx * 32 + j
                        ocol = (bx if bug.get("out_col_block_x") else by) * 32 + tx
                        inside = orow < cols and ocol < rows
                        if bug.get("store_guard_input"):
                            inside = orow < rows and ocol < cols
                        if not inside:
                            continue
                        v = tile[j][tx] if bug.get("not_transposed") else tile[tx][j]
                        if bug.get("race") and (bx + by) % 2 == 0 and j % 4 == 0 and tx % 4 == (j // 4) % 4:
                            v = SCRIBBLE  # warp j % 4 read slot (tx, j) before warp tx % 4 stored it
                        out.store(orow * rows + ocol, v)
    expected = [src[r * cols + c] for c in range(cols) for r in range(rows)]
    failures = out.guards("the output")
    body = compare(expected, out.values, seed, cols=rows)
    if body:
        expr = ("AllEqual(transpose_reference(in, s.rows, s.cols), after_offset(d_out.to_host(), off, "
                "\"the output\"), seed, Shape2D{...})")
        streamed = f"input {rows} x {cols}, output {cols} x {rows}"
        failures.append(value_of(f"{MATMUL_AT}:141", expr, body, streamed))
    return failures


def transposes(test: str, **bug) -> dict[str, TResult]:
    shapes = [(1, 1), (1, 100), (100, 1), (31, 33), (32, 32), (33, 65), (64, 64), (129, 2)]
    return grade(MATMUL, [(f"TransposeCorrectness.{test}/r{r}_c{c}", transpose(test, r, c, **bug))
                          for r, c in shapes])


def test_05_simulated_transposes_are_right_without_their_bugs() -> None:
    for test in ("Naive", "Tiled", "Padded"):
        assert all(t.status is Status.PASSED for t in transposes(test).values())


@pytest.mark.parametrize("bug, hints", [
    ("out_stride_cols", {"r31_c33": "A store landed outside the output, which is cols x rows",
                         "r33_c65": "A store landed outside the output, which is cols x rows",
                         "r129_c2": "Check each index against its own bound"}),
    ("guard_swapped", {"r31_c33": "Check each index against its own bound",
                       "r33_c65": "Check each index against its own bound",
                       "r100_c1": "only a thread whose (r, c) lies inside the input"}),
])
def test_05_naive_transpose_right_for_square_matrices_only(bug: str, hints: dict[str, str]) -> None:
    """tnaive-out-stride-cols (stores out of place, past the output's end for some shapes),
    tnaive-guard-swapped (junk read past the input stored, elements of the lost columns never written)."""
    graded = transposes("Naive", **{bug: True})
    for square in ("r1_c1", "r32_c32", "r64_c64"):
        assert graded[f"TransposeCorrectness.Naive/{square}"].status is Status.PASSED
    for shape, words in hints.items():
        t = graded[f"TransposeCorrectness.Naive/{shape}"]
        assert t.task == "transpose-naive" and words in t.hint, (shape, t.hint)
    if bug == "out_stride_cols":
        assert "out-of-bounds write" in graded["TransposeCorrectness.Naive/r33_c65"].message


def test_05_naive_transpose_grid_sized_the_other_way_round() -> None:
    """tnaive-grid-swapped: 1 x 100 gets one block of 32 columns."""
    graded = transposes("Naive", grid_swapped=True)
    for name in ("TransposeCorrectness.Naive/r1_c100", "TransposeCorrectness.Naive/r31_c33",
                 "TransposeCorrectness.Naive/r129_c2"):
        t = graded[name]
        assert "actual -nan" in t.message
        assert "the grid needs ceil_div(cols, kTile) blocks in x and ceil_div(rows, kRows) in y" in t.hint
        assert "Check each index" not in t.hint
    assert graded["TransposeCorrectness.Naive/r32_c32"].status is Status.PASSED


def test_05_naive_transpose_reads_past_the_input() -> None:
    log = memcheck_log("Invalid __global__ read of size 4 bytes", f"transpose_naive_kernel{TRANSPOSE_ARGS}",
                       "05-tiled-matmul/matmul.cu:31")
    t = sanitized(MATMUL, "memcheck", log)
    assert t.task == "transpose-naive"
    assert "memcheck sees such a read even when its value is never stored" in t.hint


@pytest.mark.parametrize("test", ["Tiled", "Padded"])
def test_05_tiled_transposes_read_the_tile_before_it_is_stored(test: str) -> None:
    """ttiled-no-syncthreads, tpadded-no-syncthreads: the scribble comes out as an element."""
    t = transposes(test, race=True)[f"TransposeCorrectness.{test}/r64_c64"]
    assert "actual 1.53652219e+16" in t.message
    assert "a tile slot nobody stored was written out" in t.hint
    assert ("read before the __syncthreads() that must separate filling the tile from reading it" in t.hint
            or "The padded kernel needs the same __syncthreads() as the tiled one" in t.hint)
    assert t.task == f"transpose-{test.lower()}"


def test_05_tiled_transpose_that_does_not_turn_the_tile() -> None:
    """ttiled-tile-not-transposed: every tile in place, its contents as they were."""
    graded = transposes("Tiled", not_transposed=True)
    assert graded["TransposeCorrectness.Tiled/r1_c1"].status is Status.PASSED
    for name in ("TransposeCorrectness.Tiled/r31_c33", "TransposeCorrectness.Tiled/r64_c64"):
        assert "the tiles reach their transposed places, but their contents are copied" in graded[name].hint


def test_05_tiled_transpose_stores_guarded_with_the_input_bounds() -> None:
    """ttiled-store-guard-input-bounds: tall, thin inputs store past the output; the others write out slots
    past the matrix that no load filled (the scribble)."""
    graded = transposes("Tiled", store_guard_input=True)
    assert graded["TransposeCorrectness.Tiled/r64_c64"].status is Status.PASSED
    tall = graded["TransposeCorrectness.Tiled/r129_c2"]
    assert "out-of-bounds write" in tall.message
    assert "Guard each store with the output's bounds (row < cols, column < rows)" in tall.hint
    assert "Check each index against its own bound" not in tall.hint  # the naive task's
    wide = graded["TransposeCorrectness.Tiled/r31_c33"]
    assert "actual 1.53652219e+16" in wide.message and "out-of-bounds" not in wide.message
    assert "it lies past the matrix and the store's guard let it through" in wide.hint


@pytest.mark.parametrize("test", ["Tiled", "Padded"])
def test_05_tiled_transposes_that_place_tiles_wrong(test: str) -> None:
    """tpadded-out-col-block-x: the output column from blockIdx.x too. Blocks run in order, so block (0, 1)
    overwrites tile (0, 0) after block (0, 0): the first wrong elements are values, not NaN."""
    graded = transposes(test, out_col_block_x=True)
    assert graded[f"TransposeCorrectness.{test}/r32_c32"].status is Status.PASSED
    t = graded[f"TransposeCorrectness.{test}/r64_c64"]
    assert "[row 0, col 0]" in t.message
    assert "stores it transposed at output row blockIdx.x * kTile, column blockIdx.y * kTile" in t.hint


@pytest.mark.parametrize("kernel, task", [("transpose_tiled_kernel", "transpose-tiled"),
                                          ("transpose_padded_kernel", "transpose-padded")])
def test_05_transpose_race(kernel: str, task: str) -> None:
    t = sanitized(MATMUL, "racecheck", race_log(f"{kernel}{TRANSPOSE_ARGS}", "05-tiled-matmul/matmul.cu:52",
                                                "05-tiled-matmul/matmul.cu:58"))
    assert t.task == task and "A warp read the tile while another warp was still storing it" in t.hint


def test_05_tiled_transpose_loads_past_the_input() -> None:
    """ttiled-load-no-row-guard: the output is right; only memcheck sees the read."""
    log = memcheck_log("Invalid __global__ read of size 4 bytes", f"transpose_tiled_kernel{TRANSPOSE_ARGS}",
                       "05-tiled-matmul/matmul.cu:49")
    t = sanitized(MATMUL, "memcheck", log)
    assert t.task == "transpose-tiled"
    assert "guard every load by its row (< rows) as well as its column" in t.hint


def test_05_tiled_transpose_without_shared_memory() -> None:
    graded = grade(MATMUL, [], missing=["transpose_tiled_kernel stages its tile",
                                        "transpose_tiled_kernel waits at"])
    for name in ("Techniques.transpose-tiled", "Techniques.transpose-tiled/2"):
        t = graded[name]
        assert t.category is Category.TECHNIQUE_MISSING
        assert "only a tile in shared memory lets both the global loads and the global stores" in t.hint


def test_05_padded_transpose_store_loop_that_stops_halfway() -> None:
    """tpadded-store-loop-short: half the rows of every output tile."""
    graded = transposes("Padded", store_rows=16)
    assert graded["TransposeCorrectness.Padded/r1_c1"].status is Status.PASSED
    t = graded["TransposeCorrectness.Padded/r33_c65"]
    assert "the store loop must cover every row of the tile that the load loop covered" in t.hint


def test_05_padded_transpose_without_a_shared_tile() -> None:
    """Padding only shows in the perf chart; the technique check is where a padded kernel without a shared
    tile meets the bank-conflict advice."""
    t = grade(MATMUL, [], missing=["transpose_padded_kernel reads its tile"])["Techniques.transpose-padded"]
    assert "the extra column spreads the 32 elements of a tile column over 32 banks" in t.hint


# --- matmul ---

def matmul_problem(m: int, n: int, k: int,
                   integers: bool = False) -> tuple[list[float], list[float], list[float], int]:
    """A, B and C = A * B in float64, as problem() makes them (values in [0.25, 1.25), or small integers)."""
    seed = M_SEED + 1000003 * m + 1009 * n + k + (17 if integers else 0)
    rng = random.Random(seed)
    if integers:
        def draw() -> float:
            return float(rng.choice([-4, -3, -2, -1, 1, 2, 3, 4]))
    else:
        def draw() -> float:
            return f32(rng.uniform(0.25, 1.25))
    a = [draw() for _ in range(m * k)]
    b = [draw() for _ in range(k * n)]
    c = [sum(a[r * k + i] * b[i * n + col] for i in range(k)) for r in range(m) for col in range(n)]
    return a, b, c, seed


Kernel = Callable[[list[float], list[float], Callable[[], float], Output], None]


def matmul_failures(test: str, m: int, n: int, k: int, run: Kernel) -> list[str]:
    """MatmulCorrectness.<test>/m_n_k: run(a, b, junk, c) fills C; then guards_intact and AllNear."""
    a, b, expected, seed = matmul_problem(m, n, k)
    c = Output(m * n)
    run(a, b, junk_values(seed), c)
    failures = c.guards("C")
    body = compare(expected, c.values, seed, "tolerance rel 3e-05 abs 0", cols=n)
    if body:
        expr = "AllNear(p.expected, run_matmul(matmul, p, d), kMatmulTol, p.seed, Shape2D{...})"
        failures.append(value_of(f"{MATMUL_AT}:279", expr, body,
                                 f"C is {m} x {n} with k = {k} (A is m x k, B is k x n, all row-major)"))
    return failures


def matmul_case(test: str, m: int, n: int, k: int, run: Kernel) -> tuple[str, list[str]]:
    return f"MatmulCorrectness.{test}/m{m}_n{n}_k{k}", matmul_failures(test, m, n, k, run)


def naive(m: int, n: int, k: int, grid_swapped: bool = False, a_stride: str = "k", b_stride: str = "n",
          k_loop_le: bool = False):
    def run(a: list[float], b: list[float], junk: Callable[[], float], c: Output) -> None:
        def at(v: list[float], i: int) -> float:
            return v[i] if i < len(v) else junk()
        gx, gy = (ceil_div(m, 32), ceil_div(n, 8)) if grid_swapped else (ceil_div(n, 32), ceil_div(m, 8))
        lda, ldb = (n if a_stride == "n" else k), (k if b_stride == "k" else n)
        for row in range(min(m, 8 * gy)):
            for col in range(min(n, 32 * gx)):
                c.store(row * n + col, f32(sum(at(a, row * lda + i) * at(b, i * ldb + col)
                                               for i in range(k + 1 if k_loop_le else k))))
    return run


def tiled(m: int, n: int, k: int, zero_fill: bool = True, k_tail: bool = True, b_transposed: bool = False,
          early_return: bool = False, tile: float = SCRIBBLE):
    """matmul_tiled_kernel per block: 32 x 32 tiles of A and B in shared memory, phase by phase; a slot no
    thread stores in a phase keeps what it held (the scribble, or the previous phase's value)."""
    def run(a: list[float], b: list[float], junk: Callable[[], float], c: Output) -> None:
        phases = ceil_div(k, 32) if k_tail else k // 32
        for by in range(ceil_div(m, 32)):
            for bx in range(ceil_div(n, 32)):
                a_s = [[tile] * 32 for _ in range(32)]
                b_s = [[tile] * 32 for _ in range(32)]
                acc = [[0.0] * 32 for _ in range(32)]
                for p in range(phases):
                    k0 = 32 * p
                    for ty in range(32):
                        for tx in range(32):
                            row, col = by * 32 + ty, bx * 32 + tx
                            if early_return and (row >= m or col >= n):
                                continue
                            if row < m and k0 + tx < k:
                                a_s[ty][tx] = a[row * k + k0 + tx]
                            elif zero_fill:
                                a_s[ty][tx] = 0.0
                            if k0 + ty < k and col < n:
                                b_s[ty][tx] = b[(k0 + ty) * n + col]
                            elif zero_fill:
                                b_s[ty][tx] = 0.0
                    for ty in range(32):
                        for tx in range(32):
                            b_col = b_s[tx] if b_transposed else [b_s[i][tx] for i in range(32)]
                            acc[ty][tx] += sum(a_s[ty][i] * b_col[i] for i in range(32))
                for ty in range(32):
                    for tx in range(32):
                        if by * 32 + ty < m and bx * 32 + tx < n:
                            c.store((by * 32 + ty) * n + bx * 32 + tx, f32(acc[ty][tx]))
    return run


def test_05_simulated_matmuls_are_right_without_their_bugs() -> None:
    for m, n, k in ((17, 33, 65), (1, 1, 1), (33, 31, 32)):
        assert matmul_failures("Naive", m, n, k, naive(m, n, k)) == []
        assert matmul_failures("Tiled", m, n, k, tiled(m, n, k)) == []


def test_05_naive_matmul_grid_sized_the_other_way_round() -> None:
    """mnaive-grid-swapped: x from m, y from n."""
    graded = grade(MATMUL, [matmul_case("Naive", m, n, k, naive(m, n, k, grid_swapped=True))
                            for m, n, k in ((1, 1, 1), (17, 33, 65), (33, 31, 32))])
    assert graded["MatmulCorrectness.Naive/m1_n1_k1"].status is Status.PASSED
    for name in ("MatmulCorrectness.Naive/m17_n33_k65", "MatmulCorrectness.Naive/m33_n31_k32"):
        t = graded[name]
        assert "actual -nan" in t.message and t.task == "matmul-naive"
        assert "Sized from m in x and n in y, it covers C only when m == n" in t.hint


@pytest.mark.parametrize("m, n, k, bug", [(17, 33, 65, {"k_loop_le": True}), (33, 31, 32, {"b_stride": "k"})])
def test_05_naive_matmul_reads_past_a_or_b(m: int, n: int, k: int, bug: dict) -> None:
    """mnaive-k-loop-le, mnaive-b-stride-k: products with the guard zones' junk."""
    t = one(MATMUL, *matmul_case("Naive", m, n, k, naive(m, n, k, **bug)))
    assert "Elements of C of 1e10 and more are products with junk" in t.hint


def test_05_naive_matmul_every_element_off() -> None:
    """B stepped with rows of k floats where n = k + 1 stays inside B: every element wrong, no junk."""
    m, n, k = 40, 33, 32
    t = one(MATMUL, *matmul_case("Naive", m, n, k, naive(m, n, k, b_stride="k")))
    assert f"{m * n} of {m * n} elements differ" in t.message
    assert "Every element of C is wrong, so look at what they all share, the sum" in t.hint


def test_05_naive_matmul_rows_of_a_with_the_wrong_stride() -> None:
    """mnaive-a-stride-n: row 0 of A starts at 0 with any stride."""
    t = one(MATMUL, *matmul_case("Naive", 17, 33, 65, naive(17, 33, 65, a_stride="n")))
    assert "[row 1, col 0]" in t.message
    assert "Row 0 of C is right and the rows below it are not: a row stride is off" in t.hint


def test_05_tiled_matmul_grid_that_misses_tiles() -> None:
    """A tiled grid sized like the naive one's swapped: tiles of C nobody computes."""
    def run(a, b, junk, c):
        full = Output(17 * 65)
        tiled(17, 65, 33)(a, b, junk, full)
        for i, v in enumerate(full.values):
            if i % 65 < 32:
                c.store(i, v)
    t = one(MATMUL, "MatmulCorrectness.Tiled/m17_n65_k33", matmul_failures("Tiled", 17, 65, 33, run))
    assert "one block per 32 x 32 tile of C, ceil_div(n, kMatTile) blocks in x" in t.hint


@pytest.mark.parametrize("bug", [{"zero_fill": False}, {"early_return": True}])
def test_05_tiled_matmul_multiplies_unstored_slots(bug: dict) -> None:
    """mtiled-no-zero-fill, mtiled-early-return: k = 7 is one partial phase, so the slots past k (or those of
    the threads that returned) still hold the scribble."""
    t = one(MATMUL, *matmul_case("Tiled", 40, 33, 7, tiled(40, 33, 7, **bug)))
    assert re.search(r"actual -?\d\.\d+e\+\d\d", t.message) and t.task == "matmul-tiled"
    assert "0.0f where its global index lies outside A or B, and no thread returns early" in t.hint


@pytest.mark.parametrize("bug", [{"k_tail": False}, {"b_transposed": True}, {"zero_fill": False}])
def test_05_tiled_matmul_phase_loop(bug: dict) -> None:
    """mtiled-drops-k-tail, mtiled-b-tile-transposed; and no zero-fill where the last phase multiplies the
    previous phase's stale tiles: every element off, none of them junk."""
    m, n, k = 17, 33, 65
    t = one(MATMUL, *matmul_case("Tiled", m, n, k, tiled(m, n, k, **bug)))
    assert f"{m * n} of {m * n} elements differ" in t.message and "e+1" not in t.message
    assert "look at what they all share, the phase loop: ceil_div(k, kMatTile) phases" in t.hint


def exact_race(m: int, n: int, k: int) -> list[str]:
    """MatmulExactCorrectness: integer inputs, and a race that moved a few products in scattered places."""
    seed = M_SEED + 1000003 * m + 1009 * n + k + 17
    rng = random.Random(seed)
    expected = [float(rng.randint(-60, 60)) for _ in range(m * n)]
    actual = list(expected)
    for i in sorted(rng.sample(range(m * n), 37)):
        actual[i] += rng.choice([-12.0, -6.0, -3.0, 2.0, 4.0, 8.0])
    expr = "AllEqual(p.expected, run_matmul(matmul, p, d), p.seed, Shape2D{...})"
    streamed = ("integer inputs, so the result must be exact; a few scattered wrong elements that change "
                "from run to run point to a race: is the tile overwritten while other warps still read it?")
    return [value_of(f"{MATMUL_AT}:286", expr, compare(expected, actual, seed, cols=n), streamed)]


def test_05_tiled_matmul_race_in_the_exact_tests() -> None:
    """mtiled-no-second-sync: the float tests pass within their tolerance, the exact ones do not."""
    graded = grade(MATMUL, [("MatmulExactCorrectness.Tiled/m640_n512_k4096", exact_race(640, 512, 4096)),
                            ("MatmulCorrectness.Tiled/m1000_n1000_k1000", [])])
    t = graded["MatmulExactCorrectness.Tiled/m640_n512_k4096"]
    assert "Every phase needs two barriers" in t.hint and "racecheck" in t.hint


def exact_systematic(m: int, n: int, k: int) -> list[str]:
    """MatmulExactCorrectness with the B tile transposed: nearly every element wrong, on every run."""
    seed = M_SEED + 1000003 * m + 1009 * n + k + 17
    rng = random.Random(seed)
    expected = [float(rng.randint(-60, 60)) for _ in range(m * n)]
    actual = [e + (7.0 if i % 77 else 0.0) for i, e in enumerate(expected)]
    expr = "AllEqual(p.expected, run_matmul(matmul, p, d), p.seed, Shape2D{...})"
    return [value_of(f"{MATMUL_AT}:286", expr, compare(expected, actual, seed, cols=n))]


def test_05_tiled_matmul_systematic_error_in_the_exact_tests_is_no_race() -> None:
    """mtiled-b-tile-transposed on an H200: 76,980 of 78,000 exact elements wrong got the barrier advice."""
    graded = grade(MATMUL, [("MatmulExactCorrectness.Tiled/m300_n260_k12", exact_systematic(300, 260, 12))])
    t = graded["MatmulExactCorrectness.Tiled/m300_n260_k12"]
    assert "systematic, not a race" in t.hint and "Every phase needs two barriers" not in t.hint


def test_05_tiled_matmul_race_under_racecheck() -> None:
    log = race_log(f"matmul_tiled_kernel{MATMUL_ARGS}", "05-tiled-matmul/matmul.cu:101",
                   "05-tiled-matmul/matmul.cu:106")
    t = sanitized(MATMUL, "racecheck", log)
    assert t.task == "matmul-tiled" and "a phase needs a __syncthreads() after storing the tiles" in t.hint


def test_05_tiled_matmul_barrier_not_reached() -> None:
    """mtiled-early-return under synccheck."""
    t = sanitized(MATMUL, "synccheck", synccheck_log(f"matmul_tiled_kernel{MATMUL_ARGS}",
                                                     "05-tiled-matmul/matmul.cu:103"))
    assert t.task == "matmul-tiled" and "threads whose element lies outside C must not return early" in t.hint
    assert "__syncthreads() must not sit inside a branch" not in t.hint


def test_05_tiled_matmul_load_faults_past_b() -> None:
    """mtiled-guard-tile-index at m = 1, n = 300, k = 70: rows 70..95 of B lie past its guard zone."""
    t = one(MATMUL, "MatmulCorrectness.Tiled/m1_n300_k70", [cuda_error(
        "cudaErrorIllegalAddress", "an illegal memory access was encountered", "cudaDeviceSynchronize()",
        GUARDED_AT)])
    assert t.category is Category.CUDA_ERROR and t.task == "matmul-tiled"
    assert "guard the k index of each load with its global value" in t.hint


def test_05_tiled_matmul_without_shared_tiles() -> None:
    graded = grade(MATMUL, [], missing=["ld.shared in its PTX", "st.shared in its PTX",
                                        "matmul_tiled_kernel waits at"])
    for name in ("Techniques.matmul-tiled", "Techniques.matmul-tiled/2", "Techniques.matmul-tiled/3"):
        assert "the reuse of each loaded element kMatTile times is the point of the task" in graded[name].hint


# --- challenge ---

def test_05_fast_vector_path_on_misaligned_rows() -> None:
    """fast-vec-ignores-n-mod-4: float4 on rows of 33 floats."""
    t = one(MATMUL, "MatmulCorrectness.Fast/m17_n33_k65", [cuda_error(
        "cudaErrorMisalignedAddress", "misaligned address", "cudaDeviceSynchronize()", GUARDED_AT)])
    assert t.task == "fast" and "rows of B and C start that aligned only when n is a multiple of 4" in t.hint


def test_05_fast_reads_a_slice_before_its_copies_land() -> None:
    """fast-prologue-skips-empty-commits: for k <= 16 the first wait does not wait for slice 0, which still
    holds the scribble."""
    t = one(MATMUL, *matmul_case("Fast", 40, 33, 7, tiled(40, 33, 7, zero_fill=False)))
    assert t.task == "fast" and "commit a group at every step even when it copies nothing" in t.hint


def test_05_fast_slices_counted_down() -> None:
    """fast-tiles-floor: C = 0 for k < 16, the last products lost above."""
    def zeros(a: list[float], b: list[float], junk: Callable[[], float], c: Output) -> None:
        for i in range(40 * 33):
            c.store(i, 0.0)
    graded = grade(MATMUL, [matmul_case("Fast", 40, 33, 7, zeros),
                            matmul_case("Fast", 17, 33, 65, tiled(17, 33, 65, k_tail=False))])
    for t in graded.values():
        assert "count the k-slices with a division rounded up" in t.hint


def test_05_fast_store_of_a_quad_past_the_row() -> None:
    """fast-scalar-store-guard-quad: values right, three floats past the end of C's last row."""
    t = one(MATMUL, "MatmulCorrectness.Fast/m17_n33_k65", [guard_failure("C", 561, 0, 12)])
    assert "guard each of the four columns on its own" in t.hint
    assert "i < n, not i <= n" not in t.hint


def test_05_fast_pipeline_race() -> None:
    t = sanitized(MATMUL, "racecheck", race_log(
        "void fast::matmul_fast_kernel<true>(const float *, const float *, float *, int, int, int)",
        "05-tiled-matmul/matmul.cu:236", "05-tiled-matmul/matmul.cu:251"))
    assert t.task == "fast"
    assert "the one __syncthreads() per slice must come after the wait for slice t" in t.hint


# --- lab 05: hints that must stay away ---

def test_05_hints_stay_in_their_task_and_pattern() -> None:
    # The same lost tiles in the naive transpose get the naive grid hint, not the tiled kernel's placement.
    naive_t = transposes("Naive", grid_swapped=True)["TransposeCorrectness.Naive/r31_c33"]
    assert "blockIdx.x * kTile" not in naive_t.hint
    # A naive matmul's junk hint is not the tiled kernel's zero-fill advice.
    junk = one(MATMUL, *matmul_case("Naive", 17, 33, 65, naive(17, 33, 65, k_loop_le=True)))
    assert "0.0f where its global index" not in junk.hint
    # The exact tests' race hint needs scattered errors: a tiled matmul off everywhere gets the phase loop.
    everywhere = one(MATMUL, *matmul_case("Tiled", 17, 33, 65, tiled(17, 33, 65, k_tail=False)))
    assert "two barriers" not in everywhere.hint
    # A race in the naive transpose kernel is not possible; a race elsewhere names its own kernel's task.
    race = sanitized(MATMUL, "racecheck", race_log(f"matmul_tiled_kernel{MATMUL_ARGS}",
                                                   "05-tiled-matmul/matmul.cu:101",
                                                   "05-tiled-matmul/matmul.cu:106"))
    assert "A warp read the tile while another warp" not in race.hint
    # The tile-contents hint wants element (0, 0) right: the naive transpose's stride bug does not get it.
    stride = transposes("Naive", out_stride_cols=True)["TransposeCorrectness.Naive/r31_c33"]
    assert "contents are copied as they are" not in stride.hint



# =====================================================================================================
# Lab 06: reduce. Each step's kernels are simulated block by block (steps 1-4 through the given driver,
# reduce_in_passes), on the test's inputs, at the sizes a run without the two large ones reports.
# =====================================================================================================

R_SEED = 6006
REDUCE_AT = "/home/s/labs/06-reduce/test_reduce.cu"
SIZES = (1, 31, 32, 33, 255, 256, 257, 50001)
STEP_TASK = {"Interleaved": "interleaved", "Sequential": "sequential", "FirstAdd": "first-add",
             "Shuffle": "shuffle", "SinglePass": "single-pass"}
INT_ARGS = "(const int *, int *, unsigned long)"
FLOAT_ARGS = "(const float *, float *, unsigned long)"
Block = Callable[[list, int, int, bool], float | int]  # (values, block index, count, ints?) -> the partial


def wrap32(v: int) -> int:
    return (v + 2**31) % 2**32 - 2**31


def int_input(n: int) -> list[int]:
    rng = random.Random(R_SEED + 2 * n + 1)
    return [rng.randint(1, 100) for _ in range(n)]


def float_input(n: int) -> list[float]:
    """Values in [1, 2), the last three scaled up by 1 + n / 128 (test_reduce.cu's float_input)."""
    rng = random.Random(R_SEED + n)
    values = [f32(rng.uniform(1.0, 2.0)) for _ in range(n)]
    boost = f32(1.0 + n / 128.0)
    for i in range(max(0, n - 3), n):
        values[i] = f32(values[i] * boost)
    return values


def relative_tolerance(n: int) -> float:
    d = math.ceil(math.log2(n)) + 64.0
    u = 2.0**-24
    return d * u / (1.0 - d * u)


def sum_failure(n: int, values: list, actual: float | int) -> list[str]:
    """ReduceCorrectness's check_int (exact, "off by") or check_float (a tolerance) on one sum."""
    expected = sum(values)
    if isinstance(actual, int):
        body = compare([expected], [actual], R_SEED + 2 * n + 1)
        expr = "cudalab::AllEqual(std::vector<std::int64_t>{expected}, std::vector<int>{actual}, seed)"
        streamed = f"int sum of n = {n} values in [1, 100] must be exact; off by {actual - expected}"
        return [value_of(f"{REDUCE_AT}:115", expr, body, streamed)] if body else []
    body = compare([float(expected)], [actual], R_SEED + n, f"tolerance rel {relative_tolerance(n):g} abs 0")
    expr = "cudalab::Near(reference_sum(h_in), actual, {relative_tolerance(n), 0.0}, seed)"
    streamed = f"float sum of n = {n} values in [1, 2) (the last three scaled up)"
    return [value_of(f"{REDUCE_AT}:105", expr, body, streamed)] if body else []


def finish(total: float | int, is_int: bool) -> float | int:
    return wrap32(int(total)) if is_int else f32(total)


def in_passes(values: list, block: Block, per_block: int, is_int: bool) -> float | int:
    """reduce_in_passes: the kernel over the values, then over its partials, until one block is enough."""
    src, count = values, len(values)
    while True:
        blocks = ceil_div(count, per_block)
        dst = [finish(block(src, b, count, is_int), is_int) for b in range(blocks)]
        if blocks == 1:
            return dst[0]
        src, count = dst, blocks


def shared_junk(is_int: bool) -> float | int:
    return SCRIBBLE_INT if is_int else SCRIBBLE


def tree(s: list, strides, pick: Callable[[int, int], bool]) -> float | int:
    """Steps of a shared-memory tree, a barrier after each. Within a step each warp reads, then writes, and
    the warps run from the last to the first: a slot another warp adds into in the same step is read with
    its new value, as a race lets happen (the right trees never read such a slot)."""
    for stride in strides:
        for w in reversed(range(len(s) // 32)):
            lanes = range(32 * w, 32 * w + 32)
            s[32 * w:32 * w + 32] = [s[t] + s[t + stride] if pick(t, stride) and t + stride < len(s) else s[t]
                                     for t in lanes]
    return s[0]


HALVING = (128, 64, 32, 16, 8, 4, 2, 1)


def interleaved(zero_tail: bool = True, pick: Callable[[int, int], bool] = lambda t, s: t % (2 * s) == 0,
                strides=(1, 2, 4, 8, 16, 32, 64, 128)) -> Block:
    def block(src: list, b: int, count: int, is_int: bool):
        tail = 0 if zero_tail else shared_junk(is_int)
        return tree([src[b * 256 + t] if b * 256 + t < count else tail for t in range(256)], strides, pick)
    return block


def sequential(strides=HALVING, zero_tail: bool = True) -> Block:
    def block(src: list, b: int, count: int, is_int: bool):
        tail = 0 if zero_tail else shared_junk(is_int)
        s = [src[b * 256 + t] if b * 256 + t < count else tail for t in range(256)]
        return tree(s, strides, lambda t, stride: t < stride)
    return block


def first_add(block_start: int = 512, second_guard: bool = True,
              junk: Callable[[], float | int] | None = None) -> Block:
    def block(src: list, b: int, count: int, is_int: bool):
        s = []
        for t in range(256):
            i = b * block_start + t
            v = src[i] if i < count else 0
            if i + 256 < count:
                v += src[i + 256]
            elif not second_guard and junk:
                v += junk()  # the input's guard zone
            s.append(v)
        return tree(s, HALVING, lambda t, stride: t < stride)
    return block


def warp_reduce(lanes: list, offsets=(16, 8, 4, 2, 1)):
    """__shfl_down_sync: lane l adds lane l + offset's value (its own when that lane does not exist)."""
    for off in offsets:
        lanes = [lanes[lane] + (lanes[lane + off] if lane + off < 32 else lanes[lane]) for lane in range(32)]
    return lanes[0]


def shuffle(offsets=(16, 8, 4, 2, 1), lane_guard: bool = True, every_lane0_writes: bool = False) -> Block:
    def block(src: list, b: int, count: int, is_int: bool):
        v = []
        for t in range(256):
            i = b * 512 + t
            v.append((src[i] if i < count else 0) + (src[i + 256] if i + 256 < count else 0))
        sums = [warp_reduce(v[32 * w:32 * w + 32], offsets) for w in range(8)]
        if every_lane0_writes:
            return sums[7]  # lane 0 of the last warp wrote out[blockIdx.x] last
        return warp_reduce(sums + [0 if lane_guard else shared_junk(is_int)] * 24, offsets)
    return block


def single_pass(values: list, is_int: bool, tail: str = "right", stride_one_block: bool = False,
                never_written: bool = False) -> float | int:
    """reduce_single_pass's sum: one grid of min(1056, the blocks the vectors need) blocks of 256 threads."""
    if never_written:
        return POISON_INT if is_int else POISON
    n = len(values)
    n4 = n // 4
    blocks = max(1, min(132 * 8, ceil_div(n4, 256)))
    vec = [sum(values[4 * i:4 * i + 4]) for i in range(n4)]
    total = sum(sum(vec[b * 256:]) for b in range(blocks)) if stride_one_block else sum(vec)
    if tail == "right":
        total += sum(values[4 * n4:])
    elif tail == "index":
        total += sum(values[n4 + t] for t in range(n % 4))
    return finish(total, is_int)


Run = Callable[[list, bool], float | int]


def reduce_tests(step: str, run: Run, sizes=SIZES, types=("", "Int")) -> list[tuple[str, list[str]]]:
    """ReduceCorrectness.<step>[Int]/<n> for each size: run(values, is_int) is the function's sum."""
    tests = []
    for kind in types:
        for n in sizes:
            values = int_input(n) if kind else float_input(n)
            failures = sum_failure(n, values, run(values, bool(kind)))
            tests.append((f"ReduceCorrectness.{step}{kind}/{n}", failures))
    return tests


def passes_of(block: Block, per_block: int = 256) -> Run:
    return lambda values, is_int: in_passes(values, block, per_block, is_int)


def single_pass_with(**bug) -> Run:
    return lambda values, is_int: single_pass(values, is_int, **bug)


def test_06_simulated_steps_are_right_without_their_bugs() -> None:
    for step, run in (("Interleaved", passes_of(interleaved())), ("Sequential", passes_of(sequential())),
                      ("FirstAdd", passes_of(first_add(), 512)), ("Shuffle", passes_of(shuffle(), 512)),
                      ("SinglePass", single_pass)):
        assert all(not failures for _, failures in reduce_tests(step, run)), step


# --- step 1: interleaved ---

def test_06_interleaved_race() -> None:
    """interleaved-no-sync-after-load."""
    t = sanitized(REDUCE, "racecheck", race_log(f"void reduce_interleaved_kernel<int>{INT_ARGS}",
                                                "06-reduce/reduce.cu:67", "06-reduce/reduce.cu:70"))
    assert t.task == "interleaved"
    assert "needs a __syncthreads() after the load and one after every step" in t.hint


def test_06_interleaved_reads_past_s_data() -> None:
    """interleaved-mod-stride: at stride 1 thread 255 adds s_data[256]."""
    t = sanitized(REDUCE, "memcheck", memcheck_log("Invalid __shared__ read of size 4 bytes",
                                                   f"void reduce_interleaved_kernel<int>{INT_ARGS}",
                                                   "06-reduce/reduce.cu:70"))
    assert t.task == "interleaved" and "s_data[tid + stride] with tid + stride >= kBlock" in t.hint


def test_06_interleaved_tail_not_zeroed() -> None:
    """interleaved-tail-not-zeroed: slots past count keep the scribble; only n = 256 fills every slot."""
    graded = grade(REDUCE, reduce_tests("Interleaved", passes_of(interleaved(zero_tail=False))))
    assert graded["ReduceCorrectness.InterleavedInt/256"].status is Status.PASSED
    for name in ("ReduceCorrectness.InterleavedInt/31", "ReduceCorrectness.InterleavedInt/257",
                 "ReduceCorrectness.Interleaved/1", "ReduceCorrectness.Interleaved/50001"):
        t = graded[name]
        assert t.task == "interleaved", name
        assert "The sum picked up junk: a slot of s_data that no thread stored" in t.hint, name


def test_06_interleaved_adds_slots_twice() -> None:
    """interleaved-mod-stride (kept inside the block): tid % stride picks threads whose slots were added."""
    graded = grade(REDUCE, reduce_tests("Interleaved", passes_of(interleaved(pick=lambda t, s: t % s == 0))))
    assert graded["ReduceCorrectness.InterleavedInt/33"].status is Status.PASSED  # one warp, in step
    t = graded["ReduceCorrectness.InterleavedInt/257"]
    assert "off by " in t.message and "off by -" not in t.message
    assert "only the threads whose index is a multiple of 2 * s may add" in t.hint


def test_06_interleaved_tree_a_step_short() -> None:
    """The stride loop stops before kBlock / 2: the second half of every full block is lost."""
    short = interleaved(strides=(1, 2, 4, 8, 16, 32, 64))
    graded = grade(REDUCE, reduce_tests("Interleaved", passes_of(short)))
    assert graded["ReduceCorrectness.InterleavedInt/33"].status is Status.PASSED
    t = graded["ReduceCorrectness.InterleavedInt/257"]
    assert "off by -" in t.message and "the tree must run every stride 1, 2, 4, ..., kBlock / 2" in t.hint


def test_06_interleaved_float_test_points_to_the_int_one() -> None:
    graded = grade(REDUCE, reduce_tests("Interleaved", passes_of(interleaved(pick=lambda t, s: t % s == 0))))
    t = graded["ReduceCorrectness.Interleaved/257"]
    assert "the int test of the same size (ReduceCorrectness.InterleavedInt) is exact" in t.hint
    assert "Every element is wrong (often still the poison value)" not in t.hint


# --- step 2: sequential ---

def test_06_sequential_barrier_inside_the_if() -> None:
    """sequential-sync-inside-if."""
    t = sanitized(REDUCE, "synccheck", synccheck_log(f"void reduce_sequential_kernel<int>{INT_ARGS}",
                                                     "06-reduce/reduce.cu:101"))
    assert t.task == "sequential" and "put the barrier after the if" in t.hint
    assert "__syncthreads() must not sit inside a branch" not in t.hint


def test_06_sequential_race() -> None:
    t = sanitized(REDUCE, "racecheck", race_log(f"void reduce_sequential_kernel<float>{FLOAT_ARGS}",
                                                "06-reduce/reduce.cu:97", "06-reduce/reduce.cu:100"))
    assert t.task == "sequential" and "outside the if (tid < stride)" in t.hint


def test_06_sequential_tail_not_zeroed() -> None:
    graded = grade(REDUCE, reduce_tests("Sequential", passes_of(sequential(zero_tail=False)), sizes=(33,)))
    assert "before the first step reads it" in graded["ReduceCorrectness.SequentialInt/33"].hint


def test_06_sequential_stops_at_stride_two() -> None:
    """sequential-stops-at-stride-2: every block's partial misses s_data[1]."""
    graded = grade(REDUCE, reduce_tests("Sequential", passes_of(sequential(strides=HALVING[:-1]))))
    assert graded["ReduceCorrectness.SequentialInt/1"].status is Status.PASSED
    for n in (31, 256, 50001):
        t = graded[f"ReduceCorrectness.SequentialInt/{n}"]
        assert "off by -" in t.message and "check that the loop's condition lets the stride reach 1" in t.hint
    assert "ReduceCorrectness.SequentialInt" in graded["ReduceCorrectness.Sequential/256"].hint


def huge_failure() -> list[str]:
    expr = "cudalab::AllEqual(std::vector<long long>{expected}, d_out.to_host(), kSeed)"
    return [value_of(f"{REDUCE_AT}:269", expr, compare([-1048576], [-3145728], R_SEED),
                     "int sum of n = 2^32 + 2^20 + 3 values: are indices and counts std::size_t all the way "
                     "(blockIdx.x * blockDim.x is 32-bit unless cast first)?")]


@pytest.mark.parametrize("step, words", [
    ("Sequential", "runs more than 2^24 blocks of 256, so blockIdx.x * kBlock"),
    ("FirstAdd", "a block's start, 2 * kBlock * blockIdx.x, no longer fits in 32 bits"),
    ("SinglePass", "n / 4 (over 2^30 vectors), the grid-stride index and its stride"),
])
def test_06_indices_in_32_bits(step: str, words: str) -> None:
    """sequential-index-32bit, and its kin in steps 3 and 5: only the 2^32 + 2^20 + 3 values go wrong."""
    t = one(REDUCE, f"ReduceHugeCorrectness.{step}", huge_failure())
    assert t.task == STEP_TASK[step] and words in t.hint


# --- step 3: first add ---

def grid_failure(n: int, per_block: int, empty: int, needed: int) -> list[str]:
    return [equal(f"{REDUCE_AT}:213", "empty", str(empty), "0u", "0",
                  f"{empty} block(s) wrote a partial sum of 0: they had no values to add. With {per_block} "
                  f"values per block, n = {n} needs {needed} block(s) in all passes together; is the grid "
                  "sized for the values one block covers?")]


@pytest.mark.parametrize("step", ["FirstAdd", "Shuffle"])
def test_06_grid_sized_for_one_value_per_thread(step: str) -> None:
    """first-add-impl-kblock-per-block: 196 blocks for 50001 values, 98 of them past the data (the sums
    stay right)."""
    t = one(REDUCE, f"ReduceGridCorrectness.{step}/50001", grid_failure(50001, 512, 98, 99))
    assert t.task == STEP_TASK[step]
    assert "Blocks with nothing to add mean the grid is sized for fewer values" in t.hint


def test_06_first_add_second_load_unguarded() -> None:
    """first-add-second-load-unguarded: in[i + kBlock] is read past the end, into the input's guard zone."""
    rng = random.Random(R_SEED)  # the guard zone's bytes, read as ints
    unguarded = first_add(second_guard=False, junk=lambda: wrap32(rng.getrandbits(32)))
    graded = grade(REDUCE, reduce_tests("FirstAdd", passes_of(unguarded, 512), sizes=(1, 31, 257),
                                        types=("Int",)))
    for n in (1, 31, 257):
        t = graded[f"ReduceCorrectness.FirstAddInt/{n}"]
        assert "each of a thread's two loads needs its own bound check" in t.hint, t.message


def test_06_first_add_second_load_unguarded_floats() -> None:
    # Guard bytes read as floats: about 6e21, then two tiny ones.
    guard = iter([from_bits(0x63A5C2F1), from_bits(0x1F3D9A07), from_bits(0xA2B4C6D8)] * 100)
    unguarded = first_add(second_guard=False, junk=lambda: next(guard))
    t = grade(REDUCE, reduce_tests("FirstAdd", passes_of(unguarded, 512), sizes=(31,),
                                   types=("",)))["ReduceCorrectness.FirstAdd/31"]
    assert re.search(r"actual \d\.\d+e\+\d\d", t.message)
    assert "each of a thread's two loads needs its own bound check" in t.hint


def test_06_first_add_blocks_that_overlap() -> None:
    """first-add-block-offset: block b starts at b * kBlock, so neighbours overlap, the end is never read."""
    graded = grade(REDUCE, reduce_tests("FirstAdd", passes_of(first_add(block_start=256), 512)))
    assert graded["ReduceCorrectness.FirstAddInt/257"].status is Status.PASSED
    t = graded["ReduceCorrectness.FirstAddInt/50001"]
    assert "off by -" not in t.message
    assert "as when neighbouring blocks overlap: a block now covers 2 * kBlock values" in t.hint
    assert "ReduceCorrectness.FirstAddInt" in graded["ReduceCorrectness.FirstAdd/50001"].hint


# --- step 4: shuffle ---

def test_06_shuffle_without_shuffles() -> None:
    t = grade(REDUCE, [], missing=["__shfl_down_sync"])["Techniques.shuffle"]
    assert "the old unrolled last warp on a volatile shared array is a data race" in t.hint


def test_06_shuffle_race_on_the_warp_sums() -> None:
    """shuffle-no-sync-in-block-reduce: block_reduce_sum is inlined into the kernel racecheck names."""
    t = sanitized(REDUCE, "racecheck", race_log(f"void reduce_shuffle_kernel<int>{INT_ARGS}",
                                                "06-reduce/reduce.cu:174", "06-reduce/reduce.cu:177"))
    assert t.task == "shuffle"
    assert "warp 0 reads the s_warp_sums that lane 0 of the other warps stores" in t.hint


def test_06_shuffle_lanes_past_the_warp_sums() -> None:
    """shuffle-warp0-no-lane-guard: lanes 8-31 of warp 0 read past s_warp_sums (memcheck) and add junk."""
    t = sanitized(REDUCE, "memcheck", memcheck_log("Invalid __shared__ read of size 4 bytes",
                                                   f"void reduce_shuffle_kernel<float>{FLOAT_ARGS}",
                                                   "06-reduce/reduce.cu:177"))
    assert t.task == "shuffle" and "warp 0's lanes from kWarpsPerBlock on have no warp sum to read" in t.hint
    graded = grade(REDUCE, reduce_tests("Shuffle", passes_of(shuffle(lane_guard=False), 512),
                                        sizes=(1, 33, 257)))
    for name in ("ReduceCorrectness.ShuffleInt/33", "ReduceCorrectness.Shuffle/1"):
        assert "only the first kWarpsPerBlock lanes of warp 0 have a warp sum to read" in graded[name].hint


@pytest.mark.parametrize("bug", [{"offsets": (8, 4, 2, 1)}, {"every_lane0_writes": True}])
def test_06_shuffle_loses_values(bug: dict) -> None:
    """shuffle-offsets-from-8 (lanes 16-31 of every warp lost), shuffle-every-lane0-writes (the last warp's
    share wins)."""
    graded = grade(REDUCE, reduce_tests("Shuffle", passes_of(shuffle(**bug), 512)))
    t = graded["ReduceCorrectness.ShuffleInt/257"]
    assert "off by -" in t.message
    assert "warp_reduce_sum must start at offset 16, half a warp" in t.hint
    assert "ReduceCorrectness.ShuffleInt" in graded["ReduceCorrectness.Shuffle/257"].hint


# --- step 5: single pass ---

def calls_in_turn(n: int) -> list[str]:
    """ReduceSinglePassCorrectness.ResetsTheCounterForTheNextCall with the counter never reset: call 1 is
    right and leaves the counter at its grid size; no block of call 2 or 3 draws the last ticket."""
    failures = []
    grid = ceil_div(n // 4, 256)
    for call in range(3):
        seed = R_SEED + 100 + call
        if call:
            values = [random.Random(seed).randint(1, 100) for _ in range(n)]
            expr = "cudalab::AllEqual(std::vector<std::int64_t>{expected}, d_out.to_host(), seed)"
            failures.append(value_of(f"{REDUCE_AT}:159", expr, compare([sum(values)], [POISON_INT], seed),
                                     f"call {call + 1} of 3 on the same workspace, n = {n}"))
        failures.append(equal(f"{REDUCE_AT}:163", "counter", str(grid * (call + 1)), "0u", "0",
                              f"after call {call + 1} (n = {n}), the counter is not back at zero: the last "
                              "block must reset it"))
    return failures


def test_06_single_pass_counter_not_reset() -> None:
    """single-pass-counter-not-reset: every single call passes, calls in turn do not."""
    calls = "ReduceSinglePassCorrectness.ResetsTheCounterForTheNextCall"
    graded = grade(REDUCE, reduce_tests("SinglePass", single_pass) + [(calls, calls_in_turn(50001))])
    assert graded[calls].task == "single-pass" and "Let exactly one block set it back" in graded[calls].hint
    assert graded["ReduceCorrectness.SinglePassInt/50001"].status is Status.PASSED


def test_06_single_pass_that_no_block_finishes() -> None:
    """single-pass-last-ticket-off-by-one: the last block waits for ticket gridDim.x, which nobody draws."""
    graded = grade(REDUCE, reduce_tests("SinglePass", single_pass_with(never_written=True)))
    for name in ("ReduceCorrectness.SinglePassInt/1", "ReduceCorrectness.SinglePass/50001"):
        t = graded[name]
        assert "*d_out was never written, so no block took itself for the last" in t.hint, name
        assert "The float sum is off" not in t.hint


def test_06_single_pass_reads_past_the_input() -> None:
    """single-pass-unroll-bound: memcheck, and junk in the sum where the loads past the end found some."""
    kernel = "void reduce_single_pass_kernel<int>(const int *, int *, unsigned long, int *, unsigned int *)"
    t = sanitized(REDUCE, "memcheck", memcheck_log("Invalid __global__ read of size 16 bytes", kernel,
                                                   "06-reduce/reduce.cu:265"))
    assert t.task == "single-pass" and "test the round's last vector, not its first" in t.hint
    values = int_input(257)
    junked = one(REDUCE, "ReduceCorrectness.SinglePassInt/257",
                 sum_failure(257, values, wrap32(sum(values) + 3 * 1938238411)))
    assert "in the unrolled loop, all kUnroll vectors of a round must lie below n / 4" in junked.hint


@pytest.mark.parametrize("tail", ["missing", "index"])
def test_06_single_pass_last_values(tail: str) -> None:
    """single-pass-no-tail: the sizes that fail are those with n % 4 != 0. single-pass-tail-index: n = 1
    reads in[0] either way, so the sizes show no pattern, and the int tests are off by a few values."""
    graded = grade(REDUCE, reduce_tests("SinglePass", single_pass_with(tail=tail)))
    for n in (32, 256):
        assert graded[f"ReduceCorrectness.SinglePassInt/{n}"].status is Status.PASSED
    if tail == "missing":
        for name in ("ReduceCorrectness.SinglePassInt/1", "ReduceCorrectness.SinglePassInt/257",
                     "ReduceCorrectness.SinglePass/33", "ReduceCorrectness.SinglePass/50001"):
            t = graded[name]
            assert "only sizes that are not a multiple of 32 fail" in t.hint
            assert "The sizes that fail are also exactly those that are not a multiple of 4" in t.hint, name
    else:
        assert graded["ReduceCorrectness.SinglePassInt/1"].status is Status.PASSED
        for n in (257, 50001):
            t = graded[f"ReduceCorrectness.SinglePassInt/{n}"]
            assert re.search(r"off by -?\d{1,3}\n", t.message)
            assert "only a few values are wrong, and in this step the likeliest are the last n % 4" in t.hint


def test_06_single_pass_blocks_that_walk_the_whole_array() -> None:
    """single-pass-stride-one-block: one block (n <= 1024) is right, many count the array many times."""
    graded = grade(REDUCE, reduce_tests("SinglePass", single_pass_with(stride_one_block=True)))
    assert graded["ReduceCorrectness.SinglePassInt/257"].status is Status.PASSED
    t = graded["ReduceCorrectness.SinglePassInt/50001"]
    assert "step by the whole grid, gridDim.x * kBlock vectors, not by one block" in t.hint
    assert "ReduceCorrectness.SinglePassInt" in graded["ReduceCorrectness.SinglePass/50001"].hint


def test_06_single_pass_flag_read_before_the_barrier() -> None:
    """single-pass-no-barrier-after-flag."""
    kernel = ("void reduce_single_pass_kernel<float>(const float *, float *, unsigned long, float *, "
              "unsigned int *)")
    t = sanitized(REDUCE, "racecheck", race_log(kernel, "06-reduce/reduce.cu:281", "06-reduce/reduce.cu:284"))
    assert t.task == "single-pass"
    assert "Thread 0 writes the __shared__ flag that says this block is last" in t.hint


@pytest.mark.parametrize("missing, words", [
    ("__threadfence() (membar.gl)", "__threadfence() goes between the store to partials[blockIdx.x] and the"),
    ("atomic counter", "hands every block a different number"),
    ("reduces its block with warp shuffles", "Reduce each block with block_reduce_sum from step 4"),
])
def test_06_single_pass_techniques(missing: str, words: str) -> None:
    """single-pass-no-publish-fence (the tests pass; the PTX has no fence before the ticket), and the rest."""
    t = grade(REDUCE, [], missing=[missing])["Techniques.single-pass"]
    assert t.category is Category.TECHNIQUE_MISSING and words in t.hint


# --- lab 06: hints that must stay away ---

def test_06_hints_stay_in_their_task_and_pattern() -> None:
    graded = grade(REDUCE, reduce_tests("Sequential", passes_of(sequential(strides=HALVING[:-1])))
                   + reduce_tests("Interleaved", passes_of(interleaved())))
    lost = graded["ReduceCorrectness.SequentialInt/257"]
    assert "the tree must run every stride 1, 2, 4" not in lost.hint  # the interleaved step's
    # The sign hints read an int test's "off by"; the float test of the same bug gets the pointer to it.
    floats = graded["ReduceCorrectness.Sequential/257"]
    assert "check that the loop's condition" not in floats.hint and "values were lost" not in floats.hint
    # A call of step 2 that never wrote *d_out is not the single pass's ticket problem.
    never = one(REDUCE, "ReduceCorrectness.SequentialInt/33", sum_failure(33, int_input(33), POISON_INT))
    assert "ticket" not in never.hint and "off by -" in never.message
    # The n % 4 hint needs the sizes' pattern: one failing size of the single pass does not get it.
    single = grade(REDUCE, reduce_tests("SinglePass", single_pass_with(stride_one_block=True)))
    assert "not a multiple of 4" not in single["ReduceCorrectness.SinglePassInt/50001"].hint
    # The grid-size hint of steps 3 and 4 is not step 1's.
    grid = one(REDUCE, "ReduceGridCorrectness.Interleaved/50001", grid_failure(50001, 256, 3, 197))
    assert "2 * kBlock" not in grid.hint
