#!/usr/bin/env python3
"""Where a grade's time goes, per lab: prepare (intake, build, static checks), each test binary's run,
the reference's timing run, each compute-sanitizer tool, scoring, and the rest (configure, reports).

    bench/grading_time.py --out bench-out                     # every lab, each reference graded as a student
    bench/grading_time.py --next --first-failure 05 07 --out DIR  # a next grade; first failures in 05, 07
    bench/grading_time.py --solution --labs 10 11 --out DIR   # grade --solution instead
    bench/grading_time.py --from DIR/results.json             # the table of a grade already made
    bench/grading_time.py --root ../old --labs 11 --out DIR   # another checkout, graded by its own grader

"As a student" copies each reference file into a submission folder (labs/NN-slug/<file>) and grades it
with `grade --submission`: the student's own path, build apart, reference timed beside it. The table
comes from the grade's results.json (each lab's `seconds`, wall clock per stage); the whole run's wall
time is measured here, so "other" holds configuring, the health probe and writing the reports.

--next grades the same files again after an edit (each file touched, so it compiles again), as a
student's next `make grade` would: the reference's kept timings are reused when the GPU still runs the
libraries as fast (grader/execute/reference_cache.py); the first grade starts without any.
--first-failure grades, lab by lab, one bug of the lab's last task (its mutants), and measures the
seconds from the start of `grade NN` to the first failing test said on the console (a whole grade, the
sanitizer stage included: it starts beside the correctness tests, so it may delay the first failure).
Nothing here asserts a time: it measures.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from grader.execute.sanitizer import TOOLS  # noqa: E402 - after the tree is on the path
from grader.grade.pipeline import SANITIZE_BESIDE  # noqa: E402


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


ORDER = ("prepare", "run student", "run hidden", "run solution", "reference", *TOOLS, "sanitize", SANITIZE_BESIDE,
         "score")


def row_total(row: dict[str, float]) -> float:
    """A lab's seconds: its stages', where the sanitize stage counts its wall time (the tools run side by
    side, so their own columns overlap) when the grader recorded it, else each tool's; a stage that ran
    beside the lab's first run counts nothing of its own (the run's seconds hold it)."""
    if SANITIZE_BESIDE in row:
        return sum(v for k, v in row.items() if k not in TOOLS and k != SANITIZE_BESIDE)
    if "sanitize" in row:
        return sum(v for k, v in row.items() if k not in TOOLS)
    return sum(row.values())


def table(results: dict[str, Any], wall_s: float | None) -> str:
    labs = results.get("labs", [])
    cols = [lab_cols for lab_cols in (columns(lab) for lab in labs)]
    used = [c for c in ORDER if any(c in row for row in cols)]
    used += sorted({k for row in cols for k in row} - set(used))
    head = ["lab"] + used + ["total"]
    rows = []
    for lab, row in zip(labs, cols):
        rows.append([lab["name"]] + [f"{row[c]:.1f}" if c in row else "" for c in used] + [f"{row_total(row):.1f}"])
    sums = {c: sum(row.get(c, 0.0) for row in cols) for c in used}
    total = sum(row_total(row) for row in cols)
    rows.append(["all labs"] + [f"{sums[c]:.1f}" for c in used] + [f"{total:.1f}"])
    widths = [max(len(str(r[i])) for r in [head] + rows) for i in range(len(head))]
    lines = ["  ".join(str(v).ljust(w) if i == 0 else str(v).rjust(w) for i, (v, w) in enumerate(zip(r, widths)))
             for r in [head] + rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    gpu = results.get("run", {}).get("gpu") or {}
    gpu = gpu.get("gpu_name", "no GPU") if isinstance(gpu, dict) else str(gpu)
    lines.append(f"seconds of wall time per stage; GPU: {gpu}"
                 + ("; sanitize: the tools' stage, side by side (each tool's own run in its column)"
                    if "sanitize" in used else "")
                 + (f"; {SANITIZE_BESIDE}: the stage beside the correctness tests (inside run's seconds)"
                    if SANITIZE_BESIDE in used else ""))
    if wall_s is not None:
        lines.append(f"whole run: {wall_s:.1f} s wall, of which {max(0.0, wall_s - total):.1f} s outside the labs' "
                     "stages (configure, health probe, reports)")
    peaks = [(lab["name"], max(lab["host_memory_mib"].values())) for lab in labs if lab.get("host_memory_mib")]
    if peaks:  # what each lab's host memory limit is set from (lab.toml's [lab] max_host_memory_mib)
        lines.append("peak host memory of a test binary's runs, MiB: "
                     + ", ".join(f"{name[:2]} {mib:,.0f}" for name, mib in peaks))
    return "\n".join(lines)


def grade_once(args: argparse.Namespace, submission: Path | None, out: Path, extra: list[str]) -> tuple[int, float]:
    cmd = [sys.executable, "-m", "grader", "grade", "--out", str(out / "report"), *extra]
    if args.preset:
        cmd += ["--preset", args.preset]
    if submission is None:
        cmd.append("--solution")
    else:
        cmd += ["--submission", str(submission)]
    cmd += args.labs
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with open(out / "grade.log", "w") as log:
        rc = subprocess.run(cmd, cwd=args.root, stdout=log, stderr=subprocess.STDOUT, check=False).returncode
    return rc, time.monotonic() - started


def forget_reference_timings(root: Path) -> int:
    """A first grade: no reference timing kept from an earlier one (in any preset's build)."""
    gone = 0
    for path in (root / "build").glob("*/bin/.*.timings.json"):
        path.unlink()
        gone += 1
    return gone


def touch_files(submission: Path) -> None:
    """A student's edit: each file changes (a comment at its end), so each lab compiles again."""
    for path in submission.glob("labs/*/*"):
        if path.is_file():
            path.write_text(path.read_text() + "\n// edited\n")


def report(out: Path, wall: float, rc: int, title: str) -> str | None:
    results_path = out / "report" / "results.json"
    if not results_path.is_file():
        print(f"the grade wrote no results.json (exit code {rc}); see {out / 'grade.log'}", file=sys.stderr)
        return None
    results = json.loads(results_path.read_text())
    text = f"{title}\n" + table(results, wall)
    text += "\nscores: " + ", ".join(f"{lab['name'][:2]} {lab['score']:g}/{lab['max_score']:g}" for lab in results["labs"])
    return text


def last_task_bug(lab: Any) -> Any | None:
    """A bug of the lab's last task that has one (its failure comes late in the grade: the worst case)."""
    from grader.authoring.mutation import load_mutants

    bugs = [m for m in load_mutants(lab) if m.kind == "bug"]
    for task in reversed(lab.tasks):
        mine = [m for m in bugs if m.task == task.id]
        if mine:
            return mine[0]
    return bugs[0] if bugs else None


FAILED_LINE = re.compile(r"^\s*!! (\S+) failed")
RUNNING_LINE = re.compile(r"^\s*\.\. running ")


def first_failure_command(lab: str, submission: Path, report: Path, preset: str | None) -> list[str]:
    """The grade a student runs on their file, sanitizer and all: its tools start beside the correctness
    tests, so they may delay the first failure, and the measure counts them."""
    cmd = [sys.executable, "-m", "grader", "grade", lab[:2], "--submission", str(submission), "--out", str(report),
           "--reuse-reference"]
    return cmd + (["--preset", preset] if preset else [])


def first_failures(args: argparse.Namespace, selectors: list[str], out: Path, submission: Path | None) -> str:
    """Per lab: seconds from the start of `grade NN --submission` to the first failing test on the console.

    With the bench's submission (the references graded above), the bug is written into it, as a student
    edits the file they graded before, and the file is put back afterwards: the submission's build is then
    configured already, as in a student's loop. Without one, each bug gets a fresh submission folder (its
    build configured first, about 3 s more)."""
    from grader.authoring.mutation import mutated_source
    from grader.model.labs import discover, select

    labs = select(discover(args.root), selectors) if selectors else discover(args.root)
    rows = [("lab", "bug", "tests start", "first failure", "test", "whole grade")]
    for lab in labs:
        bug = last_task_bug(lab)
        if bug is None:
            continue
        (out / lab.name).mkdir(parents=True, exist_ok=True)
        where = submission if submission is not None and (submission / "labs" / lab.name).is_dir() \
            else out / lab.name / "submission"
        dest = where / "labs" / lab.name / lab.student_files[0]
        before = dest.read_text() if dest.is_file() else None
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(mutated_source(lab, bug))
        cmd = first_failure_command(lab.name, where, out / lab.name / "report", args.preset)
        started = time.monotonic()
        first: tuple[float, str] | None = None
        tests_start: float | None = None
        try:
            with open(out / lab.name / "grade.log", "w") as log:
                proc = subprocess.Popen(cmd, cwd=args.root, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                        text=True)
                assert proc.stdout is not None
                for line in proc.stdout:
                    log.write(f"{time.monotonic() - started:7.2f} {line}")
                    if tests_start is None and RUNNING_LINE.match(line):
                        tests_start = time.monotonic() - started
                    m = FAILED_LINE.match(line)
                    if first is None and m:
                        first = (time.monotonic() - started, m.group(1))
                proc.wait()
        finally:
            if before is not None:
                dest.write_text(before)
        total = time.monotonic() - started
        rows.append((lab.name, bug.name, f"{tests_start:.1f} s" if tests_start is not None else "-",
                     f"{first[0]:.1f} s" if first else "none said", first[1] if first else "", f"{total:.1f} s"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "first failing test on the console, from the start of `grade NN --submission` (a bug of the lab's " \
           "last task; tests start: the lab's first test binary starts):\n" + "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--labs", nargs="*", default=[], help="lab selectors (default: all)")
    ap.add_argument("--solution", action="store_true", help="grade --solution instead of the references as a student")
    ap.add_argument("--next", action="store_true",
                    help="then grade the edited files again, as a student's next grade (reference timings kept)")
    ap.add_argument("--first-failure", nargs="*", metavar="LAB", default=None,
                    help="then, lab by lab (these labs, or every one), the seconds until a bug's first failing "
                         "test is said")
    ap.add_argument("--from", dest="from_json", type=Path, help="print the table of this results.json only")
    ap.add_argument("--out", type=Path, default=ROOT / "build" / "bench-grading-time")
    ap.add_argument("--preset", default=None)
    ap.add_argument("--root", type=Path, default=ROOT, help="the tree to grade (another checkout: its own grader)")
    args = ap.parse_args(argv)
    if args.from_json is not None:
        print(table(json.loads(args.from_json.read_text()), None))
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    submission = None if args.solution else submission_of_references(args.root, args.labs, args.out / "submission")
    extra = [] if args.solution else ["--reuse-reference"]
    if not args.solution:
        forget_reference_timings(args.root)
    rc, wall = grade_once(args, submission, args.out, extra)
    text = report(args.out, wall, rc, "first grade (every build cold, the reference timed):")
    if text is None:
        return 2
    texts = [text]
    if args.next and submission is not None:
        touch_files(submission)
        rc, wall = grade_once(args, submission, args.out / "next", extra)
        text = report(args.out / "next", wall, rc, "next grade (each file edited, the reference's timings kept when "
                                                    "the libraries ran as fast):")
        texts.append(text or f"next grade: no results.json (exit code {rc})")
    if args.first_failure is not None and not args.solution:
        texts.append(first_failures(args, args.first_failure or args.labs, args.out / "first-failure", submission))
    text = "\n\n".join(texts)
    (args.out / "grading-time.txt").write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
