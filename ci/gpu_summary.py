"""The summary table that ci/gpu-check prints last.

usage: gpu_summary.py SOLUTION_RESULTS_JSON [SKELETONS_TSV]
Exit status 1 when a reference solution failed or did not run a test, scored below full marks (the
rubric or a check is wrong), or timed implausibly, or when a skeleton did not fail. Without
SKELETONS_TSV (gpu-check's skeletons stage did not run) the skeletons are not judged.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from grader.model.results import LabResult, Results, ResultsError, Status  # noqa: E402


def below_full_marks(lab: LabResult) -> str:
    """'' when the reference earned every point, else what it lost and where the report says why."""
    if lab.score >= lab.max_score - 1e-6:
        return ""
    lost = [f"{t.id} {t.earned + t.perf_earned:g}/{t.points + t.perf_points:g}"
            + (f" ({'; '.join(t.notes)})" if t.notes else "")
            for t in lab.tasks if t.earned + t.perf_earned < t.points + t.perf_points - 1e-6]
    why = f"{lab.name}: the reference scores {lab.score:g}/{lab.max_score:g}"
    return why + (f": {', '.join(lost)}" if lost else "")


BASELINE = Path(__file__).resolve().parent / "perf-baseline.json"


def against_baseline(gpu_name: str, ratios: dict[str, float], baseline_path: Path = BASELINE) -> list[str]:
    """Lines comparing this run's headline ratios with the recorded ones for this GPU model ([] when none
    is recorded). Informational: a busy machine moves short timings, so nothing fails on it."""
    try:
        data = json.loads(baseline_path.read_text())
    except (OSError, ValueError):
        return []
    entry = data.get("gpus", {}).get(gpu_name)
    if not entry:
        return []
    tolerance = float(data.get("tolerance", 0.02))
    step = float(data.get("rounding", 0.0)) / 2  # a baseline kept to two decimals is known to +-0.005
    known = entry.get("ratios", {})
    compared = [(name, ratios[name], float(was)) for name, was in known.items() if name in ratios]
    below = [(n, now, was) for n, now, was in compared if now < (was - step) * (1 - tolerance)]
    lines = [f"perf against the baseline ({gpu_name}; {entry.get('recorded', '')}): "
             f"{len(compared) - len(below)} of {len(compared)} ratio(s) within {tolerance:.0%} or above"]
    lines += [f"  below: {n} {now:.2f}x, was {was:.2f}x ({(now / was - 1):+.0%})" for n, now, was in below]
    if below:  # a recorded number cannot tell a slower reference from another day on the GPU
        lines.append("  to tell a slower reference from another day: bench/perf_ab.py --base REV times REV and "
                     "this checkout side by side")
    return lines


def main(results_path: str, skeletons_path: str | None = None) -> int:
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
    if skeletons_path is not None:
        for line in Path(skeletons_path).read_text().splitlines():
            lab, total, failed, skipped, rc = line.split("\t")
            skeletons[lab] = (int(total), int(failed), int(skipped), int(rc))
    short: list[str] = []

    print()
    print(f"{'lab':<24} {'solution':<18} {'skeleton':<22} score")
    perf_lines: list[str] = []
    headline: dict[str, float] = {}
    for lab in results.labs:
        target = f"lab{lab.number:02d}"
        total = len(lab.tests)
        good = lab.passed
        bad = lab.failed + lab.not_run
        sol = f"pass {good}/{total}" + (f", {bad} FAIL" if bad else "") + (f", {lab.skipped} skip" if lab.skipped else "")
        if bad or total == 0 or any(not b.ok for b in lab.builds):
            ok = False
        sk = skeletons.get(target)
        if skeletons_path is None:
            skel = "not checked"
        elif sk is None:
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
            ratio = p.headline_ratio
            if ratio is not None:
                headline[t.name] = ratio
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
        why = below_full_marks(lab)
        if why:  # a reference below full marks means the rubric or a check is wrong
            short.append(why)
            ok = False
    if short:
        print("\nreference solutions below full marks (the rubric or a check is wrong):")
        print("\n".join(f"  {line}" for line in short))
    if perf_lines:
        print("\nperf of the reference solutions (ratios measured side by side in one process):")
        print("\n".join(perf_lines))
        compared = against_baseline(str(gpu.get("gpu_name", "")), headline)
        if compared:
            print("\n" + "\n".join(compared))
    confinement = [n for n in results.run.notes if n.startswith("confinement:")]
    if confinement:
        print("\n" + "\n".join(confinement))
    print(f"\ngpu-check: {'OK' if ok else 'PROBLEMS FOUND'}")
    return 0 if ok else 1


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        print(__doc__.split("\n\n")[1].splitlines()[0], file=sys.stderr)
        sys.exit(2)
    sys.exit(main(*sys.argv[1:3]))
