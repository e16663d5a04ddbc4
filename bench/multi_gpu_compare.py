"""The comparison behind bench/multi_gpu.py: the same batch graded on one GPU (run A, `--gpus 0`) and on
all of them (run B, `--gpus all`). Pure functions over what `grader batch` wrote (gradebook.csv and each
OUT/<student>/results.json, report.html, .batch.json); no GPU, no grader run. Tested by
grader/tests/test_bench_multi_gpu.py on hand-made fixtures.

Scores. Correctness points (each task's `earned`, which holds no perf points) must be equal, lab by lab
and task by task, and so must each student's status (graded, broken, ...). Perf points (each task's
`perf_earned`) may differ by the timing noise, and only by it. The tolerance is measured, per perf test
with points:

  delta   = max(the spread of the reference's own median between the two runs, PERF_NOISE_FLOOR)
            spread = (max - min) / min over the reference medians of that test that any student's
            results.json carries (one per GPU per run: the batch times the reference once per GPU)
  band    = 2 * delta * r             r = reference time / student time, the larger of the two runs;
                                      both times may move by delta, so their ratio by about 2 delta
  allowed = points * min(1, band / (full_at - zero_at))      the rubric's linear perf scale

The reference is the same code on the same GPU model in both runs, so its spread is the noise the
machine shows between runs and GPUs, measured in the very batch being judged. A lab's allowed perf
difference is the sum over its perf tests. With a fixed tolerance (fixed_pct) instead, a lab's perf
points may differ by that percentage of its perf points.

GPUs. Every student with a results.json must name its GPU: run.gpu.gpu_index (one of the run's GPUs)
and gpu_uuid (that GPU's UUID where known), the gradebook's gpu column ("GPU <index> ..."), and the
HTML report ("GPU index"). A broken submission has no report and is left out of that check.
"""

from __future__ import annotations

import csv
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

PERF_NOISE_FLOOR = 0.01  # 1%: no tolerance narrower than a memory-bound kernel's usual run-to-run jitter
DEFAULT_SCALE = 0.4  # full_at - zero_at when the rubric's goal is unknown (the labs use 0.4 to 0.45)
EPS = 1e-6

# (lab name, perf test name) -> (zero_at, full_at)
Goals = dict[tuple[str, str], tuple[float, float]]


@dataclass
class RunData:
    """What one `grader batch` OUT holds, per student."""

    out: str
    book: dict[str, dict[str, str]] = field(default_factory=dict)  # gradebook.csv rows by student
    results: dict[str, dict[str, Any]] = field(default_factory=dict)  # results.json by student
    html: dict[str, str] = field(default_factory=dict)  # report.html text by student
    states: dict[str, dict[str, Any]] = field(default_factory=dict)  # .batch.json by student


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def load_run(out: Path) -> RunData:
    out = Path(out)
    run = RunData(str(out))
    try:
        with open(out / "gradebook.csv", newline="") as f:
            run.book = {row["student"]: row for row in csv.DictReader(f)}
    except OSError:
        pass
    for d in sorted(p for p in out.iterdir() if p.is_dir()) if out.is_dir() else []:
        if (res := _read_json(d / "results.json")) is not None:
            run.results[d.name] = res
        if (state := _read_json(d / ".batch.json")) is not None:
            run.states[d.name] = state
        try:
            run.html[d.name] = (d / "report.html").read_text(errors="replace")
        except OSError:
            pass
    return run


# --- scores ---------------------------------------------------------------------------------------------


