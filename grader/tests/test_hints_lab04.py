"""The hints of lab 04 (pitched memory), each fired on the failure its bug really produces
(solutions/NN-slug/mutants/ describes the bugs), and kept away from the failures of other tasks and other
patterns.

A failure is built the way the lab's test binary reports it: the output a mutant's kernel leaves is
simulated on the test's pitched buffers with guard rows (grader/tests/lab04_sim.py), compared as
cudalab/compare.hpp does, and wrapped in the messages of the test's EXPECT_* lines; then a GoogleTest
JSON report of those failures goes through grader/execute/gtest.py (which picks the category: a message
naming a cudaError is a cuda_error) and the score stage (scoring.score), which gives each test its task
and its hint as in a real grade. compute-sanitizer findings go through grader/execute/sanitizer.py's
parser, missing techniques through the penalties."""


from __future__ import annotations

import random
import struct
from collections.abc import Callable

import pytest

from grader.model.results import Category, Status
from grader.tests.gtest_failures import POISON, compare, cuda_error, equal, f32, from_bits, grade, one, value_of
from grader.tests.lab04_sim import (K_SEED, PITCHED, PITCHED_AT, Pitched, filter_weights, malloc_pitch, run_fast,
                                    run_filter, run_map)


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
    t = one(PITCHED, "PitchedTransferCorrectness.Upload/w33_h7", [cuda_error(
        "cudaErrorInvalidPitchValue", "invalid pitch argument", call,
        "/home/s/labs/04-pitched-memory/pitched.cu:36")])
    assert t.category is Category.CUDA_ERROR and t.task == "transfer"
    assert "the width and both pitches are counted in bytes" in t.hint


