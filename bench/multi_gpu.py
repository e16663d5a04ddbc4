#!/usr/bin/env python3
"""Multi-GPU batch: the same class graded on one GPU and on all of them (issue 14). A benchmark and a check.

    python3 bench/multi_gpu.py --out DIR [--labs 03 06] [--n 24] [--gpus all] [--single 0] [-j J]
                               [--preset P] [--perf-tolerance PCT] [--sanitizer TOOLS]
    python3 bench/multi_gpu.py --compare DIR      # judge what an earlier run left in DIR again, no GPU

It makes N submissions (default 24), each holding the student files of both labs (default 03 and 06),
of the kinds bench/grading_throughput.py makes: solutions (as a repository folder, a .zip, a .tar.gz and
the files alone), skeletons, wrong kernels, compile errors and an archive cut short; lab 06's kind is
the cycle shifted by three, so a student can hand in a good lab 03 and a bad lab 06. Then:

  warm-up  `batch --compile-only` with as many build slots as the bigger run uses: the pristine build
           and each slot's test objects, so that neither timed run pays them (DIR/warmup)
  A        `batch --gpus <single>` (default: the first of --gpus) into DIR/gpus-1
  B        `batch --gpus <--gpus>` (default: all) into DIR/gpus-N

Both timed runs use --no-similarity (the similarity report is not grading) and the batch's default
build slots unless -j is given. It reports each run's wall time and students per hour (all N
submissions over the wall time; and the steady seconds per submission between the first and the last
student done), the speed-up (wall A / wall B), then judges (bench/multi_gpu_compare.py):

  scores   each student's status and correctness points equal in A and B, lab by lab and task by task;
           perf points within the measured noise: the spread of the reference's own timings between the
           two runs (floor 1%), carried through the rubric's perf scale (--perf-tolerance PCT instead:
           a fixed PCT% of each lab's perf points)
  GPUs     every results.json names its GPU (run.gpu gpu_index, and the UUID nvidia-smi gives it), so
           do the gradebook's gpu column, .batch.json and report.html; run B used every GPU it was given
  kinds    solutions score above skeletons and wrong kernels, compile errors 0, broken archives broken

DIR gets multi-gpu.txt (the summary), multi-gpu.json, devices.json, the logs and both outputs. Exit 0
when everything holds, 1 when a score differs beyond the tolerance, a report lacks its GPU or a check
fails, 2 for a usage error, 4 without a GPU.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import multi_gpu_compare as mc  # noqa: E402
from grading_throughput import CYCLE, compile_error, wrong_kernel  # noqa: E402

MIN_N = 24
LAB06_SHIFT = 3  # lab 06's kind is CYCLE[i + 3]: the kinds of a student's two labs differ
SHORT = {"solution": "sol", "skeleton": "skel", "compile-error": "cerr", "wrong-kernel": "wrong",
         "broken-archive": "broken"}


# --- submissions of several labs ------------------------------------------------------------------------


def lab_source(kind: str, lab, student: str) -> str:
    file = lab.student_files[0]
    solution = (lab.solution_dir / file).read_text()
    text = {
        "solution": solution,
        "skeleton": (lab.path / file).read_text(),
        "compile-error": compile_error(solution),
        "wrong-kernel": wrong_kernel(solution),
    }[kind]
    return text + f"\n// submitted by {student}\n"


def plan(n: int, labs: list) -> list[tuple[str, str, dict[str, str]]]:
    """(student id, form, {lab name: kind}) for N submissions: the first lab follows CYCLE, each next one
    CYCLE shifted by LAB06_SHIFT more; a broken archive is broken for every lab."""
    out = []
    for i in range(n):
        kind, form = CYCLE[i % len(CYCLE)]
        kinds = {}
        for j, lab in enumerate(labs):
            k = kind if j == 0 else CYCLE[(i + j * LAB06_SHIFT) % len(CYCLE)][0]
            kinds[lab.name] = "solution" if (k == "broken-archive" and kind != "broken-archive") else k
        if kind == "broken-archive":
            kinds = dict.fromkeys(kinds, "broken-archive")
        student = f"s{i + 1:03d}-" + "-".join(SHORT[kinds[lab.name]] for lab in labs)
        out.append((student, form, kinds))
    return out


def make_submissions(labs: list, n: int, into: Path) -> dict[str, dict[str, str]]:
    """N submissions in into/, each with every lab's student file; returns {student: {lab: kind}}."""
    shutil.rmtree(into, ignore_errors=True)
    into.mkdir(parents=True)
    kinds: dict[str, dict[str, str]] = {}
    for student, form, per_lab in plan(n, labs):
        kinds[student] = per_lab
        if "broken-archive" in per_lab.values():
            (into / f"{student}.zip").write_bytes(b"PK\x03\x04 this archive was cut short")
            continue
        files = {f"labs/{lab.name}/{lab.student_files[0]}": lab_source(per_lab[lab.name], lab, student) for lab in labs}
        if form == "dir":
            for rel, text in files.items():
                (into / student / rel).parent.mkdir(parents=True, exist_ok=True)
                (into / student / rel).write_text(text)
            (into / student / "README.md").write_text(f"{student}'s repository\n")
        elif form == "flat":
            (into / student).mkdir()
            for rel, text in files.items():
                (into / student / Path(rel).name).write_text(text)
        elif form == "zip":
            with zipfile.ZipFile(into / f"{student}.zip", "w", zipfile.ZIP_DEFLATED) as zf:
                for rel, text in files.items():
                    zf.writestr(f"{student}-main/{rel}", text)
        else:
            with tarfile.open(into / f"{student}.tar.gz", "w:gz") as tf:
                for rel, text in files.items():
                    data = text.encode()
                    info = tarfile.TarInfo(f"{student}/{rel}")
                    info.size, info.mtime = len(data), int(time.time())
                    tf.addfile(info, io.BytesIO(data))
    return kinds


