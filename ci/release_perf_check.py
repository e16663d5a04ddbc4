#!/usr/bin/env python3
"""Does a student release score perf points as the instructor's tree does? (ci/gpu-check's release stage)

On this machine's GPU, in one run:
  1. `grader release` with each reference compiled for this GPU's architecture (reference/);
  2. every lab's reference file copied into the release as the student's file, the release graded in
     full (`grade`, sanitizers and all): every lab must score its full points;
  3. the instructor's tree graded with `grade --solution` (or its results.json given with --solution-results);
  4. a correct but slow variant, lab 05's matmul_fast running the tiled kernel, graded in both trees.
Each perf test's points in the release must lie within --tolerance (1 point) of the instructor's tree.
Prints a table; exits 1 when a check fails, 3 when a step could not run.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

SLOW_LAB = "05-tiled-matmul"
SLOW_FILE = "matmul.cu"
# The fast kernel's entry point, made to run the tiled kernel: correct, about 5x slower than the reference.
SLOW_ENTRY = re.compile(r"(void matmul_fast\(const float\* d_a, const float\* d_b, float\* d_c, int m, int n, int k\) \{\n)")


def sh(cmd: list[str], cwd: Path, log: Path, env: dict[str, str] | None = None) -> int:
    print("$", " ".join(cmd), f"(in {cwd})", flush=True)
    with log.open("a") as f:
        f.write("$ " + " ".join(cmd) + "\n")
        f.flush()
        return subprocess.run(cmd, cwd=cwd, stdout=f, stderr=subprocess.STDOUT, check=False,
                              env={**os.environ, **env} if env else None).returncode


def gpu_arch() -> str:
    out = subprocess.run(["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"], capture_output=True,
                         text=True, check=False).stdout.split()
    if not out:
        raise SystemExit("release_perf_check: no GPU (nvidia-smi lists none)")
    return out[0].replace(".", "")


def perf_points(results: Path) -> dict[str, dict]:
    """{lab: {"score", "max", "perf": {test: (earned, points, ratio to the reference)}, "messages"}}."""
    from grader.model.results import Results

    return {lab.name: {"score": lab.score, "max": lab.max_score, "messages": lab.messages,
                       "perf": {t.name: (t.perf.earned, t.perf.points, t.perf.ratio_to_reference)
                                for t in lab.tests if t.perf is not None and t.perf.points}}
            for lab in Results.load(results).labs}


def slow_variant(solution: Path, dest: Path) -> Path:
    text = solution.read_text()
    new, n = SLOW_ENTRY.subn(r"\1  matmul_tiled(d_a, d_b, d_c, m, n, k);  // the slow variant: tiled, not fast\n"
                             r"  return;\n", text)
    if n != 1:
        raise SystemExit(f"release_perf_check: matmul_fast's entry not found in {solution}")
    dest.mkdir(parents=True, exist_ok=True)
    (dest / SLOW_FILE).write_text(new)
    return dest / SLOW_FILE


def compare(name: str, release: dict, instructor: dict, tolerance: float, full: bool) -> tuple[list[str], int]:
    rows, bad = [], 0
    for lab in sorted(set(release) | set(instructor)):
        r, i = release.get(lab), instructor.get(lab)
        if r is None or i is None:
            rows.append(f"{name:9} {lab:22} missing in {'the release' if r is None else 'the instructor tree'}")
            bad += 1
            continue
        score_ok = r["score"] >= r["max"] - 1e-6 if full else True
        bad += not score_ok
        rows.append(f"{name:9} {lab:22} release {r['score']:6.2f}/{r['max']:g}   instructor {i['score']:6.2f}/"
                    f"{i['max']:g}{'' if score_ok else '   NOT FULL'}")
        for test in sorted(set(r["perf"]) | set(i["perf"])):
            re_, ie = r["perf"].get(test), i["perf"].get(test)
            if re_ is None or ie is None:
                rows.append(f"{'':9}   {test:44} only in {'the instructor tree' if re_ is None else 'the release'}")
                bad += 1
                continue
            diff = re_[0] - ie[0]
            ok = abs(diff) <= tolerance
            bad += not ok
            ratio = f"{re_[2]:.2f}x" if re_[2] else "-"
            rows.append(f"{'':9}   {test:44} {re_[0]:5.2f} vs {ie[0]:5.2f} of {re_[1]:g}  (release ratio {ratio})"
                        f"{'' if ok else '   DIFFERS by more than ' + str(tolerance)}")
        if not r["perf"]:
            rows += [f"{'':9}   note: {m}" for m in r["messages"] if "reference" in m]
    return rows, bad


def main() -> int:
    from grader.model.results import ResultsError

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--preset", default="default")
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--solution-results", type=Path, help="a results.json of grade --solution from this run")
    ap.add_argument("--tolerance", type=float, default=1.0)
    ap.add_argument("--labs", nargs="*", default=[], help="lab selectors (default: all)")
    ap.add_argument("-j", "--jobs", type=int, default=None)
    args = ap.parse_args()
    root = Path(__file__).resolve().parent.parent
    work = args.work.resolve()
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    log = work / "release-perf.log"
    py = args.python
    jobs = ["-j", str(args.jobs)] if args.jobs else []
    arch = gpu_arch()
    rel = work / "release"
    if sh([py, "-m", "grader", "release", "--out", str(rel), "--reference-archs", arch, "--no-verify", *jobs],
          root, log):
        print(f"release_perf_check: the release could not be made (see {log})")
        return 3
    for lab_dir in sorted((root / "solutions").iterdir()):
        for src in lab_dir.glob("*.cu"):
            if (rel / "labs" / lab_dir.name / src.name).is_file():  # the student's file: the reference's twin
                shutil.copyfile(src, rel / "labs" / lab_dir.name / src.name)
    grade = [py, "-m", "grader", "grade", *args.labs, "--preset", args.preset, *jobs]
    sh(grade + ["--out", str(work / "release-grade")], rel, log)
    solution_results = args.solution_results
    if solution_results is None or not solution_results.is_file():
        sh([py, "-m", "grader", "grade", "--solution", *args.labs, "--preset", args.preset, *jobs,
            "--out", str(work / "solution-grade")], root, log)
        solution_results = work / "solution-grade" / "results.json"
    variant = slow_variant(root / "solutions" / SLOW_LAB / SLOW_FILE, work / "variant" / "labs" / SLOW_LAB)
    # The variant's submission build in this check's own folder: gpu-check's timing stage grades submissions
    # in build/<preset>-submission, and the two may run side by side.
    sh([py, "-m", "grader", "grade", SLOW_LAB[:2], "--preset", args.preset, "--submission", str(work / "variant"),
        *jobs, "--out", str(work / "variant-instructor")], root, log,
       env={"CUDALAB_SUBMISSION_BUILD_DIR": str(work / "variant-build")})
    shutil.copyfile(variant, rel / "labs" / SLOW_LAB / SLOW_FILE)
    sh([py, "-m", "grader", "grade", SLOW_LAB[:2], "--preset", args.preset, *jobs,
        "--out", str(work / "variant-release")], rel, log)
    try:
        rows, bad = compare("reference", perf_points(work / "release-grade" / "results.json"),
                            perf_points(solution_results), args.tolerance, full=True)
        vrows, vbad = compare("slow 05", perf_points(work / "variant-release" / "results.json"),
                              perf_points(work / "variant-instructor" / "results.json"), args.tolerance, full=False)
    except (OSError, ValueError, KeyError, ResultsError) as err:
        print(f"release_perf_check: a grade wrote no usable results.json ({err}); see {log}")
        return 3
    table = "\n".join(rows + vrows)
    verdict = "OK" if bad + vbad == 0 else f"FAILED ({bad + vbad} check(s))"
    text = (f"release perf check on sm_{arch}: each reference file graded in a release (compiled references) "
            f"against the instructor's tree; perf points within {args.tolerance:g}\n{table}\nrelease perf check: {verdict}\n")
    (work / "release-perf.txt").write_text(text)
    print(text)
    return 0 if bad + vbad == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