def lab_points(res: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    """Per lab: correctness points per task, the perf points earned and at stake, and its perf tests."""
    labs: dict[str, dict[str, Any]] = {}
    for lab in (res or {}).get("labs", []):
        tasks = lab.get("tasks", [])
        perf = {}
        for t in lab.get("tests", []):
            p = t.get("perf")
            if not p or not p.get("points"):
                continue
            impl = next((v for v in p.get("variants", []) if v.get("name") == "impl"), None)
            ref = p.get("reference") or None
            ratio = None
            if impl and ref and impl.get("median_ms", 0) > 0 and ref.get("median_ms", 0) > 0:
                ratio = ref["median_ms"] / impl["median_ms"]
            perf[t["name"]] = {
                "points": float(p.get("points", 0.0)),
                "earned": float(p.get("earned", 0.0)),
                "ratio": ratio,
                "reference_ms": ref.get("median_ms") if ref else None,
                "implausible": p.get("implausible", ""),
            }
        labs[lab["name"]] = {
            "score": float(lab.get("score", 0.0)),
            "correctness": {t["id"]: round(float(t.get("earned", 0.0)), 4) for t in tasks},
            "perf_earned": round(sum(float(t.get("perf_earned", 0.0)) for t in tasks), 4),
            "perf_points": round(sum(float(t.get("perf_points", 0.0)) for t in tasks), 4),
            "perf": perf,
        }
    return labs


def gpu_of(res: dict[str, Any] | None) -> str:
    return str(((res or {}).get("run") or {}).get("gpu", {}).get("gpu_index", ""))


def reference_spread(runs: list[RunData]) -> dict[tuple[str, str], dict[str, Any]]:
    """Per (lab, perf test): each reference median seen, by run and GPU, and their relative spread."""
    seen: dict[tuple[str, str], dict[str, float]] = {}
    for i, run in enumerate(runs):
        for res in run.results.values():
            where = f"run{i}/gpu{gpu_of(res) or '?'}"
            for lab, data in lab_points(res).items():
                for test, p in data["perf"].items():
                    if p["reference_ms"]:
                        seen.setdefault((lab, test), {}).setdefault(where, p["reference_ms"])
    spread = {}
    for key, medians in seen.items():
        values = list(medians.values())
        spread[key] = {"medians_ms": medians, "spread": (max(values) - min(values)) / min(values)}
    return spread


def perf_allowed(lab: str, a: dict[str, Any], b: dict[str, Any], spread: dict, goals: Goals,
                 fixed_pct: float | None) -> tuple[float, list[str]]:
    """How far a lab's perf points may differ between the two runs, and how that was reckoned."""
    if fixed_pct is not None:
        return max(a["perf_points"], b["perf_points"]) * fixed_pct / 100.0, [f"fixed {fixed_pct:g}% of the perf points"]
    allowed, how = 0.0, []
    for test in sorted(set(a["perf"]) | set(b["perf"])):
        pa, pb = a["perf"].get(test), b["perf"].get(test)
        points = max(p["points"] for p in (pa, pb) if p)
        ratios = [p["ratio"] for p in (pa, pb) if p and p["ratio"]]
        if not ratios:
            continue  # ran in neither: no timing, no points, nothing to allow
        delta = max(spread.get((lab, test), {}).get("spread", 0.0), PERF_NOISE_FLOOR)
        zero_at, full_at = goals.get((lab, test), (0.0, DEFAULT_SCALE))
        scale = (full_at - zero_at) or DEFAULT_SCALE
        part = points * min(1.0, 2 * delta * max(ratios) / scale)
        allowed += part
        how.append(f"{test}: +-{part:.3f} (noise {delta * 100:.1f}%)")
    return allowed, how


@dataclass
class StudentDiff:
    student: str
    status_a: str
    status_b: str
    total_a: str
    total_b: str
    correctness_equal: bool = True
    perf_diff: float = 0.0  # the largest |perf A - perf B| of a lab
    perf_allowed: float = 0.0  # what that lab allowed
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def compare_scores(a: RunData, b: RunData, goals: Goals | None = None, fixed_pct: float | None = None,
                   students: list[str] | None = None) -> tuple[list[StudentDiff], dict]:
    """Each student of either run (or of `students`): equal status and correctness points, perf points
    within the tolerance. Returns the per-student verdicts and the reference spread used."""
    goals = goals or {}
    spread = reference_spread([a, b])
    names = students if students is not None else sorted(set(a.book) | set(b.book) | set(a.results) | set(b.results))
    diffs = []
    for s in names:
        ra, rb = a.book.get(s), b.book.get(s)
        d = StudentDiff(s, (ra or {}).get("status", ""), (rb or {}).get("status", ""),
                        (ra or {}).get("total", ""), (rb or {}).get("total", ""))
        if ra is None or rb is None:
            d.problems.append(f"no gradebook row in run {'A' if ra is None else 'B'}")
        elif d.status_a != d.status_b:
            d.problems.append(f"status {d.status_a!r} vs {d.status_b!r}")
        if (s in a.results) != (s in b.results):
            d.problems.append(f"results.json only in run {'A' if s in a.results else 'B'}")
        la, lb = lab_points(a.results.get(s)), lab_points(b.results.get(s))
        if set(la) != set(lb):
            d.problems.append(f"labs {sorted(la)} vs {sorted(lb)}")
        for lab in sorted(set(la) & set(lb)):
            x, y = la[lab], lb[lab]
            if x["correctness"] != y["correctness"]:
                d.correctness_equal = False
                tasks = sorted(t for t in set(x["correctness"]) | set(y["correctness"])
                               if x["correctness"].get(t) != y["correctness"].get(t))
                d.problems.append(f"{lab}: correctness points differ in "
                                  + ", ".join(f"{t} {x['correctness'].get(t)} vs {y['correctness'].get(t)}" for t in tasks))
            diff = abs(x["perf_earned"] - y["perf_earned"])
            allowed, how = perf_allowed(lab, x, y, spread, goals, fixed_pct)
            if diff >= d.perf_diff:
                d.perf_diff, d.perf_allowed = diff, allowed
            if diff > allowed + EPS:
                d.problems.append(f"{lab}: perf points {x['perf_earned']:g} vs {y['perf_earned']:g} "
                                  f"(differ by {diff:.3f}, allowed {allowed:.3f}: {'; '.join(how) or 'no timing'})")
        diffs.append(d)
    return diffs, spread


# --- GPUs -----------------------------------------------------------------------------------------------


def check_gpus(run: RunData, devices: dict[str, str], students: list[str] | None = None) -> dict[str, list[str]]:
    """Per student with a results.json: what its reports fail to say about its GPU ([] when all is
    said). devices: {index: uuid} of the GPUs this run was given (uuid '' when unknown)."""
    problems: dict[str, list[str]] = {}
    names = students if students is not None else sorted(set(run.results) | set(run.book))
    for s in names:
        res = run.results.get(s)
        if res is None:
            continue  # a broken submission: no report, nothing graded on any GPU
        why = []
        gpu = ((res.get("run") or {}).get("gpu") or {})
        index, uuid = str(gpu.get("gpu_index", "")), str(gpu.get("gpu_uuid", ""))
        if not index:
            why.append("results.json: no run.gpu.gpu_index")
        elif index not in devices:
            why.append(f"results.json: GPU {index} is not one of this run's ({', '.join(sorted(devices))})")
        elif devices[index] and uuid != devices[index]:
            why.append(f"results.json: gpu_uuid {uuid or 'missing'} is not GPU {index}'s {devices[index]}")
        cell = (run.book.get(s) or {}).get("gpu")
        if cell is None:
            why.append("gradebook: no gpu column" if run.book else "gradebook: no row")
        elif not index or not cell.startswith(f"GPU {index}"):
            why.append(f"gradebook: gpu column {cell!r} does not name GPU {index or '?'}")
        state = run.states.get(s)
        if state is not None and index and str(state.get("gpu", "")) != index:
            why.append(f".batch.json: gpu {state.get('gpu')!r} is not {index}")
        html = run.html.get(s)
        if html is None:
            why.append("no report.html")
        elif "GPU index" not in html:
            why.append("report.html does not name its GPU (no 'GPU index')")
        problems[s] = why
    return problems


def per_gpu(run: RunData) -> dict[str, int]:
    """How many students each GPU graded."""
    count: dict[str, int] = {}
    for res in run.results.values():
        if index := gpu_of(res):
            count[index] = count.get(index, 0) + 1
    return dict(sorted(count.items()))


# --- the summary ----------------------------------------------------------------------------------------


def rate(students: int, seconds: float | None) -> float | None:
    return students * 3600.0 / seconds if seconds and seconds > 0 else None


def verdict(diffs: list[StudentDiff], gpus_a: dict[str, list[str]], gpus_b: dict[str, list[str]]) -> list[str]:
    """What fails the bench (empty: it passes)."""
    fails = [f"{d.student}: {p}" for d in diffs for p in d.problems]
    fails += [f"{s} (run A): {p}" for s, ps in gpus_a.items() for p in ps]
    fails += [f"{s} (run B): {p}" for s, ps in gpus_b.items() for p in ps]
    return fails


def table(diffs: list[StudentDiff], gpus_a: dict[str, list[str]], gpus_b: dict[str, list[str]],
          a: RunData, b: RunData) -> list[str]:
    """One line per student: status, total in each run, on which GPU, the perf difference, a verdict."""
    lines = [f"{'student':<28}{'status':<10}{'total A':>9}{'total B':>9}{'GPU A':>7}{'GPU B':>7}"
             f"{'perf diff':>11}{'allowed':>9}  verdict"]
    for d in diffs:
        ok = d.ok and not gpus_a.get(d.student) and not gpus_b.get(d.student)
        status = d.status_a if d.status_a == d.status_b else f"{d.status_a}/{d.status_b}"
        lines.append(
            f"{d.student:<28}{status:<10}{d.total_a:>9}{d.total_b:>9}"
            f"{gpu_of(a.results.get(d.student)) or '-':>7}{gpu_of(b.results.get(d.student)) or '-':>7}"
            f"{d.perf_diff:>11.3f}{d.perf_allowed:>9.3f}  {'ok' if ok else 'DIFFERS' if not d.ok else 'NO GPU NAMED'}"
        )
    return lines


def to_json(diffs: list[StudentDiff], spread: dict) -> dict[str, Any]:
    return {
        "students": {d.student: {**asdict(d), "ok": d.ok} for d in diffs},
        "reference_spread": {f"{lab} {test}": v for (lab, test), v in sorted(spread.items())},
    }


__all__ = [
    "DEFAULT_SCALE", "PERF_NOISE_FLOOR", "RunData", "StudentDiff", "check_gpus", "compare_scores",
    "kind_checks", "lab_points", "load_run", "per_gpu", "perf_allowed", "rate", "reference_spread", "table", "to_json",
    "verdict",
]


# --- the kinds of submission ----------------------------------------------------------------------------


def kind_checks(book: dict[str, dict[str, str]], kinds: dict[str, dict[str, str]]) -> list[tuple[str, bool]]:
    """Sanity of one run's gradebook against what each submission is, lab by lab. kinds: {student:
    {lab name: kind}}, kind one of solution, skeleton, wrong-kernel, compile-error, broken-archive."""
    checks = [("every submission has a gradebook row", all(s in book for s in kinds))]
    broken = [s for s, k in kinds.items() if "broken-archive" in k.values()]
    checks.append(("broken archives are 'broken' rows", all(book.get(s, {}).get("status") == "broken" for s in broken)))
    labs = sorted({lab for k in kinds.values() for lab in k})
    for lab in labs:
        def scores(kind: str) -> list[float]:
            return [float(book[s][lab]) for s, k in kinds.items()
                    if k.get(lab) == kind and s not in broken and book.get(s, {}).get(lab, "") not in ("",)]
        sol, skel, wrong, err = scores("solution"), scores("skeleton"), scores("wrong-kernel"), scores("compile-error")
        checks += [
            (f"{lab}: compile errors score 0", all(x == 0 for x in err)),
            (f"{lab}: skeletons score below every solution", bool(sol) and (not skel or max(skel) < min(sol))),
            (f"{lab}: wrong kernels score below every solution", bool(sol) and (not wrong or max(wrong) < min(sol))),
        ]
    return checks