# --- the runs -------------------------------------------------------------------------------------------


def batch(args: argparse.Namespace, subs: Path, out: Path, log: Path, *extra: str) -> dict:
    """One `grader batch` into out (a fresh folder); its wall time and exit code. Never raises for a
    batch that fails: the comparison says what is missing."""
    shutil.rmtree(out, ignore_errors=True)
    cmd = [sys.executable, "-m", "grader", "batch", str(subs), *args.labs, "--out", str(out), "--no-similarity", *extra]
    if args.preset:
        cmd += ["--preset", args.preset]
    if args.sanitizer:
        cmd += ["--sanitizer", args.sanitizer]
    print(f"$ {' '.join(cmd)}", flush=True)
    start = time.monotonic()
    with open(log, "w") as f:
        rc = subprocess.run(cmd, cwd=ROOT, stdout=f, stderr=subprocess.STDOUT, check=False).returncode
    wall = time.monotonic() - start
    tail = log.read_text(errors="replace").splitlines()[-3:]
    print("\n".join(tail) + f"\n  -> exit {rc}, {wall:.1f} s", flush=True)
    return {"cmd": cmd, "rc": rc, "wall_s": round(wall, 2), "log": str(log), "out": str(out)}


def devices_json(devices) -> list[dict]:
    return [{"index": d.index, "name": d.name, "uuid": d.uuid} for d in devices]


