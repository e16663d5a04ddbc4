"""The summary table that ci/gpu-check prints last.

usage: gpu_summary.py SOLUTION_RESULTS_JSON SKELETONS_TSV
Exit status 1 when a reference solution failed or did not run a test, or a skeleton did not fail.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from grader.results import Results, ResultsError, Status  # noqa: E402


def main(results_path: str, skeletons_path: str) -> int:
    ok = True
    try:
        results = Results.load(Path(results_path))
    except ResultsError as err:
        print(f"gpu-check: cannot read the solution results: {err}")
        return 1
    gpu = results.run.gpu
    if results.run.gpu_available:
        print(
            f"GPU: {gpu.get('gpu_name', '?')} (cc {gpu.get('gpu_compute_capability', '?')}, "
            f"{gpu.get('gpu_sm_count', '?')} SMs, {gpu.get('gpu_sm_clock_mhz', '?')} MHz), "
            f"CUDA driver {gpu.get('cuda_driver_version', '?')}, runtime {gpu.get('cuda_runtime_version', '?')}; "
            f"{results.run.toolkit}"
        )
    else:
        print(f"GPU: none ({results.run.gpu_reason})")
        ok = False

    skeletons: dict[str, tuple[int, int, int, int]] = {}
    for line in Path(skeletons_path).read_text().splitlines():
        lab, total, failed, skipped, rc = line.split("\t")
        skeletons[lab] = (int(total), int(failed), int(skipped), int(rc))

    print()
    print(f"{'lab':<24} {'solution':<18} {'skeleton':<22} score")
    perf_lines: list[str] = []
    for lab in results.labs:
        target = f"lab{lab.number:02d}"
        total = len(lab.tests)
        good = lab.passed
        bad = lab.failed + lab.not_run
        sol = f"pass {good}/{total}" + (f", {bad} FAIL" if bad else "") + (f", {lab.skipped} skip" if lab.skipped else "")
        if bad or total == 0 or any(not b.ok for b in lab.builds):
            ok = False
        sk = skeletons.get(target)
        if sk is None:
            skel = "not run"
            ok = False
        else:
            s_total, s_failed, _, rc = sk
            if s_failed < 0:
                skel = f"fails (crashed, rc {rc})"
            elif s_failed > 0:
                skel = f"fails {s_failed}/{s_total}"
            else:
                skel = f"PASSES {s_total}/{s_total}"
                ok = False
        print(f"{lab.name:<24} {sol:<18} {skel:<22} {lab.score:.0f}/{lab.max_score:.0f}")
        for t in lab.tests:
            p = t.perf
            if p is None or p.impl is None or t.status is not Status.PASSED:
                continue
            impl_rate = p.rate(p.impl)
            parts = [f"{impl_rate:,.1f} {p.metric}" if impl_rate is not None else "?"]
            if p.baseline and p.series(p.baseline) is not None:
                parts.append(f"{p.ratio_to_baseline:.2f}x {p.baseline}")
            for v in p.variants:
                if v.name not in ("impl", p.baseline) and v.name in ("serial",):
                    parts.append(f"{p.speed_ratio(v):.2f}x over {v.name}")
            if p.floor_ms:
                parts.append(f"{p.floor_ms / p.impl.median_ms:.0%} of floor")
            if p.impl.verified >= 0:
                parts.append(f"{p.impl.verified}/{p.impl.calls} calls verified")
            if p.implausible:
                parts.append(f"IMPLAUSIBLE: {p.implausible}")
                ok = False
            perf_lines.append(f"  {lab.name:<22} {t.name:<48} " + ", ".join(parts))
        if lab.score < lab.max_score:  # a reference below full marks means the rubric or a check is wrong
            ok = False
    if perf_lines:
        print("\nperf of the reference solutions (ratios measured side by side in one process):")
        print("\n".join(perf_lines))
    confinement = [n for n in results.run.notes if n.startswith("confinement:")]
    if confinement:
        print("\n" + "\n".join(confinement))
    print(f"\ngpu-check: {'OK' if ok else 'PROBLEMS FOUND'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
