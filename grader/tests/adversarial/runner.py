"""The adversarial submissions: grade each one with the real command line and check that it is
classified as intended (used by test_adversarial.py for the GPU-free cases and by run-gpu for all).

Each case is a directory beside this file: a submission tree (labs/NN-slug/<file>.cu with one planted
misbehaviour, sometimes more files), or only the planted change as <file>.cu.patch against the lab's
solution or skeleton, and expect.toml:

  description = "..."           what the submission does
  how = "..."                   how the grader catches it
  needs_gpu = true | false      whether the case can only be told apart by running on a GPU
  lab = "03"                    the lab graded (default 03)
  patch_base = "solution"       what <file>.cu.patch applies to: "solution" (default) or "skeleton"
  args = ["--timeout", "20"]    extra `grade` arguments
  max_seconds = 300             the grade's global time limit (--max-seconds)
  full_size = true              graded at full size even when the suite runs with --small (timing cheats)
  generate = "oversize"         files made at run time instead of kept in the repository

  [[expect]]                    every one must hold
  test = "Suite.Test/*"         a glob over the lab's test names ("*": any)
  category = "timeout"          the category a matching test must have, or
  status = "passed"             the status it must have
  contains = "SIGSEGV"          text its message must contain
  match = "any" | "all"         whether one matching test suffices (default) or all must match
  absent = true                 no test may match the glob
  lab_message = "..."           text one of the lab's messages must contain
  implausible = "..."           text the perf test's implausible verdict must contain (no perf points)
  unsaid = "..."                text neither the grade's console nor its results may hold (a leak)
  gpu = true                    checked only where a GPU ran the tests
"""

from __future__ import annotations

import fnmatch
import json
import os
import shutil
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

CASES_DIR = Path(__file__).resolve().parent
ROOT = CASES_DIR.parents[2]
REPORT_FILES = ("results.json", "report.html", "junit.xml", "gradescope.json", "grades.csv")
CAP_SLACK_S = 180.0  # a build that started before the cap is not interrupted


@dataclass(frozen=True)
class Expectation:
    test: str = ""
    category: str = ""
    status: str = ""
    contains: str = ""
    match: str = "any"
    absent: bool = False
    lab_message: str = ""
    implausible: str = ""
    unsaid: str = ""
    gpu: bool = False

    def describe(self) -> str:
        if self.unsaid:
            return f"nothing says {self.unsaid[:30]!r}"
        if self.lab_message:
            return f"lab message ~ {self.lab_message[:40]!r}"
        if self.implausible:
            return f"{self.test}: implausible ~{self.implausible[:30]!r}"
        if self.absent:
            return f"no test {self.test}"
        what = self.category or self.status
        extra = f" ~{self.contains!r}" if self.contains else ""
        return f"{self.test}: {'all ' if self.match == 'all' else ''}{what}{extra}"


@dataclass
class Case:
    name: str
    dir: Path
    description: str
    needs_gpu: bool
    lab: str = "03"
    args: list[str] = field(default_factory=list)
    max_seconds: float = 300.0
    generate: str = ""
    patch_base: str = "solution"  # what the patch applies to: "solution" or "skeleton"
    how: str = ""
    full_size: bool = False  # graded at full size even under --small (its perf tests must run)
    expects: list[Expectation] = field(default_factory=list)

    def expected(self, gpu: bool = True) -> str:
        """The headline expectation, for the table (among those checked with or without a GPU)."""
        expects = [e for e in self.expects if gpu or not e.gpu]
        first = next((e for e in expects if e.category), None) or (expects[0] if expects else None)
        if first is None:
            return "-"
        if first.implausible:
            return "implausible"
        return first.category or first.status or ("ignored" if first.lab_message else "absent")


def load_case(path: Path) -> Case:
    data = tomllib.loads((path / "expect.toml").read_text())
    expects = [Expectation(**e) for e in data.get("expect", [])]
    return Case(
        name=path.name,
        dir=path,
        description=data.get("description", ""),
        needs_gpu=bool(data.get("needs_gpu", False)),
        lab=str(data.get("lab", "03")),
        args=[str(a) for a in data.get("args", [])],
        max_seconds=float(data.get("max_seconds", 300)),
        generate=data.get("generate", ""),
        patch_base=str(data.get("patch_base", "solution")),
        how=data.get("how", ""),
        full_size=bool(data.get("full_size", False)),
        expects=expects,
    )


