"""When a perf test's timing cannot be believed (grader/score/perfcheck.py), and what the report says."""

from __future__ import annotations

from grader.model.results import Perf, PerfSeries
from grader.score.perfcheck import implausible

GPU = {"gpu_dram_peak_gbps": "4800", "gpu_fp32_peak_tflops": "66.9"}


def perf(impl_tail_ms: float, cub_tail_ms: float = 0.01, median_ms: float = 1.0) -> Perf:
    return Perf("GB/s", 1e9, [PerfSeries("impl", median_ms, tail_ms=impl_tail_ms, calls=12, verified=12),
                              PerfSeries("cub", 1.0, tail_ms=cub_tail_ms)], baseline="cub")


def test_work_left_running_after_the_call_earns_nothing_and_says_what_to_try() -> None:
    """On the H200 the same tails came from a mutation gate sharing the GPU: the student is told both."""
    why = implausible(perf(0.2), GPU, scored=True)
    assert why.startswith("work was still running 0.190 ms after the call returned")
    assert "another stream" in why and "grade again when it is idle" in why
    assert implausible(perf(0.05), GPU, scored=True) == ""  # within ESCAPE_MS of the library's tail


def test_faster_than_the_gpu_can_is_not_real() -> None:
    why = implausible(perf(0.01, median_ms=0.1), GPU, scored=True)  # 1 GB in 0.1 ms: 10,000 GB/s
    assert "faster than the GPU can do this work" in why


def test_a_scored_test_must_check_every_timed_call() -> None:
    p = perf(0.01)
    p.variants[0].verified = 10
    assert "checked the output of 10 of 12 timed calls" in implausible(p, GPU, scored=True)
    assert implausible(p, GPU, scored=False) == ""
