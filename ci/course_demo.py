#!/usr/bin/env python3
"""A small course graded end to end (issue 15): a roster, a course file with a late policy, and a
batch of lab 03 submissions of every kind the course features meet. Then it checks what the batch
wrote and prints the class's story (the gradebook's rows and the similarity report's pairs).

    python3 ci/course_demo.py --out DIR [--preset P]

The class (due date 2026-11-20 23:59 UTC; grace 15 min, 10 % a day started, cap 50 %, one late day each):
  ada.lovelace  a git checkout named by her alias `ada-gh`, the reference, committed 20 h late: her late
                day pays, no penalty
  bob           `bobby.zip` (his alias): ada's file with new names, comments and order, the archive's
                time 2 days 3 hours late: one late day, then 2 days at 10 % = 20 % off; flagged as a copy
  cyd           an independent correct solution; the roster's submitted_at is 10 min late (in the grace)
  dan           the skeleton as handed out, a plain folder: no trustworthy time, so no penalty
  fran          two of the lab's tasks done; 2 days late by the roster, with a 3-day extension: on time
  eve           on the roster, handed in nothing: a `missing` row
  zed.tar.gz    on no roster: listed as unmatched, never graded
DIR gets roster.csv, course.toml, submissions/ and out/ (the batch). Exit 0 when every check holds,
1 otherwise. Without a GPU the structure is checked and the score checks are skipped (said so).
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

LAB = "03-vector-add"
FILE = "vector_add.cu"
DUE = datetime(2026, 11, 20, 23, 59, tzinfo=timezone.utc)
COURSE = f"""[policy]
grace_minutes = 15
penalty_per = "day"
penalty_percent = 10
max_penalty_percent = 50
late_days = 1

[due]
"03" = "{DUE.isoformat()}"