def run_all(args: argparse.Namespace, work: Path) -> dict:
    from grader.course.batch.gpus import parse_gpus
    from grader.model.labs import discover, select

    labs = select(discover(ROOT), args.labs)
    args.labs = [lab.name for lab in labs]
    every = parse_gpus(args.gpus) or []
    today = args.single == "default"  # run A is the batch without --gpus (issue 13: the same scores)
    single = [] if today else parse_gpus(args.single) if args.single else every[:1]
    if len(single) != 1 and not today:
        raise SystemExit("--single names one GPU, or 'default' for a batch without --gpus")
    if len(every) < 2:
        print(f"warning: --gpus {args.gpus} gives {len(every)} GPU: no speed-up to measure", flush=True)
    (work / "logs").mkdir(parents=True, exist_ok=True)
    kinds = make_submissions(labs, args.n, work / "submissions")
    meta = {"labs": args.labs, "n": args.n, "kinds": kinds, "cpus": os.cpu_count(), "jobs": args.jobs,
            "preset": args.preset, "sanitizer": args.sanitizer,
            "gpus_a": devices_json(single), "gpus_b": devices_json(every),
            "spec_a": "default" if today else str(single[0].index),
            "spec_b": args.gpus, "runs": {}}
    print(f"{args.n} submissions of {', '.join(args.labs)}; A: {single[0].label if single else 'no --gpus'}; "
          f"B: {', '.join(d.label for d in every)}", flush=True)
    subs = work / "submissions"
    jobs = ["-j", str(args.jobs)] if args.jobs else []
    save = lambda: (work / "devices.json").write_text(json.dumps(meta, indent=2) + "\n")  # noqa: E731
    save()  # after each run too: --compare can judge what a killed bench left
    if not args.no_warmup:
        slots = args.jobs or max(4, 2 * len(every))
        meta["runs"]["warmup"] = batch(args, subs, work / "warmup", work / "logs" / "warmup.log",
                                       "--compile-only", "-q", "-j", str(min(slots, os.cpu_count() or 1)))
        save()
    pin_a = [] if today else ["--gpus", meta["spec_a"]]
    meta["runs"]["A"] = batch(args, subs, work / "gpus-1", work / "logs" / "gpus-1.log", *pin_a, *jobs)
    save()
    meta["runs"]["B"] = batch(args, subs, work / "gpus-N", work / "logs" / "gpus-N.log", "--gpus", args.gpus, *jobs)
    save()
    return meta


# --- the verdict ----------------------------------------------------------------------------------------


def perf_goals(labs: list[str], runs: list[mc.RunData]) -> mc.Goals:
    """(lab, perf test) -> (zero_at, full_at) from each lab's rubric, for the perf tests the runs hold."""
    from grader.model.labs import discover, select

    by_name = {lab.name: lab for lab in select(discover(ROOT), labs)}
    goals: mc.Goals = {}
    for run in runs:
        for res in run.results.values():
            for name, data in mc.lab_points(res).items():
                for test in data["perf"]:
                    goal = by_name[name].perf_goal(test) if name in by_name else None
                    if goal is not None:
                        goals[(name, test)] = (goal.zero_at, goal.full_at)
    return goals


def steady_s(states: dict[str, dict]) -> float | None:
    """Seconds per student between the first and the last one finished (the pipeline full)."""
    times = sorted(float(t) for st in states.values() if (t := st.get("finished_unix")) is not None)
    return (times[-1] - times[0]) / (len(times) - 1) if len(times) >= 3 else None


