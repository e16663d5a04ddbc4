"""A lab's profile (grade --profile) on the console: per profiled kernel of yours one line of the numbers
that tell the lesson, then its first advice; or why there is no profile."""

from __future__ import annotations

from grader.model.results import LabResult
from grader.report._format import clean_text
from grader.profile.advice import short_name


def profile_lines(lab: LabResult) -> list[str]:
    p, nn = lab.profile, f"  {lab.number:02d}  "
    if p is None:
        return []
    if p.status != "ok":
        return [f"{nn}profile: {clean_text(p.message)}"]
    out = []
    for k in p.kernels:
        if k.role != "yours":
            continue
        m = k.metrics
        bits = [f"{m['duration_us']:,.1f} µs under ncu" if "duration_us" in m else "",
                f"DRAM {m['dram_pct']:.0f}%" if "dram_pct" in m else "",
                f"FMA {m['fma_pct']:.0f}%" if "fma_pct" in m else "",
                f"occupancy {m['occupancy_pct']:.0f}% of {m.get('occupancy_max_pct', 100):.0f}%" if "occupancy_pct" in m
                else "",
                f"shared loads {m['shared_ld_ways']:.1f}-way" if m.get("shared_ld_ways", 0) >= 1.5 else "",
                f"{m['st_sectors']:.0f} sectors/store" if m.get("st_sectors", 0) >= 8 else "",
                f"{m['ld_sectors']:.0f} sectors/load" if m.get("ld_sectors", 0) >= 8 else ""]
        out.append(f"{nn}profile {clean_text(k.test)} {clean_text(short_name(k.kernel))}: "
                   + " · ".join(b for b in bits if b))
        out += [f"{nn}    → {clean_text(a)}" for a in k.advice[:1]]
    return out