def load_cases() -> list[Case]:
    return [load_case(p) for p in sorted(CASES_DIR.iterdir()) if (p / "expect.toml").is_file()]


PATCH = "vector_add.cu.patch"  # lab 03's; a case of another lab has <its student file>.patch


def case_lab(case: Case):
    """The Lab a case grades."""
    sys.path.insert(0, str(ROOT))
    from grader.model.labs import discover, select

    return select(discover(ROOT), [case.lab])[0]


def patch_of(case: Case) -> Path:
    return case.dir / f"{case_lab(case).student_files[0]}.patch"


from grader.authoring.patching import PatchError, apply_patch  # noqa: E402 - the one implementation, re-exported


def materialize(case: Case, dest: Path) -> Path:
    """A copy of the case's submission tree (links kept as links), with generated files made. A case
    whose student file differs from the lab's by a few lines stores only that difference (a patch)."""
    if dest.exists():
        shutil.rmtree(dest)
    lab = case_lab(case)
    file = lab.student_files[0]
    shutil.copytree(case.dir, dest, symlinks=True, ignore=shutil.ignore_patterns("expect.toml", "*.patch"))
    lab_dir = dest / "labs" / lab.name
    patch = patch_of(case)
    if patch.is_file():
        base_dir = (lab.solution_dir if case.patch_base == "solution" else lab.path)
        body = apply_patch((base_dir / file).read_text(), patch.read_text(), f"{case.name}/{patch.name}")
        lab_dir.mkdir(parents=True, exist_ok=True)
        (lab_dir / file).write_text(body)
    if case.generate == "oversize":
        lab_dir.mkdir(parents=True, exist_ok=True)
        body = (lab.solution_dir / file).read_text()
        pad = "// padding to make the file too large to accept\n" * 26_000  # about 1.2 MiB
        (lab_dir / file).write_text(body + pad)
    elif case.generate:
        raise ValueError(f"{case.name}: unknown generate = {case.generate!r}")
    return dest


@dataclass
class Graded:
    returncode: int
    seconds: float
    results: dict[str, Any] | None
    log: str
    missing_reports: list[str]


def grade_command(case: Case, submission: Path, out: Path, python: str = sys.executable,
                  preset: str | None = None, jobs: int | None = None, small: bool = False) -> list[str]:
    cmd = [python, "-m", "grader", "grade", case.lab, "--submission", str(submission), "--out", str(out),
           "--max-seconds", f"{case.max_seconds:g}"]
    if preset:
        cmd += ["--preset", preset]
    if jobs:
        cmd += ["-j", str(jobs)]
    # A case that needs its perf tests (timing cheats) runs at full size whatever --small says.
    if small and not case.full_size:
        cmd.append("--small")
    if not any(a.startswith("--sanitizer") for a in case.args):
        cmd += ["--sanitizer", "none"]  # only the cases about races and bad accesses need the tool
    return cmd + case.args


def grade(case: Case, submission: Path, out: Path, *, python: str = sys.executable, preset: str | None = None,
          jobs: int | None = None, env: dict[str, str] | None = None, timeout_s: float | None = None,
          small: bool = False) -> Graded:
    cmd = grade_command(case, submission, out, python, preset, jobs, small)
    start = time.monotonic()
    run_env = {**os.environ, **(env or {}), "PYTHONUNBUFFERED": "1", "NO_COLOR": "1"}
    limit = timeout_s or case.max_seconds + CAP_SLACK_S + 300
    try:
        proc = subprocess.run(cmd, cwd=ROOT, env=run_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              errors="replace", timeout=limit, check=False)
        code, log = proc.returncode, proc.stdout
    except subprocess.TimeoutExpired as err:
        out_text = err.stdout or ""
        log = out_text.decode(errors="replace") if isinstance(out_text, bytes) else out_text
        code, log = -9, log + f"\n[the grader itself did not finish in {limit:g} s]"
    seconds = time.monotonic() - start
    try:
        results = json.loads((out / "results.json").read_text())
    except (OSError, ValueError):
        results = None
    missing = [f for f in REPORT_FILES if not (out / f).is_file() or (out / f).stat().st_size == 0]
    return Graded(code, seconds, results, log, missing)


@dataclass
class Check:
    expectation: Expectation
    ok: bool
    got: str