def judge(work: Path, meta: dict, fixed_pct: float | None) -> tuple[str, dict, int]:
    a, b = mc.load_run(work / "gpus-1"), mc.load_run(work / "gpus-N")
    kinds = meta["kinds"]
    students = sorted(kinds)
    diffs, spread = mc.compare_scores(a, b, perf_goals(meta["labs"], [a, b]), fixed_pct, students)
    # A batch without --gpus pins nothing, so it has no GPU index to name: only run B is checked then.
    today = meta["spec_a"] == "default"
    gpus_a = {} if today else mc.check_gpus(a, {str(d["index"]): d["uuid"] for d in meta["gpus_a"]}, students)
    gpus_b = mc.check_gpus(b, {str(d["index"]): d["uuid"] for d in meta["gpus_b"]}, students)
    fails = mc.verdict(diffs, gpus_a, gpus_b)
    not_run = {"rc": "not run (killed?)", "wall_s": None, "log": "-"}
    runs = {name: meta["runs"].get(name, not_run) for name in ("A", "B")}
    for name, run in runs.items():
        if run["rc"] != 0:
            fails.append(f"batch {name} exited {run['rc']} ({run['log']})")
    used_b = mc.per_gpu(b)
    if len(meta["gpus_b"]) > 1 and len(used_b) < len(meta["gpus_b"]):
        fails.append(f"run B graded on GPU(s) {', '.join(used_b) or 'none'} of {len(meta['gpus_b'])} given")
    checks = [(f"run {n}: {what}", ok) for n, run in (("A", a), ("B", b)) for what, ok in mc.kind_checks(run.book, kinds)]
    fails += [f"check failed: {what}" for what, ok in checks if not ok]

    n = len(students)
    rows = {}
    for name, run, data in (("A", runs["A"], a), ("B", runs["B"], b)):
        per_student = steady_s(data.states)
        rows[name] = {**run, "students_per_hour": mc.rate(n, run["wall_s"]), "steady_s_per_student": per_student,
                      "graded_per_gpu": mc.per_gpu(data)}
    speed_up = rows["A"]["wall_s"] / rows["B"]["wall_s"] if rows["A"]["wall_s"] and rows["B"]["wall_s"] else None
    noise = sorted(((v["spread"], k) for k, v in spread.items()), reverse=True)
    tol = (f"fixed: +-{fixed_pct:g}% of each lab's perf points" if fixed_pct is not None else
           f"measured: the reference's own spread between the runs per perf test (floor "
           f"{mc.PERF_NOISE_FLOOR * 100:g}%), times 2 and the rubric's perf scale")

    def label(devs: list[dict]) -> str:
        return ", ".join(f"GPU {d['index']} ({d['name']})" for d in devs)

    warm = meta["runs"].get("warmup")
    lines = [
        f"multi-GPU batch: labs {', '.join(meta['labs'])}, {n} submissions, {meta['cpus']} CPUs, "
        f"build slots {meta['jobs'] or 'the batch default'}, preset {meta['preset'] or 'default'}",
        f"A: --gpus {meta['spec_a']}  = {label(meta['gpus_a'])}" if not today else
        "A: no --gpus (the batch as before --gpus: unpinned, on the GPU CUDA_VISIBLE_DEVICES leaves)",
        f"B: --gpus {meta['spec_b']}  = {label(meta['gpus_b'])}",
        *([f"warm-up (--compile-only, not timed): {warm['wall_s']:.1f} s, exit {warm['rc']}"] if warm else []),
        "",
        f"{'run':<6}{'GPUs':>5}{'wall':>10}{'students/h':>12}{'steady s/student':>18}  graded per GPU",
    ]
    for name, devs in (("A", meta["gpus_a"]), ("B", meta["gpus_b"])):
        r = rows[name]
        sph = f"{r['students_per_hour']:.0f}" if r["students_per_hour"] else "-"
        steady = f"{r['steady_s_per_student']:.2f}" if r["steady_s_per_student"] else "-"
        wall = f"{r['wall_s']:.1f}s" if r["wall_s"] else "-"
        count = "1" if name == "A" and today else str(len(devs))  # unpinned: the one GPU the runtime picks
        lines.append(f"{name:<6}{count:>5}{wall:>10}{sph:>12}{steady:>18}  "
                     + (", ".join(f"GPU {g}: {c}" for g, c in r["graded_per_gpu"].items()) or "-"))
    if today:  # the same GPU both times: what pinning costs, not a speed-up
        pace = f"wall B / wall A: {1 / speed_up:.2f} (one GPU both times)" if speed_up else "wall B / wall A: -"
    else:
        pace = f"speed-up B over A: {speed_up:.2f}x on {len(meta['gpus_b'])} GPUs" if speed_up else "speed-up: -"
    lines += [
        pace,
        "",
        f"perf tolerance: {tol}",
        "reference spread between the runs (largest first): "
        + ("; ".join(f"{lab} {test} {s * 100:.2f}%" for s, (lab, test) in noise[:6]) or "no reference timing"),
        "",
        *mc.table(diffs, gpus_a, gpus_b, a, b),
        "",
        *[f"  [{'ok' if ok else 'FAIL'}] {what}" for what, ok in checks],
        f"  [{'ok' if not any(d.problems for d in diffs) else 'FAIL'}] every student's score matches "
        "(correctness exactly, perf within the tolerance)",
        f"  [{'ok' if not any(gpus_a.values()) and not any(gpus_b.values()) else 'FAIL'}] every report names "
        "the GPU it ran on (results.json, gradebook, .batch.json, report.html)",
        "",
        *(["FAILURES:", *[f"  {f}" for f in fails]] if fails else ["multi-GPU check: PASS"]),
    ]
    data = {"labs": meta["labs"], "n": n, "cpus": meta["cpus"], "gpus_a": meta["gpus_a"], "gpus_b": meta["gpus_b"],
            "runs": rows, "speed_up": speed_up, "perf_tolerance": tol, "checks": dict(checks),
            **mc.to_json(diffs, spread),
            "gpu_problems": {"A": {s: p for s, p in gpus_a.items() if p}, "B": {s: p for s, p in gpus_b.items() if p}},
            "failures": fails, "pass": not fails}
    return "\n".join(lines) + "\n", data, 0 if not fails else 1


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, help="folder for the submissions, both batches and the summary")
    p.add_argument("--compare", type=Path, metavar="DIR", help="judge DIR (an earlier run's --out) again; runs nothing")
    p.add_argument("--labs", nargs="+", default=["03", "06"], help="lab selectors (default: 03 06)")
    p.add_argument("--n", type=int, default=MIN_N, help=f"number of submissions (default {MIN_N})")
    p.add_argument("--gpus", default="all", help="run B's --gpus (default: all)")
    p.add_argument("--single", help="run A's one GPU, nvidia-smi's index (default: the first of --gpus); "
                   "'default': run A is a batch without --gpus, to check that pinning changes no score")
    p.add_argument("-j", "--jobs", type=int, help="build slots of both runs (default: the batch's own)")
    p.add_argument("--preset", help="CMake preset (default: the batch's: 'default' with a GPU)")
    p.add_argument("--sanitizer", help="the batch's --sanitizer (default: each lab.toml's)")
    p.add_argument("--perf-tolerance", type=float, metavar="PCT",
                   help="a fixed tolerance: PCT%% of each lab's perf points (default: measured, see above)")
    p.add_argument("--no-warmup", action="store_true", help="skip the untimed --compile-only warm-up")
    args = p.parse_args(argv)
    if (args.out is None) == (args.compare is None):
        p.error("give --out (run) or --compare (judge an earlier run)")
    if args.compare is not None:
        work = args.compare.resolve()
        try:
            meta = json.loads((work / "devices.json").read_text())
        except (OSError, ValueError) as err:
            p.error(f"{work}/devices.json: {err}")
    else:
        if args.n < MIN_N:
            print(f"warning: --n {args.n} is below the {MIN_N} issue 14 asks for", flush=True)
        work = args.out.resolve()
        from grader.model.errors import GraderError

        try:
            meta = run_all(args, work)
        except GraderError as err:  # --gpus: a usage error (2) or no GPU (4)
            print(f"multi_gpu: {err}", file=sys.stderr)
            return int(err.code)
    text, data, rc = judge(work, meta, args.perf_tolerance)
    print("\n" + text, end="")
    (work / "multi-gpu.txt").write_text(text)
    (work / "multi-gpu.json").write_text(json.dumps(data, indent=2, default=str) + "\n")
    print(f"written: {work / 'multi-gpu.txt'}, {work / 'multi-gpu.json'}")
    return rc


if __name__ == "__main__":
    sys.exit(main())
