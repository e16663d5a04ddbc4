#!/usr/bin/env python3
"""Where a grade's time goes, per lab: prepare (intake, build, static checks), each test binary's run,
the reference's timing run, each compute-sanitizer tool, scoring, and the rest (configure, reports).

    bench/grading_time.py --out bench-out                     # every lab, each reference graded as a student
    bench/grading_time.py --solution --labs 10 11 --out DIR   # grade --solution instead
    bench/grading_time.py --from DIR/results.json             # the table of a grade already made
    bench/grading_time.py --root ../old --labs 11 --out DIR   # another checkout, graded by its own grader

"As a student" copies each reference file into a submission folder (labs/NN-slug/<file>) and grades it
with `grade --submission`: the student's own path, build apart, reference timed beside it. The table
comes from the grade's results.json (each lab's `seconds`, wall clock per stage); the whole run's wall
time is measured here, so "other" holds configuring, the health probe and writing the reports. Nothing
here asserts a time: it measures.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def submission_of_references(root: Path, labs: list[str], where: Path) -> Path:
    """A student's tree holding each reference file in its lab's place."""
    from grader.model.labs import discover, select

    chosen = select(discover(root), labs) if labs else discover(root)
    if where.exists():
        shutil.rmtree(where)
    for lab in chosen:
        for name in lab.student_files:
            src = root / "solutions" / lab.path.name / name
            if src.is_file():
                dest = where / "labs" / lab.path.name / name
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, dest)
    return where


def recorded(lab: dict[str, Any]) -> dict[str, float]:
    """The lab's stage seconds; from a grader that did not record them, the sums of its tests' durations
    per binary and each sanitizer tool's run (no prepare, reference or score column then)."""
    if lab.get("seconds"):
        return lab["seconds"]
    out: dict[str, float] = {}
    for t in lab.get("tests", []):
        key = t["name"] if t["name"].startswith("sanitizer.") else f"run lab_{t.get('binary', '')}"
        out[key] = out.get(key, 0.0) + float(t.get("duration_s") or 0.0)
    return out


def columns(lab: dict[str, Any]) -> dict[str, float]:
    """One lab's seconds, grouped: prepare, run (every binary), reference, one column per tool, score."""
    out: dict[str, float] = {}
    for key, value in recorded(lab).items():
        if key.startswith("run "):
            kind = key.split("_", 1)[-1]  # "run lab05_hidden_student" -> "hidden_student"
            group = "run " + ("hidden" if kind.startswith("hidden") else kind.removesuffix("_student") or "student")
        elif key.startswith("reference "):
            group = "reference"
        elif key.startswith("sanitizer."):
            group = key.removeprefix("sanitizer.")
        else:
            group = key
        out[group] = out.get(group, 0.0) + float(value)
    return out


ORDER = ("prepare", "run student", "run hidden", "run solution", "reference", "memcheck", "racecheck",
         "synccheck", "initcheck", "score")


def table(results: dict[str, Any], wall_s: float | None) -> str:
    labs = results.get("labs", [])
    cols = [lab_cols for lab_cols in (columns(lab) for lab in labs)]
    used = [c for c in ORDER if any(c in row for row in cols)]
    used += sorted({k for row in cols for k in row} - set(used))
    head = ["lab"] + used + ["total"]
    rows = []
    for lab, row in zip(labs, cols):
        rows.append([lab["name"]] + [f"{row[c]:.1f}" if c in row else "" for c in used] + [f"{sum(row.values()):.1f}"])
    sums = {c: sum(row.get(c, 0.0) for row in cols) for c in used}
    total = sum(sums.values())
    rows.append(["all labs"] + [f"{sums[c]:.1f}" for c in used] + [f"{total:.1f}"])
    widths = [max(len(str(r[i])) for r in [head] + rows) for i in range(len(head))]
    lines = ["  ".join(str(v).ljust(w) if i == 0 else str(v).rjust(w) for i, (v, w) in enumerate(zip(r, widths)))
             for r in [head] + rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    gpu = results.get("run", {}).get("gpu") or {}
    gpu = gpu.get("gpu_name", "no GPU") if isinstance(gpu, dict) else str(gpu)
    lines.append(f"seconds of wall time per stage; GPU: {gpu}")
    if wall_s is not None:
        lines.append(f"whole run: {wall_s:.1f} s wall, of which {max(0.0, wall_s - total):.1f} s outside the labs' "
                     "stages (configure, health probe, reports)")
    peaks = [(lab["name"], max(lab["host_memory_mib"].values())) for lab in labs if lab.get("host_memory_mib")]
    if peaks:  # what each lab's host memory limit is set from (lab.toml's [lab] max_host_memory_mib)
        lines.append("peak host memory of a test binary's runs, MiB: "
                     + ", ".join(f"{name[:2]} {mib:,.0f}" for name, mib in peaks))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--labs", nargs="*", default=[], help="lab selectors (default: all)")
    ap.add_argument("--solution", action="store_true", help="grade --solution instead of the references as a student")
    ap.add_argument("--from", dest="from_json", type=Path, help="print the table of this results.json only")
    ap.add_argument("--out", type=Path, default=ROOT / "build" / "bench-grading-time")
    ap.add_argument("--preset", default=None)
    ap.add_argument("--root", type=Path, default=ROOT, help="the tree to grade (another checkout: its own grader)")
    args = ap.parse_args(argv)
    if args.from_json is not None:
        print(table(json.loads(args.from_json.read_text()), None))
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "grader", "grade", "--out", str(args.out / "report")]
    if args.preset:
        cmd += ["--preset", args.preset]
    if args.solution:
        cmd.append("--solution")
    else:
        cmd += ["--submission", str(submission_of_references(args.root, args.labs, args.out / "submission"))]
    cmd += args.labs
    started = time.monotonic()
    with open(args.out / "grade.log", "w") as log:
        rc = subprocess.run(cmd, cwd=args.root, stdout=log, stderr=subprocess.STDOUT, check=False).returncode
    wall = time.monotonic() - started
    results_path = args.out / "report" / "results.json"
    if not results_path.is_file():
        print(f"the grade wrote no results.json (exit code {rc}); see {args.out / 'grade.log'}", file=sys.stderr)
        return 2
    text = table(json.loads(results_path.read_text()), wall)
    (args.out / "grading-time.txt").write_text(text + "\n")
    print(text)
    scores = json.loads(results_path.read_text())
    print("scores: " + ", ".join(f"{lab['name'][:2]} {lab['score']:g}/{lab['max_score']:g}" for lab in scores["labs"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