def _lab(results: dict[str, Any] | None, lab: str) -> dict[str, Any] | None:
    if not results:
        return None
    for entry in results.get("labs", []):
        if f"{int(entry.get('number', -1)):02d}" == f"{int(lab):02d}":
            return entry
    return None


def _outcome(test: dict[str, Any]) -> str:
    status, category = test.get("status", "?"), test.get("category") or ""
    return status if status in ("passed", "skipped") and not category else (category or status)


def summarize(tests: list[dict[str, Any]]) -> str:
    counts = Counter(_outcome(t) for t in tests)
    return ", ".join(f"{k}" + (f"x{v}" if v > 1 else "") for k, v in counts.most_common(3)) or "no test"


def check(case: Case, graded: Graded, gpu: bool) -> list[Check]:
    lab = _lab(graded.results, case.lab)
    checks: list[Check] = []
    for e in case.expects:
        if e.gpu and not gpu:
            continue
        if e.unsaid:  # the console and results.json, which every other report is rendered from
            said = e.unsaid in graded.log or e.unsaid in json.dumps(graded.results or {})
            checks.append(Check(e, not said, "said" if said else "unsaid"))
            continue
        if lab is None:
            checks.append(Check(e, False, "no results.json"))
            continue
        tests = lab.get("tests", [])
        if e.lab_message:
            ok = any(e.lab_message in m for m in lab.get("messages", []))
            checks.append(Check(e, ok, "message found" if ok else "no such message"))
            continue
        if e.implausible:
            perfs = [t for t in tests if fnmatch.fnmatchcase(t.get("name", ""), e.test) and t.get("perf")]
            verdicts = [(t["perf"].get("implausible") or "") for t in perfs]
            ok = bool(perfs) and all(e.implausible in v for v in verdicts)
            checks.append(Check(e, ok, "implausible" if ok else (f"verdicts: {verdicts}" if perfs else f"no perf test {e.test}")))
            continue
        matching = [t for t in tests if fnmatch.fnmatchcase(t.get("name", ""), e.test)]
        if e.absent:
            checks.append(Check(e, not matching, "absent" if not matching else f"{len(matching)} such test(s)"))
            continue
        if not matching:
            checks.append(Check(e, False, f"no test {e.test}"))
            continue

        def fits(t: dict[str, Any], e: Expectation = e) -> bool:
            if e.category and (t.get("category") or "") != e.category:
                return False
            if e.status and t.get("status") != e.status:
                return False
            return not e.contains or e.contains in (t.get("message") or "")

        hits = [t for t in matching if fits(t)]
        # "all": every matching test that ran (a test that skipped itself, e.g. a large size in small
        # mode, neither counts for nor against it).
        ran = [t for t in matching if t.get("status") != "skipped" or fits(t)]
        ok = bool(hits) and (e.match != "all" or len(hits) == len(ran))
        checks.append(Check(e, ok, summarize(hits if ok else matching)))
    return checks


def cap_respected(case: Case, graded: Graded) -> bool:
    return graded.seconds <= case.max_seconds + CAP_SLACK_S


def _row(cells: list[str], widths: list[int]) -> str:
    return " | ".join(c.ljust(w) for c, w in zip(cells, widths))


def assign(cases: list[Case], workers: int, gpu: bool) -> list[list[Case]]:
    """Cases per worker: the GPU cases all on worker 0 (one GPU, clean timings), the others grouped by
    lab so that each worker builds the tests of as few labs as it can."""
    groups: list[list[Case]] = [[] for _ in range(max(1, workers))]
    cpu_workers = list(range(1, len(groups))) or [0]
    by_lab: dict[str, list[Case]] = {}
    for case in cases:
        if case.needs_gpu and gpu:
            groups[0].append(case)
        else:
            by_lab.setdefault(case.lab, []).append(case)
    for i, (_, lab_cases) in enumerate(sorted(by_lab.items(), key=lambda kv: -len(kv[1]))):
        groups[min(cpu_workers, key=lambda w: len(groups[w]))].extend(lab_cases)
    return groups


