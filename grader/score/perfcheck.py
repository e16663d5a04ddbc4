"""Whether a perf test's timing of the graded code can be believed. A timing that cannot earns no perf
points, and the report says why:

- the test did not check the output of every timed call (cudalab::bench::Suite::verify): a scored perf
  test must, or a cached or skipped answer could be timed (this protects against a test that forgot);
- the call left work running on another stream: the time from its stop event to the idle device
  (tail_ms) is longer than the library baseline's by more than ESCAPE_MS;
- it ran faster than the GPU can: below the bytes at peak DRAM bandwidth (GB/s), the flops at peak
  FP32 rate (TFLOP/s), or the test's own physical floor, less PHYSICAL_SLACK for clock noise.

Peaks come from the GPU's own attributes, recorded by the harness (gpu_dram_peak_gbps,
gpu_fp32_peak_tflops). A timing the checks cannot judge (no GPU facts) is left as it is.
"""

from __future__ import annotations

from collections.abc import Mapping

from grader.model.results import Perf

ESCAPE_MS = 0.05
PHYSICAL_SLACK = 0.02


def physical_floor_ms(perf: Perf, gpu: Mapping[str, str]) -> float | None:
    """The least time the work can take on this GPU, or None when it cannot be told."""
    if perf.physical_floor_ms:
        return perf.physical_floor_ms
    try:
        if perf.metric == "GB/s" and perf.work > 0:
            return perf.work / (float(gpu["gpu_dram_peak_gbps"]) * 1e9) * 1e3
        if perf.metric == "TFLOP/s" and perf.work > 0:
            return perf.work / (float(gpu["gpu_fp32_peak_tflops"]) * 1e12) * 1e3
    except (KeyError, ValueError, ZeroDivisionError):
        return None
    return None


def implausible(perf: Perf, gpu: Mapping[str, str], scored: bool) -> str:
    """Why the impl's timing cannot be believed ('' when it can)."""
    impl = perf.impl
    if impl is None:
        return ""
    if scored and (impl.verified < 0 or impl.verified < impl.calls):
        checked = "none" if impl.verified < 0 else f"{impl.verified} of {impl.calls}"
        return (f"the perf test checked the output of {checked} timed calls; a timing counts only when every "
                "call's output was checked (ask your instructor: the test needs a verify step)")
    others = [v.tail_ms for v in perf.variants if v.name != "impl"]
    if perf.baseline and perf.series(perf.baseline) is not None:
        others = [perf.series(perf.baseline).tail_ms]  # type: ignore[union-attr]
    if others and impl.tail_ms - min(others) > ESCAPE_MS:
        return (f"work was still running {impl.tail_ms - min(others):.3f} ms after the call returned and its stop "
                "event was recorded (work on another stream, or left for later): only work inside the timed "
                "call counts. If another program used the GPU during the grade, grade again when it is idle")
    floor = physical_floor_ms(perf, gpu)
    if floor is not None and impl.median_ms < floor * (1 - PHYSICAL_SLACK):
        what = {"GB/s": "its bytes at the GPU's peak memory bandwidth",
                "TFLOP/s": "its flops at the GPU's peak FP32 rate"}.get(perf.metric, "the test's physical floor")
        return (f"{impl.median_ms:.4g} ms is faster than the GPU can do this work ({floor:.4g} ms: {what}): the "
                "timing cannot be real")
    return ""
