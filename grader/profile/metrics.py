"""One ncu raw-page row (grader/profile/ncu.py) as the few numbers a student needs: time, how busy DRAM,
L2 and the SM's pipes were, occupancy and what caps it, shared-memory bank conflicts as "n-way",
sectors per global request (coalescing), the top stall reasons, and FLOPs and bytes for the roofline.
"""

from __future__ import annotations

from grader.model.profile import KernelProfile
from grader.profile.ncu import number

# name: (what it is, unit) — the report's rows, in order.
METRICS: dict[str, tuple[str, str]] = {
    "duration_us": ("time (clocks locked to base by ncu)", "µs"),
    "dram_pct": ("DRAM throughput, of peak", "%"),
    "l2_pct": ("L2 throughput, of peak", "%"),
    "sm_pct": ("SM throughput, of peak", "%"),
    "fma_pct": ("FMA pipe busy", "%"),
    "lsu_pct": ("load/store pipe busy", "%"),
    "occupancy_pct": ("achieved occupancy", "%"),
    "occupancy_max_pct": ("theoretical occupancy", "%"),
    "registers": ("registers per thread", ""),
    "block_size": ("threads per block", ""),
    "shared_bytes": ("shared memory per block", "B"),
    "shared_ld_ways": ("shared loads: wavefronts per request (1 = no bank conflict)", "×"),
    "shared_st_ways": ("shared stores: wavefronts per request", "×"),
    "ld_sectors": ("global loads: sectors per request (4 = coalesced 4-byte)", ""),
    "st_sectors": ("global stores: sectors per request", ""),
    "flop_per_s": ("FP32 work", "FLOP/s"),
    "bytes_per_s": ("DRAM traffic", "B/s"),
}
# ncu's stall reasons (smsp__average_warps_issue_stalled_<reason>_per_issue_active.ratio) in a student's words.
STALLS = {
    "long_scoreboard": "waiting for global or local memory (long scoreboard)",
    "short_scoreboard": "waiting for shared memory or a special function (short scoreboard)",
    "barrier": "waiting at __syncthreads() (barrier)",
    "mio_throttle": "shared-memory instruction queue full (MIO throttle)",
    "lg_throttle": "global/local memory instruction queue full (LG throttle)",
    "math_pipe_throttle": "arithmetic pipe busy (math pipe throttle)",
    "wait": "fixed-latency dependency (wait)",
    "not_selected": "ready, another warp was picked (not selected)",
    "drain": "waiting for stores to drain at exit (drain)",
    "membar": "waiting at a memory fence (membar)",
    "branch_resolving": "resolving a branch (branch resolving)",
    "dispatch_stall": "dispatch stall",
    "no_instruction": "instruction cache miss (no instruction)",
    "sleeping": "sleeping (nanosleep)",
    "tex_throttle": "texture queue full (tex throttle)",
    "imc_miss": "constant cache miss (IMC miss)",
}
_STALL = "smsp__average_warps_issue_stalled_{}_per_issue_active.ratio"
_LIMITS = {"registers": "registers per thread", "shared_mem": "shared memory per block", "warps": "threads per block",
           "blocks": "blocks per SM", "barriers": "barriers per SM"}


def _get(row: dict[str, str], name: str) -> float | None:
    return number(row[name]) if name in row else None


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def kernel_profile(row: dict[str, str], test: str, role: str) -> KernelProfile:
    g = row.get
    m: dict[str, float | None] = {
        "duration_us": (_get(row, "gpu__time_duration.sum") or 0) / 1000 or None,
        "dram_pct": _get(row, "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"),
        "l2_pct": _get(row, "lts__throughput.avg.pct_of_peak_sustained_elapsed"),
        "sm_pct": _get(row, "sm__throughput.avg.pct_of_peak_sustained_elapsed"),
        "fma_pct": _get(row, "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active"),
        "lsu_pct": _get(row, "sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active"),
        "occupancy_pct": _get(row, "sm__warps_active.avg.pct_of_peak_sustained_active"),
        "occupancy_max_pct": _get(row, "sm__maximum_warps_per_active_cycle_pct"),
        "registers": _get(row, "launch__registers_per_thread"),
        "block_size": _get(row, "launch__block_size"),
        "shared_bytes": sum(_get(row, f"launch__shared_mem_per_block_{k}") or 0 for k in ("static", "dynamic")),
        "shared_ld_ways": _ratio(_get(row, "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum"),
                                 _get(row, "smsp__sass_inst_executed_op_shared_ld.sum")),
        "shared_st_ways": _ratio(_get(row, "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum"),
                                 _get(row, "smsp__sass_inst_executed_op_shared_st.sum")),
        "ld_sectors": _ratio(_get(row, "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"),
                             _get(row, "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum")),
        "st_sectors": _ratio(_get(row, "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum"),
                             _get(row, "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum")),
    }
    # The roofline's two coordinates, as ncu's own roofline computes them: FP32 thread instructions per
    # elapsed cycle (an FMA is two FLOPs) at the SM clock, and DRAM bytes over the kernel's time.
    per_cycle = sum((_get(row, f"smsp__sass_thread_inst_executed_op_{op}_pred_on.sum.per_cycle_elapsed") or 0) * w
                    for op, w in (("fadd", 1), ("fmul", 1), ("ffma", 2)))
    clock = _get(row, "smsp__cycles_elapsed.avg.per_second") or _get(row, "sm__cycles_elapsed.avg.per_second")
    seconds = (m["duration_us"] or 0) * 1e-6
    dram = (_get(row, "dram__bytes_read.sum") or 0) + (_get(row, "dram__bytes_write.sum") or 0)
    m["flop_per_s"] = per_cycle * clock if clock else None
    m["flop"] = m["flop_per_s"] * seconds if m["flop_per_s"] is not None else None
    m["dram_bytes"] = dram or None
    m["bytes_per_s"] = dram / seconds if dram and seconds else None
    limits = {k: _get(row, f"launch__occupancy_limit_{k}") for k in _LIMITS}
    known = {k: v for k, v in limits.items() if v is not None}
    full = (m["occupancy_max_pct"] or 0) >= 99.0  # nothing caps it: no limiter to name
    limiter = _LIMITS[min(known, key=lambda k: known[k])] if known and not full else ""
    stalls = sorted(((STALLS[r], v) for r in STALLS if (v := _get(row, _STALL.format(r))) is not None and v > 0),
                    key=lambda s: -s[1])
    return KernelProfile(test=test, role=role, kernel=str(g("Kernel Name", "")).strip(),
                         metrics={k: round(v, 4) for k, v in m.items() if v is not None}, limiter=limiter,
                         stalls=[[name, round(v, 2)] for name, v in stalls[:3]])


def peaks(row: dict[str, str]) -> tuple[float, float]:
    """The GPU's FP32 FLOP/s and DRAM bytes/s at the clocks ncu profiled at (ncu's roofline ceilings)."""
    ffma = _get(row, "sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained") or 0
    sm_clock = _get(row, "sm__cycles_elapsed.avg.per_second") or 0
    dram = _get(row, "dram__bytes.sum.peak_sustained") or 0
    dram_clock = _get(row, "dram__cycles_elapsed.avg.per_second") or 0
    return 2 * ffma * sm_clock, dram * dram_clock
