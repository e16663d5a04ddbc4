"""What a kernel's metrics say to do next, in a student's words: the most telling finding first, at most
three per kernel. Each rule reads ncu's numbers (grader/profile/metrics.py) and names the kernel; where
the reference was profiled in the same test, the biggest difference from it leads."""

from __future__ import annotations

from grader.model.profile import KernelProfile

MAX_ADVICE = 3
# Wavefronts per shared-memory request: 1 for a warp's conflict-free 4-byte accesses, 2 or 4 for 8- or 16-byte
# vector accesses, 32 for a whole warp on one bank. Above what a 16-byte access needs is a conflict for sure.
CONFLICT_WAYS = 4.5
# Sectors per global request: a warp of coalesced accesses of w bytes each touches w (4 for floats, 16 for
# float4s); twice that or more is scattered.
SCATTERED = 2.0
MEMORY_BOUND_PCT = 60.0
# FLOPs per DRAM byte below which a kernel's speed is its bandwidth, whatever its FMA pipe does: a reduction
# does 0.25, an element-wise kernel less, a tiled matmul 5 and more.
LOW_INTENSITY = 1.0
IDLE_PCT = 30.0
LOW_OCCUPANCY_PCT = 50.0
# (metric, how the comparison reads, +1 when more is worse / -1 when less is worse) for "the biggest
# difference from the reference": only a difference in the worse direction counts (a register-tiled
# reference runs at lower occupancy on purpose; more occupancy is no fault of yours).
COMPARED = (("shared_ld_ways", "wavefronts per shared load", 1), ("st_sectors", "sectors per global store", 1),
            ("ld_sectors", "sectors per global load", 1), ("dram_pct", "DRAM throughput %", -1),
            ("fma_pct", "FMA pipe busy %", -1), ("occupancy_pct", "achieved occupancy %", -1))


def short_name(kernel: str) -> str:
    """"void fast::matmul_fast_kernel<1>(const float *, ...)" -> "fast::matmul_fast_kernel<1>"."""
    name = kernel.split("(", 1)[0].strip()
    return name.removeprefix("void ").strip() or kernel


def advise(k: KernelProfile, reference: KernelProfile | None = None) -> list[str]:
    m, name, out = k.metrics, short_name(k.kernel), []
    if reference is not None and m.get("duration_us") and reference.metrics.get("duration_us"):
        slower = m["duration_us"] / reference.metrics["duration_us"]
        if slower > 1.2:
            out.append(_against(k, reference, slower))
    for op, key in (("loads", "shared_ld_ways"), ("stores", "shared_st_ways")):
        if (ways := m.get(key, 0)) >= CONFLICT_WAYS:
            out.append(f"{ways:.0f}-way bank conflicts on shared-memory {op} in {name}: each warp's access is split "
                       f"into {ways:.0f} (1 for 4-byte values, 4 for 16-byte vectors when nothing conflicts), since "
                       "its threads hit one bank at different addresses. Walking a tile's column is the usual "
                       "cause: pad each row by one element ([kTile][kTile + 1]) so that a column spreads over all "
                       "32 banks.")
    for op, key, width in (("loads", "ld_sectors", "ld_access_bytes"), ("stores", "st_sectors", "st_access_bytes")):
        ideal = max(4.0, m.get(width, 4.0))  # the kernel's widest access (its PTX), else 4-byte values
        if (sectors := m.get(key, 0)) >= SCATTERED * ideal:
            out.append(f"Global {op} in {name} touch {sectors:.0f} sectors per warp request where {ideal:.0f} would do "
                       f"for {ideal:.0f}-byte accesses: consecutive threads use addresses far apart (a stride, an "
                       "array of structures). Let thread i touch element i: a structure of arrays, or a "
                       "shared-memory tile that turns the access around.")
    if m.get("occupancy_max_pct", 100) < LOW_OCCUPANCY_PCT and k.limiter:
        out.append(f"At most {m['occupancy_max_pct']:.0f}% of the warp slots can be used: {k.limiter} "
                   f"({_limit_value(k)}) caps the blocks per SM. That is right for a kernel whose threads each keep "
                   "many results in registers; otherwise it hides less latency than it could.")
    if m.get("dram_pct", 0) >= MEMORY_BOUND_PCT:
        out.append(f"DRAM is {m['dram_pct']:.0f}% busy: {name} is memory bound, and only moving fewer bytes (each "
                   "read once, nothing re-read from DRAM) makes it faster.")
    elif m.get("dram_pct", 100) < IDLE_PCT and m.get("sm_pct", 100) < IDLE_PCT:
        out.append(f"Neither DRAM ({m.get('dram_pct', 0):.0f}%) nor the SMs ({m.get('sm_pct', 0):.0f}%) are busy: "
                   f"{name} waits on latency. {_stall_lead(k)}")
    elif m.get("dram_bytes") and m.get("flop", 0) / m["dram_bytes"] < LOW_INTENSITY:
        out.append(f"{name} does {m.get('flop', 0) / m['dram_bytes']:.2g} FLOP per byte it moves, so its speed is "
                   f"how close it comes to the DRAM bandwidth, and DRAM is {m.get('dram_pct', 0):.0f}% busy: keep more "
                   "loads in flight (several elements per thread, 16-byte loads, enough blocks for every SM), "
                   "and read each byte once.")
    elif m.get("flop", 0) and m.get("fma_pct", 100) < IDLE_PCT:
        out.append(f"The FMA pipe is busy only {m['fma_pct']:.0f}% of the time: each multiply-add waits for its "
                   "operands. Give each thread several outputs (a register tile), so that every value loaded from "
                   "shared memory feeds several FMAs.")
    return out[:MAX_ADVICE]


def _against(k: KernelProfile, ref: KernelProfile, slower: float) -> str:
    best, text = 0.0, ""
    for key, label, worse in COMPARED:
        a, b = k.metrics.get(key), ref.metrics.get(key)
        if a is None or b is None or max(a, b) <= 0 or (a - b) * worse <= 0:
            continue
        gap = max(a, b) / max(min(a, b), 1e-9)
        if gap > best and gap >= 1.5:
            best, text = gap, f"; the biggest difference: {label}, yours {a:.3g} against {b:.3g}"
    return f"{short_name(k.kernel)} takes {slower:.1f}x the reference's time under the profiler{text}."


def _limit_value(k: KernelProfile) -> str:
    m = k.metrics
    if k.limiter.startswith("registers"):
        return f"{m.get('registers', 0):.0f} per thread"
    if k.limiter.startswith("shared"):
        return f"{m.get('shared_bytes', 0):,.0f} bytes per block"
    return f"{m.get('block_size', 0):.0f} threads per block"


def _stall_lead(k: KernelProfile) -> str:
    if not k.stalls:
        return "More independent work per thread, or more threads in flight, hides it."
    return (f"Its warps mostly stall {k.stalls[0][0]}: more independent work per thread (several elements each, "
            "loads issued before they are needed) hides it.")
