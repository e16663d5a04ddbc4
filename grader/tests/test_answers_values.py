"""Labs 01-04's and 11's answers files: each lab's answers.md (shipped blank) against the instructor's
solutions/NN-slug/answers.toml, and against its chapter's questions (README.md, "## Questions").

Each reference value is derived here, independently, from the chapter's sizes and the lab's constants
(the solution's block shapes), so a slip in answers.toml fails; test_answers_files.py checks the files'
shape for every lab."""

from __future__ import annotations

from pathlib import Path

import pytest

from grader.score.answers import load_reference

ROOT = Path(__file__).resolve().parents[2]
LABS = ["01-hello", "02-indexing", "03-vector-add", "04-pitched-memory", "11-quicksort"]


def _ceil_div(a: int, b: int) -> int:
    return (a + b - 1) // b


def _grid_stride_visits(width: int, height: int, block_x: int, block_y: int) -> list[int]:
    """Pixels each thread of one block_x x block_y block visits in lab 02's 2D grid-stride loop."""
    return [len(range(tx, width, block_x)) * len(range(ty, height, block_y))
            for ty in range(block_y) for tx in range(block_x)]


def _derived() -> dict[str, dict[str, float]]:
    """Every reference value, worked out from the chapter's numbers (not read from answers.toml)."""
    # Lab 02, question 1: gridDim (3, 2, 2), blockDim (4, 4, 4), threadIdx (1, 2, 3), blockIdx (2, 1, 1).
    gx, gy, _ = 3, 2, 2
    bx, by, bz = 4, 4, 4
    block_number = 2 + 1 * gx + 1 * gx * gy
    thread_number = 1 + 2 * bx + 3 * bx * by
    # Lab 02, question 2: 32 x 8 blocks (kImageBlockX, kImageBlockY).
    def blocks(w: int, h: int) -> int:
        return _ceil_div(w, 32) * _ceil_div(h, 8)

    # Lab 02, question 3: a 24 x 5 block, thread (10, 3).
    t = 3 * 24 + 10
    warp_threads = range(t // 32 * 32, t // 32 * 32 + 32)
    visits = _grid_stride_visits(1000, 999, 32, 8)
    assert sum(visits) == 1000 * 999
    # Lab 04, question 2: `in + 7 * pitch` on a float*, pitch 512 bytes.
    wrong_offset = 7 * 512 * 4
    return {
        "01-hello": {
            "q3.h200_peak_bandwidth_gbps": 2 * 3201e6 * (6016 / 8) / 1e9,
        },
        "02-indexing": {
            "q1.global_id": block_number * bx * by * bz + thread_number,
            "q2.blocks_1000x999": blocks(1000, 999),
            "q2.guard_failing_threads_1000x999": blocks(1000, 999) * 256 - 1000 * 999,
            "q2.blocks_1920x1080": blocks(1920, 1080),
            "q2.guard_failing_threads_1920x1080": blocks(1920, 1080) * 256 - 1920 * 1080,
            "q3.warp": t // 32,
            "q3.lane": t % 32,
            "q3.warp_first_row": min(warp_threads) // 24,
            "q3.warp_last_row": min(max(warp_threads), 24 * 5 - 1) // 24,
            "q4.image_rows_per_warp_16x16": len({n // 16 for n in range(32)}),
            "q4.image_rows_per_warp_32x8": len({n // 32 for n in range(32)}),
            "q5.most_pixels_per_thread": max(visits),
            "q5.fewest_pixels_per_thread": min(visits),
        },
        "03-vector-add": {
            "q1.grid_threads": _ceil_div(2000, 512) * 512,
            "q1.idle_threads": _ceil_div(2000, 512) * 512 - 2000,
        },
        "11-quicksort": {  # question 4: every level reads and writes each 4-byte key once; radix: 9 passes of 4n
            "q4.quicksort_bytes_per_key_per_level": 2 * 4,
            "q4.radix_bytes_per_key": 9 * 4,
        },
        "04-pitched-memory": {
            "q1.padding_pct_33_floats_pitch_512": 100 * (512 - 33 * 4) / 512,
            "q1.padding_pct_1000_floats_pitch_4096": 100 * (4096 - 1000 * 4) / 4096,
            "q2.only_correct_row": 0,
            "q2.row7_byte_offset_read": wrong_offset,
            "q2.row7_row_actually_read": wrong_offset // 512,
            "q4.task2_bytes_in_flight_per_sm": 2048 * 4,
        },
    }


@pytest.fixture(params=LABS)
def lab(request: pytest.FixtureRequest) -> str:
    return request.param


def test_reference_values_are_the_derived_ones(lab: str) -> None:
    reference = ROOT / "solutions" / lab / "answers.toml"
    derived = _derived()[lab]
    refs = load_reference(reference)
    assert [r.id for r in refs] == list(derived)
    for r in refs:
        assert r.value == pytest.approx(derived[r.id], rel=1e-12, abs=1e-12), r.id