def test_04_a_pitch_not_from_cudaMallocPitch() -> None:
    """A pitch of width * 4 and cudaMalloc: the rows come out right, the pitch does not."""
    t = one(PITCHED, "PitchedTransferCorrectness.Upload/w33_h7", [equal(
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
    graded = grade(PITCHED, [("PitchedTransferCorrectness.Upload/w33_h1", upload_failure(33, 1, rows)),
                             ("PitchedTransferCorrectness.Upload/w33_h7", upload_failure(33, 7, rows)),
                             ("PitchedTransferCorrectness.Upload/w1000_h7", upload_failure(1000, 7, rows))])
    assert graded["PitchedTransferCorrectness.Upload/w33_h1"].status is Status.PASSED
    for name in ("PitchedTransferCorrectness.Upload/w33_h7", "PitchedTransferCorrectness.Upload/w1000_h7"):
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
    t = one(PITCHED, "PitchedTransferCorrectness.Upload/w33_h7", upload_failure(33, 7, rows))
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
    t = one(PITCHED, f"PitchedTransferCorrectness.{test}/w33_h7", download_failure(33, 7, test, flat_download))
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
    graded = grade(PITCHED, [("PitchedMapCorrectness.MapAffine/w33_h7", launch_refused(104)),
                             ("PitchedMapCorrectness.MapAffine/w33_h512", [])])
    t = graded["PitchedMapCorrectness.MapAffine/w33_h7"]
    assert t.category is Category.CUDA_ERROR and t.task == "map"
    assert "an image 1 pixel wide or 7 rows tall still needs one block each way" in t.hint


@pytest.mark.parametrize("bug", [{"row_unit": "floats"}, {"swap_pitches": True}])
def test_04_map_rows_stepped_in_the_wrong_unit(bug: dict) -> None:
    """row-ptr-float-arithmetic, map-pitches-swapped: row 0 right, every row below it wrong."""
    graded = grade(PITCHED, [(f"PitchedMapCorrectness.MapAffine/w{w}_h{h}", run_map(w, h, **bug))
                             for w, h in ((33, 1), (33, 7), (1000, 7), (77, 41))])
    assert graded["PitchedMapCorrectness.MapAffine/w33_h1"].status is Status.PASSED
    for w, h in ((33, 7), (1000, 7), (77, 41)):
        t = graded[f"PitchedMapCorrectness.MapAffine/w{w}_h{h}"]
        assert "[row 1, col 0]" in t.message and t.task == "map"
        assert "the mark of a row step in the wrong unit: row_ptr must add y * pitch bytes" in t.hint


@pytest.mark.parametrize("w, h, first_row", [(77, 41, 16), (33, 512, 128)])
def test_04_map_grid_that_misses_the_lower_rows(w: int, h: int, first_row: int) -> None:
    """map-grid-y-uses-block-x: ceil(height / 32) blocks of 8 rows."""
    t = one(PITCHED, f"PitchedMapCorrectness.MapAffine/w{w}_h{h}", run_map(w, h, grid_rows=32))
    assert f"[row {first_row}, col 0] expected" in t.message
    assert "the grid must cover every column and every row" in t.hint and "row_ptr" not in t.hint


@pytest.mark.parametrize("test, guard", [("MapAffine", "and"), ("MapAffine", "le"), ("OwnPitches", "and"),
                                         ("OwnPitches", "le")])
def test_04_map_guard_that_lets_threads_past_the_row_write(test: str, guard: str) -> None:
    """map-guard-and, map-guard-off-by-one: the values are right, the padding is not."""
    t = one(PITCHED, f"PitchedMapCorrectness.{test}/w33_h7", run_map(33, 7, test=test, guard=guard))
    assert "wrote" in t.message and "elements differ" not in t.message
    assert "A thread past the end of a row wrote into its padding" in t.hint


def test_04_map_guard_that_forgets_the_rows() -> None:
    """A guard on x alone: the grid's eighth row of a 7-row image writes below it."""
    t = one(PITCHED, "PitchedMapCorrectness.MapAffine/w33_h7", run_map(33, 7, guard="x-only"))
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
    t = one(PITCHED, "PitchedFilterCorrectness.Filter3x3/w77_h41", run_filter(77, 41, grid_rows=32))
    assert "launch filter3x3_kernel over the whole image" in t.hint


def test_04_filter_with_transposed_or_partly_copied_weights() -> None:
    """filter-weights-transposed; weights-copy-9-bytes (c_weights[2..8] still 0 from the start)."""
    w = filter_weights()
    nine_bytes = w[:2] + [from_bits(struct.unpack("<I", struct.pack("<f", w[2]))[0] & 0xFF)] + [0.0] * 6
    for failures in (run_filter(33, 7, transposed=True), run_filter(33, 7, kernel_weights=nine_bytes)):
        t = one(PITCHED, "PitchedFilterCorrectness.Filter3x3/w33_h7", failures)
        assert "231 of 231 elements differ" in t.message
        assert "Every pixel is written and every pixel is wrong, so look at what they all share" in t.hint


@pytest.mark.parametrize("w, h, bug", [
    (33, 7, {"zero_border": True}), (1000, 7, {"zero_border": True}),
    (33, 7, {"rows_clamp": "no-lower"}), (77, 41, {"rows_clamp": "no-lower"}),
])
def test_04_filter_edges_not_clamped(w: int, h: int, bug: dict) -> None:
    """filter-zero-border, filter-row-no-lower-clamp: the corner pixel is already wrong."""
    t = one(PITCHED, f"PitchedFilterCorrectness.Filter3x3/w{w}_h{h}", run_filter(w, h, **bug))
    assert "[row 0, col 0]" in t.message and f"{w * h} of {w * h}" not in t.message
    assert "The corner pixel (0, 0) is wrong, so look at the edges" in t.hint


@pytest.mark.parametrize("w, h, first_row", [(33, 7, 6), (1000, 7, 6), (33, 512, 32)])
def test_04_filter_rows_clamped_against_the_width(w: int, h: int, first_row: int) -> None:
    """filter-row-clamp-uses-width: wide images read below the last row, tall ones clamp too early."""
    t = one(PITCHED, f"PitchedFilterCorrectness.Filter3x3/w{w}_h{h}", run_filter(w, h, rows_clamp="width"))
    assert f"[row {first_row}, col 0] expected" in t.message
    assert "look at the clamp of the neighbour's row. It must stop at height - 1" in t.hint


@pytest.mark.parametrize("h, bug", [(1, {"zero_border": True}), (1, {"rows_clamp": "no-lower"}),
                                    (7, {"rows_clamp": "width"}), (7, {"transposed": True})])
def test_04_filter_on_an_image_one_pixel_wide(h: int, bug: dict) -> None:
    """The H200 gate: the first failing input of the clamp bugs is 1 x 1 or 1 x 7, where every pixel is on
    an edge and every pixel comes out wrong; the weights bug fails it the same way. The hint leads with the
    clamp and says how the weights' case differs."""
    t = one(PITCHED, f"PitchedFilterCorrectness.Filter3x3/w1_h{h}", run_filter(1, h, **bug))
    assert f"{h} of {h} elements differ" in t.message
    assert "every pixel is on an edge, so every result uses clamped neighbours" in t.hint
    assert "If the wider images are wrong in their interior too, the weights are at fault" in t.hint


def test_04_filter_without_a_guard() -> None:
    """filter-no-guard: every value right, the padding and the rows below written."""
    t = one(PITCHED, "PitchedFilterCorrectness.Filter3x3/w33_h7", run_filter(33, 7, guard=False))
    assert "elements differ" not in t.message
    assert "Clamping the neighbours they read does not make their store safe" in t.hint


# --- challenge: map_affine_fast ---

def test_04_fast_grid_rounded_down() -> None:
    """fast-grid-floor: height / kTileY block rows, 0 below 32 rows, the last partial tile missing above."""
    graded = grade(PITCHED, [
        ("PitchedFastCorrectness.MapAffineFast/w33_h7", launch_refused(150)),
        ("PitchedFastCorrectness.MapAffineFast/w77_h41", run_fast(77, 41, grid_floor=True))])
    t = graded["PitchedFastCorrectness.MapAffineFast/w33_h7"]
    assert t.category is Category.CUDA_ERROR and t.task == "fast"
    assert "Round the number of row tiles up (ceil_div(height, kTileY)), never down" in t.hint
    tall = graded["PitchedFastCorrectness.MapAffineFast/w77_h41"]
    assert "[row 32, col 0] expected" in tall.message
    assert "the grid needs ceil_div(height, kTileY) block rows" in tall.hint


def test_04_fast_output_rows_with_the_input_pitch() -> None:
    """fast-out-uses-in-pitch."""
    t = one(PITCHED, "PitchedFastCorrectness.MapAffineFast/w33_h7", run_fast(33, 7, out_uses_in_pitch=True))
    assert "[row 1, col 0]" in t.message and t.task == "fast"
    assert "each array has its own pitch (in_pitch to read, out_pitch to write)" in t.hint


@pytest.mark.parametrize("w, h, bug, first_row", [
    (33, 512, {"tile_rows": 8}, 152),  # fast-tile-offset-block-y: block b starts at row 8 b
    (77, 41, {"consecutive": True}, 11),  # fast-rows-consecutive: a thread's rows y0 .. y0 + 3
])
def test_04_fast_rows_nobody_wrote(w: int, h: int, bug: dict, first_row: int) -> None:
    t = one(PITCHED, f"PitchedFastCorrectness.MapAffineFast/w{w}_h{h}", run_fast(w, h, **bug))
    assert f"[row {first_row}, col 0] expected" in t.message and "actual -nan" in t.message
    assert "a block covers a tile of kTileY rows, so the grid needs ceil_div(height, kTileY)" in t.hint


def test_04_fast_stores_below_the_image() -> None:
    """fast-store-unguarded: the loads of rows past height are guarded, their stores are not."""
    t = one(PITCHED, "PitchedFastCorrectness.MapAffineFast/w77_h41", run_fast(77, 41, guard_stores=False))
    assert "elements differ" not in t.message and "rows below the image" in t.message
    assert "Guard every store by its own row, as well as every load" in t.hint


@pytest.mark.parametrize("test", ["MapAffineFast", "OwnPitches"])
def test_04_fast_without_a_column_guard(test: str) -> None:
    """fast-no-column-guard: the last block column's threads past the width write the padding."""
    t = one(PITCHED, f"PitchedFastCorrectness.{test}/w33_h7", run_fast(33, 7, test=test, guard_columns=False))
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
    upload = one(PITCHED, "PitchedTransferCorrectness.Upload/w33_h7", upload_failure(33, 7, rows))
    assert "row_ptr" not in upload.hint and "a row step in the wrong unit" not in upload.hint
    # A map that never launched: the poison everywhere is no weights problem and no pitch problem.
    nothing = one(PITCHED, "PitchedFilterCorrectness.Filter3x3/w33_h7", run_filter(33, 7, launched=False))
    assert "launch filter3x3_kernel over the whole image" in nothing.hint
    assert "the weights" not in nothing.hint
    # The map's padding hint is about the guard; a correct map gets no hint at all.
    ok = grade(PITCHED, [("PitchedMapCorrectness.MapAffine/w33_h7", run_map(33, 7))])
    assert ok["PitchedMapCorrectness.MapAffine/w33_h7"].hint == ""
    # The fast kernel's hints never reach a map_affine failure of the same shape.
    swapped = one(PITCHED, "PitchedMapCorrectness.MapAffine/w33_h7", run_map(33, 7, swap_pitches=True))
    assert "(in_pitch to read, out_pitch to write)" not in swapped.hint
    # A test of another task with a [row 1, col 0] first mismatch (the filter's) gets no map text.
    low = one(PITCHED, "PitchedFilterCorrectness.Filter3x3/w33_h7", run_filter(33, 7, rows_clamp="width"))
    assert "row_ptr must add" not in low.hint


def test_04_upload_of_one_pixel_with_a_width_in_floats() -> None:
    """upload-width-in-floats on a 1 x 1 image: one byte of the float arrives, a denormal."""
    def rows(host: list[float], w: int, pw: int) -> list[float]:
        raw = struct.pack("<f", host[0])[:1] + bytes(3)
        return list(struct.unpack("<f", raw))
    t = one(PITCHED, "PitchedTransferCorrectness.Upload/w1_h1", upload_failure(1, 1, rows))
    assert "e-4" in t.message or "e-3" in t.message
    assert "the mark of a float only partly copied" in t.hint and "width * sizeof(float)" in t.hint
    assert "The only element was written" not in t.hint


def test_04_new_weights_hint_only_when_the_filter_itself_passes() -> None:
    """filter-zero-border also fails NewWeightsTakeEffect; beside the filter tests that fail the weights'
    copy is not the lead (the fail-fast gate on the H200 showed it for every filter bug)."""
    w1 = [f32(v) for v in (0.3, 0.9, 1.1, 0.5, 0.7, 1.2, 0.4, 0.8, 1.0)]
    graded = grade(PITCHED, [
        ("PitchedFilterCorrectness.Filter3x3/w77_h41", run_filter(77, 41, zero_border=True)),
        ("PitchedFilterWeightsCorrectness.NewWeightsTakeEffect",
         run_filter(77, 41, weights=w1, seed=K_SEED + 11, zero_border=True))])
    weights = graded["PitchedFilterWeightsCorrectness.NewWeightsTakeEffect"]
    assert weights.status is Status.FAILED and "New weights must take effect" not in weights.hint
