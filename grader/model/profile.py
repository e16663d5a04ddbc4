"""What Nsight Compute said of a lab's kernels (grader/profile/ measures it; the report shows it): each
timed kernel's metrics, the GPU's peaks for the roofline, and why a profile is missing when it is."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class KernelProfile:
    test: str  # the perf test it ran in (MatmulPerf.Tiled/4096)
    role: str  # "yours", "reference", "library", or "variant" (another variant the test times: variant says which)
    kernel: str  # as ncu names it, demangled
    # Named values (grader/profile/metrics.py: METRICS says what each is): duration_us, dram_pct, l2_pct,
    # sm_pct, fma_pct, lsu_pct, occupancy_pct, occupancy_max_pct, registers, block_size, shared_bytes,
    # shared_ld_ways, shared_st_ways, ld_sectors, st_sectors, flop, dram_bytes, flop_per_s, bytes_per_s.
    metrics: dict[str, float] = field(default_factory=dict)
    limiter: str = ""  # what caps the theoretical occupancy: "registers", "shared memory", "block size", ...
    stalls: list[list[Any]] = field(default_factory=list)  # the top reasons: [name, cycles per issue]
    advice: list[str] = field(default_factory=list)
    variant: str = ""  # for role "variant": the test's name for it ("tiled", "aos")


@dataclass
class LabProfile:
    status: str  # "ok"; "unavailable" (no ncu, no permission to the counters); "failed"
    message: str = ""  # what is missing and how to get it, or what went wrong
    tool: str = ""  # ncu's version line
    peak_flop_per_s: float = 0.0  # FP32, at the clock ncu profiled at
    peak_bytes_per_s: float = 0.0  # DRAM
    kernels: list[KernelProfile] = field(default_factory=list)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LabProfile:
        data = dict(data)
        data["kernels"] = [KernelProfile(**k) for k in data.get("kernels", [])]
        return cls(**data)
