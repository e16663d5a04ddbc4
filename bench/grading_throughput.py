#!/usr/bin/env python3
"""Grading throughput: how long `python3 -m grader batch` takes per submission. A benchmark, not a test.

    python3 bench/grading_throughput.py --lab 03 --n 20 --out DIR [-j 4] [--preset P] [--warm] [--gpus all|0,1]

It makes N submissions of one lab from its reference solution and its skeleton: copies of the solution
(as a repository folder, a .zip, a .tar.gz and the file alone), skeletons, a compile error, a wrong
kernel (the first kernel skips its first block) and an archive that is not one. Then it grades them:

  cold     `batch` into DIR/batch: the pristine build (when build/<preset> lacks it), each build slot's
           first build (its test objects), then every submission
  warm     (--warm) the same batch again with --force: every slot already built, reference timings cached
  regrade  one solution student edits their file; `batch` again regrades only them
  gpus     (--gpus) every submission graded again with --force on the first of those GPUs alone, then
           on all of them (`batch --gpus`): students per hour on 1 GPU and on N, and the speed-up

and prints a table: wall seconds, seconds per submission (the steady state, between the first and the
last student done, leaves out the pipeline's start), each student's build and run times, what each
warm build compiled (ninja's lines), and whether the scores are right for each kind of submission
(with a GPU: solutions score above skeletons and wrong kernels, compile errors score 0). DIR gets the
submissions, the batch output (class-summary.html, gradebook.csv), the logs, bench.txt and bench.json.
Goals on an H100/H200 machine: regrade one lab after an edit <= 10 s; 100 submissions <= 10 minutes.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tarfile
import time
import zipfile
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from grader.host.environment import choose_preset, probe_gpu
from grader.model.labs import discover, select

# One cycle of kinds; N submissions repeat it. (kind, how it is handed in)
CYCLE = [
    ("solution", "dir"),
    ("skeleton", "dir"),
    ("solution", "zip"),
    ("compile-error", "dir"),
    ("solution", "tar.gz"),
    ("wrong-kernel", "dir"),
    ("solution", "flat"),
    ("skeleton", "zip"),
    ("wrong-kernel", "tar.gz"),
    ("broken-archive", "zip"),
]
GOAL_REGRADE_S = 10.0
GOAL_100_S = 600.0


# --- making submissions ---------------------------------------------------------------------------------


def wrong_kernel(text: str) -> str:
    """The first kernel returns at once in block 0: its first elements are never written."""
    m = re.search(r"__global__[^{;]*\{", text)
    if m is None:
        raise SystemExit("the solution has no __global__ kernel to break")
    return text[: m.end()] + "\n  if (blockIdx.x == 0) return;  // bench: wrong kernel\n" + text[m.end() :]


def compile_error(text: str) -> str:
    m = re.search(r"__global__[^{;]*\{", text)
    at = m.end() if m else len(text)
    return text[:at] + "\n  this is not C++;  // bench: compile error\n" + text[at:]


def source_for(kind: str, lab, student: str) -> str:
    file = lab.student_files[0]
    solution = (lab.solution_dir / file).read_text()
    skeleton = (lab.path / file).read_text()
    text = {
        "solution": solution,
        "skeleton": skeleton,
        "compile-error": compile_error(solution),
        "wrong-kernel": wrong_kernel(solution),
        "broken-archive": solution,
    }[kind]
    return text + f"\n// submitted by {student}\n"


def make_submissions(lab, n: int, into: Path) -> dict[str, str]:
    """N submissions in into/; returns {student id: kind}."""
    shutil.rmtree(into, ignore_errors=True)
    into.mkdir(parents=True)
    kinds: dict[str, str] = {}
    file = lab.student_files[0]
    for i in range(n):
        kind, form = CYCLE[i % len(CYCLE)]
        student = f"s{i + 1:03d}-{kind}"
        kinds[student] = kind
        text = source_for(kind, lab, student)
        rel = f"labs/{lab.name}/{file}"
        if kind == "broken-archive":
            (into / f"{student}.zip").write_bytes(b"PK\x03\x04 this archive was cut short")
        elif form == "dir":
            path = into / student / rel
            path.parent.mkdir(parents=True)
            path.write_text(text)
            (into / student / "README.md").write_text(f"{student}'s repository\n")
        elif form == "flat":
            (into / student).mkdir()
            (into / student / file).write_text(text)
        elif form == "zip":
            with zipfile.ZipFile(into / f"{student}.zip", "w", zipfile.ZIP_DEFLATED) as zf:
                zf.writestr(f"{student}-main/{rel}", text)
        else:
            with tarfile.open(into / f"{student}.tar.gz", "w:gz") as tf:
                data = text.encode()
                info = tarfile.TarInfo(f"{student}/{rel}")
                info.size = len(data)
                info.mtime = int(time.time())
                tf.addfile(info, io.BytesIO(data))
    return kinds


# --- running the batch ----------------------------------------------------------------------------------


def run_batch(args: argparse.Namespace, subs: Path, out: Path, log: Path, *extra: str, gpus: str | None = None) -> dict:
    cmd = [sys.executable, "-m", "grader", "batch", str(subs), args.lab, "--out", str(out), *extra]
    if gpus or args.gpus:
        cmd += ["--gpus", gpus or args.gpus]
    if args.jobs:
        cmd += ["-j", str(args.jobs)]
    if args.preset:
        cmd += ["--preset", args.preset]
    print(f"$ {' '.join(cmd)}", flush=True)
    start = time.monotonic()
    with open(log, "w") as f:
        proc = subprocess.run(
            cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=False
        )
        f.write(proc.stdout)
    wall = time.monotonic() - start
    tail = "\n".join(proc.stdout.splitlines()[-4:])
    print(tail, flush=True)
    if proc.returncode != 0:
        print(proc.stdout[-4000:], file=sys.stderr)
        raise SystemExit(f"grader batch exited {proc.returncode} (log: {log})")
    m = re.search(r"pristine build ([\d.]+) s", proc.stdout)
    return {"wall_s": wall, "prepare_s": float(m.group(1)) if m else 0.0, "log": str(log)}


def student_states(out: Path) -> dict[str, dict]:
    states = {}
    for state in out.glob("*/.batch.json"):
        try:
            states[state.parent.name] = json.loads(state.read_text())
        except (OSError, ValueError):
            continue
    return states


def steady_state(states: dict[str, dict], ids: list[str]) -> float | None:
    """Seconds per submission between the first and the last student finished (pipeline full)."""
    times = sorted(
        states[s].get("finished_unix") or datetime.fromisoformat(states[s]["graded"]).timestamp()
        for s in ids
        if s in states
    )
    if len(times) < 3:
        return None
    return (times[-1] - times[0]) / (len(times) - 1)


def compiled_lines(out: Path, student: str) -> list[list[str]]:
    """Per student target: the 'Building'/'Linking' lines of its build log."""
    try:
        results = json.loads((out / student / "results.json").read_text())
    except (OSError, ValueError):
        return []
    lines = []
    for lab in results.get("labs", []):
        for b in lab.get("builds", []):
            if b["target"].endswith("_student"):
                lines.append(
                    [ln for ln in b.get("log", "").splitlines() if "Building" in ln or "Linking" in ln]
                )
    return lines


def gradebook(out: Path) -> dict[str, dict[str, str]]:
    with open(out / "gradebook.csv", newline="") as f:
        return {row["student"]: row for row in csv.DictReader(f)}


def check_scores(book: dict[str, dict[str, str]], kinds: dict[str, str], gpu: bool) -> list[tuple[str, bool]]:
    def totals(kind: str) -> list[float]:
        return [
            float(book[s]["total"]) for s, k in kinds.items() if k == kind and s in book and book[s]["total"]
        ]

    checks = [
        ("every student has a gradebook row", all(s in book for s in kinds)),
        (
            "broken archives are 'broken' rows",
            all(
                book[s]["status"] == "broken" for s, k in kinds.items() if k == "broken-archive" and s in book
            ),
        ),
        (
            "compile errors score 0 with the error in notes",
            all(
                book[s]["total"] == "0" and "compile error" in book[s]["notes"]
                for s, k in kinds.items()
                if k == "compile-error" and s in book
            ),
        ),
    ]
    if gpu:
        sol, skel, wrong = totals("solution"), totals("skeleton"), totals("wrong-kernel")
        checks += [
            ("solutions score >= 90", bool(sol) and min(sol) >= 90),
            ("skeletons score below every solution", bool(skel) and bool(sol) and max(skel) < min(sol)),
            ("wrong kernels score below every solution", bool(wrong) and bool(sol) and max(wrong) < min(sol)),
        ]
    return checks


# --- the report -------------------------------------------------------------------------------------------


def per_hour(phase: dict, graded: int) -> float | None:
    """Students per hour: from the steady state where there is one, else from the wall time past the pristine build."""
    if phase.get("steady_s"):
        return 3600.0 / phase["steady_s"]
    seconds = phase["wall_s"] - phase["prepare_s"]
    return graded * 3600.0 / seconds if seconds > 0 else None


def gpu_scaling(args: argparse.Namespace, subs: Path, work: Path, ids: list[str], devices: list) -> list[str]:
    """Every submission graded again (--force, warm slots) on the first GPU alone, then on all of them."""
    lines = ["", f"students per hour, --force over {len(ids)} submissions, warm slots:"]
    rates = {}
    for name, spec in (("1", str(devices[0].index)), ("N", ",".join(str(d.index) for d in devices))):
        out = work / f"batch-gpus-{name}"
        phase = run_batch(args, subs, out, work / f"gpus-{name}.log", "--force", gpus=spec)
        phase["steady_s"] = steady_state(student_states(out), ids)
        rates[name] = per_hour(phase, len(ids))
        label = devices[0].label if name == "1" else f"{len(devices)} GPUs ({spec})"
        lines.append(f"  {label:<40}{fmt(phase['wall_s']):>10} wall  {fmt(rates[name], 'students/h'):>20}")
    if rates["1"] and rates["N"]:
        lines.append(f"  speed-up on {len(devices)} GPUs: {rates['N'] / rates['1']:.2f}x")
    return lines


def fmt(x: float | None, unit: str = "s") -> str:
    return "–" if x is None else f"{x:.1f} {unit}".rstrip()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--lab", default="03", help="lab selector (default 03)")
    p.add_argument("--n", type=int, default=20, help="number of submissions (default 20)")
    p.add_argument(
        "--out",
        type=Path,
        help="folder for submissions, batch output and bench.txt/json (default: a temporary folder, removed)",
    )
    p.add_argument("-j", "--jobs", type=int, help="batch build slots (default: the batch's own)")
    p.add_argument("--preset", help="CMake preset (default: 'default' with a GPU, 'ci' without)")
    p.add_argument(
        "--warm", action="store_true", help="also grade everything again with --force (warm slots)"
    )
    p.add_argument("--gpus", metavar="all|0,1", help="grade with `batch --gpus`, and compare 1 GPU with all of them")
    args = p.parse_args(argv)
    devices = []
    if args.gpus:
        from grader.course.batch.gpus import parse_gpus
        from grader.model.errors import GraderError

        try:
            devices = parse_gpus(args.gpus) or []
        except GraderError as err:
            raise SystemExit(str(err)) from None

    labs = select(discover(ROOT), [args.lab])
    if len(labs) != 1:
        raise SystemExit(f"--lab {args.lab} must name one lab")
    lab = labs[0]
    args.lab = lab.name
    gpu = probe_gpu()
    preset = choose_preset(gpu, args.preset)
    keep = args.out is not None
    work = args.out.resolve() if keep else Path(__import__("tempfile").mkdtemp(prefix="cudalab-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    subs, out = work / "submissions", work / "batch"
    shutil.rmtree(out, ignore_errors=True)
    kinds = make_submissions(lab, args.n, subs)
    ids = [s for s, k in kinds.items() if k != "broken-archive"]
    print(f"{len(kinds)} submissions of {lab.name} in {subs}; {gpu.brief()}; preset {preset}", flush=True)

    phases: dict[str, dict] = {}
    phases["cold"] = run_batch(args, subs, out, work / "cold.log")
    cold_states = student_states(out)
    phases["cold"]["steady_s"] = steady_state(cold_states, ids)
    states = cold_states
    if args.warm:
        phases["warm"] = run_batch(args, subs, out, work / "warm.log", "--force")
        states = student_states(out)
        phases["warm"]["steady_s"] = steady_state(states, ids)

    # One student edits their file; only they are graded again.
    edited = next(s for s, k in kinds.items() if k == "solution" and (subs / s).is_dir())
    target = subs / edited / "labs" / lab.name / lab.student_files[0]
    target.write_text(target.read_text() + "// an edit after the first grade\n")
    phases["regrade"] = run_batch(args, subs, out, work / "regrade.log")
    regraded = student_states(out).get(edited, {})
    scaling = gpu_scaling(args, subs, work, ids, devices) if devices else []

    book = gradebook(out)
    checks = check_scores(book, kinds, gpu.available)
    builds = [states[s]["build_s"] for s in ids if s in states]
    runs = [states[s]["run_s"] for s in ids if s in states]
    warm_ids = [s for s in ids if s in states]
    file = lab.student_files[0]
    # A warm build compiles only objects of the student's file (in the *_student.dir/ of each target) and links.
    reused = sum(
        1
        for s in warm_ids
        if (lines := compiled_lines(out, s))
        and not any(
            "Building" in ln and not ("_student.dir/" in ln and ln.endswith(f"{file}.o"))
            for t in lines
            for ln in t
        )
    )
    steady = phases.get("warm", phases["cold"]).get("steady_s")
    est_100 = (phases["cold"]["prepare_s"] + 100 * steady) if steady else None
    by_kind: dict[str, list[float]] = {}
    for s, k in kinds.items():
        if s in book and book[s]["total"]:
            by_kind.setdefault(k, []).append(float(book[s]["total"]))

    slots = f"-j {args.jobs}" if args.jobs else "default build slots"
    lines = [
        f"grading throughput: lab {lab.name}, {len(kinds)} submissions, preset {preset}, {slots}, {os.cpu_count()} CPUs",
        gpu.brief(),
        "",
        f"{'phase':<34}{'wall':>10}{'prepare':>10}{'s/submission':>15}{'steady s/sub':>14}",
    ]
    for name, title, count in (
        ("cold", "cold batch (first run)", len(kinds)),
        ("warm", "warm batch (--force)", len(kinds)),
        ("regrade", "regrade one edited student", 1),
    ):
        if name not in phases:
            continue
        ph = phases[name]
        lines.append(
            f"{title:<34}{fmt(ph['wall_s']):>10}{fmt(ph['prepare_s']):>10}"
            f"{fmt(ph['wall_s'] / count):>15}{fmt(ph.get('steady_s')):>14}"
        )
    run_name = "warm" if args.warm else "cold"
    build_med = fmt(statistics.median(builds) if builds else None)
    run_med = fmt(statistics.median(runs) if runs else None)
    lines += [
        "",
        (
            f"per student ({run_name} run): build median {build_med} (max {fmt(max(builds) if builds else None)}), "
            f"run median {run_med} (max {fmt(max(runs) if runs else None)})"
        ),
        f"regraded student {edited}: build {fmt(regraded.get('build_s'))}, run {fmt(regraded.get('run_s'))}",
        (
            f"builds that compiled only the student's file and linked: {reused} of {len(warm_ids)} students "
            "(a slot's first student also compiles its test objects)"
        ),
        "scores by kind: "
        + "; ".join(f"{k} {statistics.fmean(v):.1f} (n={len(v)})" for k, v in sorted(by_kind.items())),
        *scaling,
        "",
        *[f"  [{'ok' if ok else 'FAIL'}] {what}" for what, ok in checks],
        "",
        f"goal: regrade one lab after an edit <= {GOAL_REGRADE_S:g} s: {fmt(phases['regrade']['wall_s'])}"
        + ("" if phases["regrade"]["wall_s"] <= GOAL_REGRADE_S else "  (over)"),
        f"goal: 100 submissions <= {GOAL_100_S / 60:g} min: estimated {fmt(est_100)} "
        f"(prepare + 100 x steady s/submission)"
        + ("" if est_100 is None or est_100 <= GOAL_100_S else "  (over)"),
    ]
    text = "\n".join(lines) + "\n"
    print("\n" + text)
    if keep:
        (work / "bench.txt").write_text(text)
        (work / "bench.json").write_text(
            json.dumps(
                {
                    "lab": lab.name,
                    "n": len(kinds),
                    "preset": preset,
                    "gpu": gpu.name,
                    "cpus": os.cpu_count(),
                    "jobs": args.jobs,
                    "phases": phases,
                    "gpus": [d.label for d in devices],
                    "estimate_100_s": est_100,
                    "students": {
                        s: {"kind": kinds[s], **states.get(s, {}), "total": book.get(s, {}).get("total", "")}
                        for s in kinds
                    },
                    "checks": dict(checks),
                },
                indent=2,
            )
            + "\n"
        )
        print(f"written: {work / 'bench.txt'}, {work / 'bench.json'}, {out / 'class-summary.html'}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if all(ok for _, ok in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