[[extension]]
student = "fran"
lab = "03"
days = 3
"""


def iso(t: datetime) -> str:
    return t.isoformat()


def partial(skeleton: str) -> str:
    """The skeleton with its first two TODOs done (the kernel and its launch), the rest left as handed out."""
    done = skeleton
    for todo, code in (
        ("  // TODO(student): global index of this thread; add one element if it is inside the array (about 2 lines).\n",
         "  const int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) c[i] = a[i] + b[i];\n"),
        ("  // TODO(student): launch vector_add_kernel with enough blocks of kBlock threads to cover n, then\n"
         "  //                check the launch with CUDA_CHECK_LAST() (about 3 lines).\n",
         "  vector_add_kernel<<<(n + kBlock - 1) / kBlock, kBlock>>>(d_a, d_b, d_c, n);\n  CUDA_CHECK_LAST();\n"),
    ):
        assert todo in done, "the skeleton's first TODOs moved: update ci/course_demo.py"
        done = done.replace(todo, code, 1)
    return done


def make_class(work: Path) -> None:
    from grader.tests.test_similarity import disguise  # what a student who copied does to the file

    skeleton = (ROOT / "labs" / LAB / FILE).read_text()
    reference = (ROOT / "solutions" / LAB / FILE).read_text()
    independent = (ROOT / "grader" / "tests" / "fixtures" / "similarity" / "vector_add_alt.cu").read_text()
    subs = work / "submissions"
    shutil.rmtree(subs, ignore_errors=True)
    subs.mkdir(parents=True)

    ada = subs / "ada-gh"  # a git checkout: the last commit's committer date is the submission time
    ada.mkdir()
    (ada / FILE).write_text(reference)
    when = iso(DUE + timedelta(hours=20))
    env = {**os.environ, "GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when, "GIT_AUTHOR_NAME": "Ada",
           "GIT_AUTHOR_EMAIL": "ada@uni.edu", "GIT_COMMITTER_NAME": "Ada", "GIT_COMMITTER_EMAIL": "ada@uni.edu"}
    for cmd in (["git", "init", "-q"], ["git", "add", FILE], ["git", "commit", "-q", "-m", "lab 03"]):
        subprocess.run(cmd, cwd=ada, env=env, check=True)

    with zipfile.ZipFile(subs / "bobby.zip", "w") as z:  # an archive: its time as received
        z.writestr(FILE, disguise(reference))
    late = (DUE + timedelta(days=2, hours=3)).timestamp()
    os.utime(subs / "bobby.zip", (late, late))

    for name, text in (("cyd", independent), ("dan", skeleton), ("fran", partial(skeleton))):
        (subs / name).mkdir()
        (subs / name / FILE).write_text(text)

    with tarfile.open(subs / "zed.tar.gz", "w:gz") as t:
        data = reference.encode()
        info = tarfile.TarInfo(FILE)
        info.size = len(data)
        t.addfile(info, io.BytesIO(data))

    rows = [("ada.lovelace", "Ada Lovelace", "ada@uni.edu", "ada-gh", ""),
            ("bob", "Bob Byron", "bob@uni.edu", "bobby", ""),
            ("cyd", "Cyd Charisse", "cyd@uni.edu", "", iso(DUE + timedelta(minutes=10))),
            ("dan", "Dan Dare", "dan@uni.edu", "", ""),
            ("eve", "Eve Online", "eve@uni.edu", "", ""),
            ("fran", "Fran Allen", "fran@uni.edu", "", iso(DUE + timedelta(days=2)))]
    with open(work / "roster.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["id", "name", "email", "aliases", "submitted_at"])
        w.writerows(rows)
    (work / "course.toml").write_text(COURSE)


class Checks:
    def __init__(self) -> None:
        self.failed: list[str] = []
        self.lines: list[str] = []

    def __call__(self, what: str, ok: bool, got: object = "") -> None:
        self.lines.append(f"  [{'ok' if ok else 'FAIL'}] {what}" + ("" if ok else f" (got {got})"))
        if not ok:
            self.failed.append(what)


def num(cell: str | None) -> float:
    try:
        return float(cell or "nan")
    except ValueError:
        return float("nan")


def check(out: Path, stdout: str, gpu: bool) -> Checks:
    c = Checks()
    with open(out / "gradebook.csv", newline="") as f:
        book = {r["student"]: r for r in csv.DictReader(f)}
    c("every roster student has a gradebook row, and nobody else", sorted(book) ==
      ["ada.lovelace", "bob", "cyd", "dan", "eve", "fran"], sorted(book))
    c("eve (no submission) is missing with 0", book.get("eve", {}).get("status") == "missing"
      and book["eve"].get("total") == "0", book.get("eve"))
    c("zed.tar.gz (on no roster) is listed as not graded", "not graded: zed.tar.gz" in stdout)
    c("ada's submission (her alias) is under her roster id", (out / "ada.lovelace").is_dir())
    ada, bob, cyd, dan, fran = (book.get(s, {}) for s in ("ada.lovelace", "bob", "cyd", "dan", "fran"))

    def late(row: dict[str, str]) -> dict[str, str]:  # what a failure shows: the lab's late columns
        return {k: v for k, v in row.items() if k.startswith(LAB) and ":" not in k} | {"status": row.get("status", "")}

    source, days = f"{LAB} time source", f"{LAB} late days"
    c("ada: the git commit's time, 20 h late: her 1 late day", ada.get(source) == "git commit"
      and ada.get(days) == "1", late(ada))
    c("bob: the archive's time, 2 days 3 hours late: his 1 late day", bob.get(source) == "archive mtime"
      and bob.get(days) == "1", late(bob))
    c("cyd: the roster's time, inside the grace period", cyd.get(source) == "submitted_at column"
      and cyd.get(days) == "0", late(cyd))
    c("dan: a plain folder has no trustworthy time", dan.get(source) == "unknown" and dan.get(days) == "0", late(dan))
    c("fran: 2 days late by the roster, on time by her extension", fran.get(source) == "submitted_at column"
      and fran.get(days) == "0", late(fran))
    if gpu:  # without a GPU nothing is graded, so there is no score to take a penalty from
        c("every submission is graded", all(r.get("status") == "graded" for r in (ada, bob, cyd, dan, fran)),
          [r.get("status") for r in (ada, bob, cyd, dan, fran)])
        c("bob loses 20 % of his raw score (2 days past his late day, 10 % each)",
          abs(num(bob.get(f"{LAB} penalty")) - 0.2 * num(bob.get(f"{LAB} raw"))) < 0.01, late(bob))
        c("nobody else loses a point", all(num(r.get(f"{LAB} penalty")) == 0 for r in (ada, cyd, dan, fran)),
          [r.get(f"{LAB} penalty") for r in (ada, cyd, dan, fran)])
        for s, row in (("ada.lovelace", ada), ("bob", bob), ("cyd", cyd), ("dan", dan), ("fran", fran)):
            final, raw, pen = num(row.get(LAB)), num(row.get(f"{LAB} raw")), num(row.get(f"{LAB} penalty"))
            c(f"{s}: final = raw - penalty", abs(final - (raw - pen)) < 0.01, late(row))
        c("the correct solutions earn every correctness point (raw >= 90)",
          all(num(r.get(f"{LAB} raw")) >= 90 for r in (ada, bob, cyd)), [r.get(f"{LAB} raw") for r in (ada, bob, cyd)])
        c("the partial one scores between the skeleton and the solutions",
          num(dan.get(f"{LAB} raw")) < num(fran.get(f"{LAB} raw")) < num(cyd.get(f"{LAB} raw")),
          [r.get(f"{LAB} raw") for r in (dan, fran, cyd)])
        bob_report = (out / "bob" / "report.html").read_text() if (out / "bob" / "report.html").is_file() else ""
        c("bob's report says how his penalty was computed", "Due date." in bob_report)
    for name in ("gradebook-canvas.csv", "gradebook-moodle.csv", "class-summary.html"):
        c(f"{name} written", (out / name).is_file() and (out / name).stat().st_size > 0)
    try:
        sim = json.loads((out / "similarity.json").read_text())
    except (OSError, ValueError) as err:
        c("similarity.json written", False, err)
        return c
    if sim.get("unavailable"):
        c("similarity compared the class (copydetect installed)", False, sim["unavailable"])
        return c
    pairs = [{p["a"], p["b"]} for lab in sim["labs"] for p in lab["top"]]
    c("similarity flags ada and bob (a disguised copy)", {"ada.lovelace", "bob"} in pairs, pairs)
    c("similarity flags nobody with cyd (independent)", not any("cyd" in p for p in pairs), pairs)
    summary = (out / "class-summary.html").read_text()
    c("the class summary links the similarity report", "similarity.html" in summary)
    return c


def story(out: Path, sim_path: Path) -> list[str]:
    """The class summary's numbers and the gradebook, as an instructor reads them."""
    with open(out / "gradebook.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    cols = ["student", "name", "status", f"{LAB} raw", f"{LAB} penalty", f"{LAB} late days", LAB,
            f"{LAB} time source", f"{LAB} submitted"]
    head = ["student", "name", "status", "raw", "penalty", "late days", "final", "time source", "submitted"]
    cells = [[str(r.get(k, "")) for k in cols] for r in rows]
    widths = [max(len(x) for x in col) for col in zip(head, *cells)]
    fmt = lambda xs: "  ".join(x.ljust(w) for x, w in zip(xs, widths)).rstrip()  # noqa: E731
    lines = [fmt(head), fmt(["-" * w for w in widths]), *(fmt(x) for x in cells)]
    if sim_path.is_file():
        sim = json.loads(sim_path.read_text())
        for lab in sim["labs"]:
            lines.append(f"similarity {lab['lab']}: {lab['compared']} files compared, {lab['flagged']} pair(s) "
                         f"at or above {sim['threshold']:.0%}: "
                         + ("; ".join(f"{p['a']} ~ {p['b']} {p['similarity']:.0%}" for p in lab["top"]) or "none"))
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, required=True, help="work folder (roster, course file, submissions, out/)")
    p.add_argument("--preset", help="CMake preset (default: the batch's)")
    args = p.parse_args(argv)
    from grader.host.environment import probe_gpu

    work = args.out.resolve()
    make_class(work)
    out = work / "out"
    shutil.rmtree(out, ignore_errors=True)
    cmd = [sys.executable, "-m", "grader", "batch", str(work / "submissions"), "03", "--out", str(out),
           "--roster", str(work / "roster.csv"), "--course", str(work / "course.toml")]
    if args.preset:
        cmd += ["--preset", args.preset]
    print("$ " + " ".join(cmd), flush=True)
    proc = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=False)
    (work / "batch.log").write_text(proc.stdout)
    print("\n".join(proc.stdout.splitlines()[-25:]))
    print(f"grader batch exit code {proc.returncode}")
    if not (out / "gradebook.csv").is_file():
        print("course demo: FAIL, the batch wrote no gradebook.csv")
        return 1
    gpu = probe_gpu().available
    checks = check(out, proc.stdout, gpu)
    lines = ["course demo (lab 03, a roster of 6, course.toml with a late policy):", *story(out, out / "similarity.json"),
             "", *checks.lines,
             *([] if gpu else ["  (no GPU: the score checks were skipped)"]),
             "course demo: " + ("PASS" if not checks.failed else f"FAIL ({len(checks.failed)} check(s))")]
    text = "\n".join(lines) + "\n"
    (work / "course.txt").write_text(text)
    print("\n" + text, end="")
    return 0 if not checks.failed else 1


if __name__ == "__main__":
    sys.exit(main())