def main(argv: list[str] | None = None) -> int:
    """run-gpu OUTDIR [CASE...]: grade each case into OUTDIR/<case>/ and print case | expected | got | ok."""
    import argparse
    import tempfile
    from concurrent.futures import ThreadPoolExecutor

    sys.path.insert(0, str(ROOT))
    from grader.host.environment import choose_preset, probe_gpu

    parser = argparse.ArgumentParser(prog="run-gpu", description="grade the adversarial submissions")
    parser.add_argument("out", type=Path, help="directory for each case's reports and log")
    parser.add_argument("cases", nargs="*", help="case names (default: all)")
    parser.add_argument("--preset", help="CMake preset (default: the grader's choice)")
    parser.add_argument("-j", "--jobs", type=int, help="parallel compile jobs (shared by the workers)")
    parser.add_argument("--workers", type=int, default=1,
                        help="grade this many cases at a time, each worker in a build folder of its own; the "
                             "cases that need a GPU all go to one worker")
    parser.add_argument("--small", action="store_true",
                        help="grade with --small: large sizes and perf tests skip (quicker); cases marked full_size "
                             "(timing cheats) still run at full size")
    args = parser.parse_args(argv)

    gpu = probe_gpu()
    cases = [c for c in load_cases() if not args.cases or c.name in args.cases]
    unknown = set(args.cases) - {c.name for c in cases}
    if unknown:
        print(f"run-gpu: unknown case(s): {', '.join(sorted(unknown))}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    print(f"adversarial submissions: {len(cases)} case(s); {gpu.brief()}", flush=True)
    if not gpu.available:
        print("no GPU: the cases that need one are skipped (they run in ci/gpu-check on a GPU machine)", flush=True)
    preset = args.preset or choose_preset(gpu)
    workers = max(1, args.workers)
    jobs = max(1, (args.jobs or os.cpu_count() or 1) // workers)
    rows: dict[str, list[str]] = {}
    problems_of: dict[str, list[str]] = {}

    def one(case: Case, worker: int, tmp: Path) -> None:
        if case.needs_gpu and not gpu.available:
            rows[case.name] = [case.name, case.expected(), "skipped: no GPU", "-", "-"]
            return
        out = args.out / case.name
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        submission = materialize(case, tmp / case.name)
        print(f"--- {case.name} (worker {worker}): {case.description}", flush=True)
        env = {"CUDALAB_SUBMISSION_BUILD_DIR": str(ROOT / "build" / f"{preset}-adversarial-{worker}")}
        graded = grade(case, submission, out, preset=preset, jobs=jobs, small=args.small, env=env)
        (out / "grade.log").write_text(graded.log)
        checks = check(case, graded, gpu.available)
        problems = [f"{c.expectation.describe()}: got {c.got}" for c in checks if not c.ok]
        if graded.missing_reports:
            problems.append("missing reports: " + ", ".join(graded.missing_reports))
        if not cap_respected(case, graded):
            problems.append(f"took {graded.seconds:.0f} s, over its cap of {case.max_seconds:g} s")
        if graded.returncode not in (1, 3):  # failures are expected; 0, 2, 4 or a kill are not
            problems.append(f"grader exit code {graded.returncode}")
        got = checks[0].got if checks else "-"
        rows[case.name] = [case.name, case.expected(gpu.available), got, "ok" if not problems else "MISMATCH",
                           f"{graded.seconds:.0f} s"]
        problems_of[case.name] = problems
        for p in problems:
            print(f"    {case.name}: {p}", flush=True)
        if problems:
            print("    last lines of its log:\n" + "\n".join("      " + ln for ln in graded.log.splitlines()[-15:]),
                  flush=True)

    with tempfile.TemporaryDirectory(prefix="cudalab-adversarial-") as tmp:
        groups = assign(cases, workers, gpu.available)

        def run_group(worker: int) -> None:
            for case in groups[worker]:
                one(case, worker, Path(tmp))

        with ThreadPoolExecutor(max_workers=len(groups)) as pool:
            list(pool.map(run_group, range(len(groups))))
    ordered = [rows[c.name] for c in cases if c.name in rows]
    header = ["case", "expected", "got", "ok", "time"]
    widths = [max(len(r[i]) for r in ordered + [header]) for i in range(len(header))]
    lines = [_row(header, widths), _row(["-" * w for w in widths], widths)] + [_row(r, widths) for r in ordered]
    table = "\n".join(lines)
    print("\n" + table)
    failures = sum(1 for r in ordered if r[3] == "MISMATCH")
    ran = sum(1 for r in ordered if r[3] != "-")
    summary = (f"{ran - failures} of {ran} case(s) classified as intended"
               + (f"; {len(ordered) - ran} skipped (no GPU)" if len(ordered) > ran else ""))
    (args.out / "summary.txt").write_text(table + "\n" + summary + "\n")
    print("\n" + summary)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
