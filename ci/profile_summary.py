#!/usr/bin/env python3
"""gpu-check's profile stage, read back: for each `grade NN --solution --profile` under a folder, the
kernels Nsight Compute profiled per scored perf test (the lab file's own, the library's) and what the
stage said. Fails when a profiled perf test has no kernel of the lab file's own (issue 26: lab 05's fast
task once showed cuBLAS's kernel as "yours"); a profile that could not run at all (no ncu, no access to
the counters) is reported, not failed.

    ci/profile_summary.py build/gpu-check-work/profile
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from grader.model.results import Results, ResultsError  # noqa: E402
from grader.profile.advice import short_name  # noqa: E402


def summarize(folder: Path) -> tuple[list[str], bool]:
    """The table's lines, and whether every profiled lab profiled its own kernel in each test."""
    lines, ok = ["profiles (grade --solution --profile; times under ncu, clocks locked to base):"], True
    paths = sorted(folder.glob("*/results.json"))
    if not paths:
        return lines + ["  no profile results"], False
    for path in paths:
        try:
            labs = Results.load(path).labs
        except ResultsError as err:
            lines.append(f"  {path.parent.name}: unreadable results ({err})")
            ok = False
            continue
        for lab in labs:
            p = lab.profile
            if p is None:
                lines.append(f"  {lab.name}: no profile in its results")
                ok = False
                continue
            if p.status != "ok":
                lines.append(f"  {lab.name}: {p.status}: {p.message}")
                ok = ok and p.status == "unavailable"
                continue
            tests = list(dict.fromkeys(k.test for k in p.kernels))
            for test in tests:
                for k in (k for k in p.kernels if k.test == test):
                    m = k.metrics
                    role = k.variant or k.role  # another variant the test times: its name (tiled, aos)
                    lines.append(f"  {lab.name:<18} {test:<30} {role:<9} {short_name(k.kernel)[:40]:<40} "
                                 f"{m.get('duration_us', 0):>10,.1f} us  DRAM {m.get('dram_pct', 0):3.0f}%  "
                                 f"FMA {m.get('fma_pct', 0):3.0f}%  occupancy {m.get('occupancy_pct', 0):3.0f}%  "
                                 f"shared loads {m.get('shared_ld_ways', 0):4.1f}-way  sectors/request ld "
                                 f"{m.get('ld_sectors', 0):4.1f} st {m.get('st_sectors', 0):4.1f}")
            missing = [t for t in tests if not any(k.test == t and k.role == "yours" for k in p.kernels)]
            if missing:
                lines.append(f"  {lab.name}: NO KERNEL OF THE LAB FILE profiled in {', '.join(missing)}")
                ok = False
            if p.message:
                lines.append(f"  {lab.name}: {p.message}")
                ok = ok and "(yours)" not in p.message
    return lines, ok


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__.split("\n\n")[1].strip(), file=sys.stderr)
        return 2
    lines, ok = summarize(Path(argv[0]))
    print("\n".join(lines))
    print(f"profiles: {'OK' if ok else 'PROBLEMS FOUND'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
