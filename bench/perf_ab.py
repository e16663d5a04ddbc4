#!/usr/bin/env python3
"""The references' perf at two revisions, side by side on one GPU: did a change move a ratio?

    python3 bench/perf_ab.py --base REV --out DIR [--head REV] [--labs 08 ...] [--rounds 3] [--preset P]
                             [-j J] [--tolerance PCT] [--timeout S]
    python3 bench/perf_ab.py --compare DIR [--tolerance PCT]   # judge what a run left in DIR again, no GPU

ci/perf-baseline.json holds ratios recorded on another day; the same ratio on the same GPU model can move
a few per cent from day to day, and more for calls of a few microseconds. This measures two trees in
the same hour on the same GPU instead:

  trees   base: `git archive REV` into DIR/trees/base. head: this checkout as it is (uncommitted changes
          included, built in build/<preset>), or --head REV into DIR/trees/head
  build   each tree's reference test binaries (labNN_solution) with the preset, both trees at once
  rounds  lab by lab, both trees one after the other, the order swapped every round; each binary runs its
          perf tests only (--gtest_filter='*Perf*', full size), its gtest JSON kept as
          DIR/runs/<tree>-<lab>-<round>.json
  judge   each perf test's headline ratio (to the library, else over the serial version; the one the
          gpu-check summary shows) in every round, its median per tree, and head / base. A head more than
          the tolerance (default 2 %) below base is listed as below, with the spread of each tree's own
          rounds beside it: a change inside that spread is noise, not a regression. Beside the ratio, the
          change in the reference's own median time (impl): a ratio can fall because the library got
          faster under a changed protocol while the reference did not get slower, and the table says which.

DIR gets perf-ab.txt, perf-ab.json, the runs and the build logs. Exit 0 when no ratio is below, 1 when
one is, 2 for a usage error, 3 when nothing was built or no perf test timed anything, 4 without a GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tarfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from grader.build.cmake import CMakeBuilder  # noqa: E402
from grader.host.environment import choose_preset, git_commit, probe_gpu  # noqa: E402
from grader.model.errors import GraderError  # noqa: E402
from grader.execute.gtest import GtestError, load_report  # noqa: E402
from grader.model.labs import LabError, discover, select  # noqa: E402
from grader.model.results import Status  # noqa: E402

TREES = ("base", "head")
RUN_NAME = re.compile(r"(?P<tree>[a-z]+)-(?P<lab>\d+)-(?P<round>\d+)\.json$")
# The harness reads these to pick small mode and to echo a nonce; a perf comparison runs at full size.
HARNESS_VARIABLES = ("CUDALAB_SMALL", "CUDALAB_RUN_NONCE")
MARKER = ".perf-ab-commit"


class PerfAbError(Exception):
    """A usage error: its message says what to fix."""


@dataclass
class Row:
    test: str
    lab: str
    base: list[float] = field(default_factory=list)  # the headline ratio of each round
    head: list[float] = field(default_factory=list)
    verdict: str = ""  # "ok", "below", or "only in base" / "only in head"
    base_ms: list[float] = field(default_factory=list)  # the impl's median time of each round
    head_ms: list[float] = field(default_factory=list)

    @staticmethod
    def median(values: list[float]) -> float | None:
        return statistics.median(values) if values else None

    @staticmethod
    def spread(values: list[float]) -> float:
        """(max - min) / median of one tree's rounds: how far the same code moved between rounds."""
        return (max(values) - min(values)) / statistics.median(values) if len(values) > 1 else 0.0

    @property
    def change(self) -> float | None:
        b, h = self.median(self.base), self.median(self.head)
        return h / b - 1 if b and h else None

    @property
    def time_change(self) -> float | None:
        """head / base - 1 of the impl's median time: positive when the reference itself got slower."""
        b, h = self.median(self.base_ms), self.median(self.head_ms)
        return h / b - 1 if b and h else None


def commit_of(root: Path, rev: str) -> str:
    """The full hash REV names in root's repository; PerfAbError when it names no commit."""
    done = subprocess.run(["git", "-C", str(root), "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"],
                          capture_output=True, text=True)
    if done.returncode != 0 or not done.stdout.strip():
        raise PerfAbError(f"{rev}: not a commit of {root} (git rev-parse found none)")
    return done.stdout.strip()


def prepare_tree(root: Path, rev: str, dest: Path) -> str:
    """REV's files (git archive) in dest, which is kept, with its build, when it already holds them."""
    commit = commit_of(root, rev)
    if (dest / MARKER).is_file() and (dest / MARKER).read_text().strip() == commit:
        return commit
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    archive = subprocess.Popen(["git", "-C", str(root), "archive", "--format=tar", commit], stdout=subprocess.PIPE)
    assert archive.stdout is not None
    with tarfile.open(fileobj=archive.stdout, mode="r|") as tar:
        tar.extractall(dest, filter="tar")  # "tar", not "data": the adversarial cases hold absolute links
    if archive.wait() != 0:
        raise PerfAbError(f"git archive {rev} failed")
    (dest / MARKER).write_text(commit + "\n")
    return commit


def build_tree(tree: Path, preset: str, labs: list[str], jobs: int, log: Path) -> bool:
    """Configure the tree for these labs (directory names) and build their reference binaries, with the
    grader's own CMakeBuilder; the output goes to log. All at once first, then, after a failure, one
    target at a time, so that one lab that does not build leaves the others built. False when any failed."""
    builder = CMakeBuilder(tree, preset, jobs)
    targets = [f"lab{name[:2]}_solution" for name in labs]
    try:
        builder.configure(labs)
    except GraderError as err:
        log.write_text(f"{err}\n")
        return False
    code, output = builder.run_build(*targets)
    outputs = [output]
    if code != 0:
        results = [builder.build(t) for t in targets if not (builder.bin_dir / t).exists()]
        outputs += [r.log for r in results]
        code = 0 if all(r.ok for r in results) else 1
    log.write_text("\n".join(outputs))
    return code == 0


def run_order(round_no: int, trees: tuple[str, ...] = TREES) -> list[str]:
    """base first in odd rounds, head first in even ones: neither always runs on a GPU the other warmed."""
    return list(trees) if round_no % 2 else list(reversed(trees))


def run_perf(binary: Path, report: Path, log: Path, timeout_s: float) -> str:
    """Run one binary's perf tests at full size; '' when it ran, else what went wrong."""
    env = {k: v for k, v in os.environ.items() if k not in HARNESS_VARIABLES}
    cmd = [str(binary), "--gtest_filter=*Perf*", f"--gtest_output=json:{report}"]
    with log.open("w") as out:
        try:
            done = subprocess.run(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return f"{binary.name}: still running after {timeout_s:g} s"
    if not report.is_file():
        return f"{binary.name}: exit code {done.returncode}, no results (see {log.name})"
    return ""


Found = dict[tuple[str, str], dict[str, list[float]]]  # (lab, test) -> tree -> one value per round


def collect(runs: Path) -> tuple[Found, Found]:
    """The headline ratio and the impl's median ms of every round that timed a test, in round order, each
    as (lab, test) -> tree -> values; one pass over the reports."""
    ratios: Found = {}
    times: Found = {}
    names = [(int(m["round"]), m["lab"], m["tree"], p) for p in runs.glob("*.json") if (m := RUN_NAME.match(p.name))]
    for _, lab, tree, path in sorted(names):
        try:
            parsed = load_report(path, binary="solution")
        except GtestError:
            continue  # a run cut short: its round counts for neither tree
        for t in parsed.tests:
            if t.perf is None or t.status is not Status.PASSED or t.perf.headline_ratio is None:
                continue
            ratios.setdefault((lab, t.name), {}).setdefault(tree, []).append(t.perf.headline_ratio)
            if t.perf.impl is not None:
                times.setdefault((lab, t.name), {}).setdefault(tree, []).append(t.perf.impl.median_ms)
    return ratios, times


def judge(ratios: Found, times: Found, tolerance: float) -> list[Row]:
    rows = []
    for (lab, test), by_tree in sorted(ratios.items()):
        ms = times.get((lab, test), {})
        row = Row(test, lab, by_tree.get("base", []), by_tree.get("head", []),
                  base_ms=ms.get("base", []), head_ms=ms.get("head", []))
        if not row.base or not row.head:
            row.verdict = "only in base" if row.base else "only in head"
        else:
            row.verdict = "below" if row.change is not None and row.change < -tolerance else "ok"
        rows.append(row)
    return rows


def render(rows: list[Row], meta: dict) -> str:
    def rounds(values: list[float]) -> str:
        return " ".join(f"{v:.2f}" for v in values) or "-"

    def named(tree: dict) -> str:
        short = tree["commit"][:9] if re.fullmatch(r"[0-9a-f]{40}", tree["commit"]) else tree["commit"]
        return tree["rev"] if short == tree["rev"] else f"{tree['rev']} ({short})"

    lines = [f"perf A/B on {meta.get('gpu', '?')}: base {named(meta['base'])}, head {named(meta['head'])}; "
             f"{meta['rounds']} round(s), tolerance {meta['tolerance']:.0%}",
             "ratio = the headline ratio (to the library, else over the serial version), one per round",
             ""]
    width = max([len(r.test) for r in rows] + [4])
    lines.append(f"{'lab':<4} {'test':<{width}}  {'base rounds':<16} {'head rounds':<16} {'base':>5} {'head':>5} "
                 f"{'change':>7} {'spread':>13} {'impl time':>9}  verdict")
    for r in rows:
        b, h = r.median(r.base), r.median(r.head)
        change = f"{r.change:+.1%}" if r.change is not None else "-"
        spread = f"{r.spread(r.base):.1%}/{r.spread(r.head):.1%}" if r.base and r.head else "-"
        time = f"{r.time_change:+.1%}" if r.time_change is not None else "-"
        lines.append(f"{r.lab:<4} {r.test:<{width}}  {rounds(r.base):<16} {rounds(r.head):<16} "
                     f"{f'{b:.2f}' if b else '-':>5} {f'{h:.2f}' if h else '-':>5} {change:>7} {spread:>13} "
                     f"{time:>9}  {r.verdict}")
    below = [r for r in rows if r.verdict == "below"]
    lines += ["", f"{len(rows) - len(below)} of {len(rows)} ratio(s) within {meta['tolerance']:.0%} of base or above"
              + (f"; below: {', '.join(r.test for r in below)}" if below else "")]
    # A ratio is a quotient: when the reference's own time held, the other side of it moved.
    held = [r for r in below if r.time_change is not None and r.time_change <= meta["tolerance"]]
    if held:
        lines.append(f"of those, the reference's own time is within {meta['tolerance']:.0%} of base in: "
                     f"{', '.join(r.test for r in held)} (the library's or the serial version's time moved)")
    lines += [f"problem: {p}" for p in meta.get("problems", [])]
    return "\n".join(lines) + "\n"


def write(out: Path, meta: dict) -> int:
    """Judge what out/runs holds, write the tables, print the text; the exit code."""
    rows = judge(*collect(out / "runs"), meta["tolerance"])
    text = render(rows, meta)
    if not rows:
        text += "nothing to compare: no perf test reported a ratio in either tree (skipped or failed: see runs/*.log)\n"
    (out / "perf-ab.txt").write_text(text)
    (out / "perf-ab.json").write_text(json.dumps({**meta, "rows": [asdict(r) for r in rows]}, indent=2) + "\n")
    print(text, end="")
    if not rows:
        return 3
    return 1 if any(r.verdict == "below" for r in rows) else 0


def measure(args: argparse.Namespace) -> int:
    labs = select(discover(ROOT), args.labs)  # usage errors first, then the GPU
    for rev in filter(None, (args.base, args.head)):
        commit_of(ROOT, rev)
    gpu = probe_gpu()
    if not gpu.available:
        print(f"perf_ab: no GPU here ({gpu.reason}); it times the references on one", file=sys.stderr)
        return 4
    preset = choose_preset(gpu, args.preset)
    out: Path = args.out
    (out / "runs").mkdir(parents=True, exist_ok=True)
    (out / "logs").mkdir(exist_ok=True)
    base_commit = prepare_tree(ROOT, args.base, out / "trees" / "base")
    trees = {"base": out / "trees" / "base", "head": ROOT}
    head_commit = git_commit(ROOT) or "working tree"  # "+dirty" when it has uncommitted changes
    if args.head:
        head_commit = prepare_tree(ROOT, args.head, out / "trees" / "head")
        trees["head"] = out / "trees" / "head"
    meta = {"gpu": gpu.name, "preset": preset, "rounds": args.rounds, "tolerance": args.tolerance / 100,
            "base": {"rev": args.base, "commit": base_commit},
            "head": {"rev": args.head or "working tree", "commit": head_commit},
            "labs": [lab.name for lab in labs], "problems": []}
    jobs = max(1, (args.jobs or os.cpu_count() or 1) // 2)
    print(f"perf_ab: building the reference binaries of {len(labs)} lab(s) in both trees ({jobs} jobs each)", flush=True)

    def build(tree: str) -> None:
        # a lab the tree does not have yet is left out of it, not an error
        present = [lab.name for lab in labs if (trees[tree] / "labs" / lab.name).is_dir()]
        if not present or not build_tree(trees[tree], preset, present, jobs, out / "logs" / f"build-{tree}.log"):
            meta["problems"].append(f"{tree}: not every binary built (logs/build-{tree}.log); the missing ones are skipped")

    with ThreadPoolExecutor(max_workers=len(trees)) as pool:
        list(pool.map(build, trees))
    binaries = {(tree, lab.number): CMakeBuilder(trees[tree], preset).bin_dir / f"lab{lab.number:02d}_solution"
                for tree in trees for lab in labs}
    if not any(b.exists() for b in binaries.values()):
        print(f"perf_ab: no reference binary built in either tree; see {out / 'logs'}", file=sys.stderr)
        return 3
    for round_no in range(1, args.rounds + 1):
        for lab in labs:
            for tree in run_order(round_no):
                binary = binaries[(tree, lab.number)]
                if not binary.exists():
                    continue
                stem = f"{tree}-{lab.number:02d}-{round_no}"
                problem = run_perf(binary, out / "runs" / f"{stem}.json", out / "runs" / f"{stem}.log", args.timeout)
                if problem:
                    meta["problems"].append(f"round {round_no}, {tree}: {problem}")
        print(f"perf_ab: round {round_no} of {args.rounds} done", flush=True)
        (out / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")  # --compare works on a cut-short run
    return write(out, meta)


def compare(out: Path, tolerance_pct: float | None) -> int:
    try:
        meta = json.loads((out / "meta.json").read_text())
    except (OSError, ValueError) as err:
        raise PerfAbError(f"{out}: no readable meta.json from an earlier run ({err})") from None
    if tolerance_pct is not None:
        meta["tolerance"] = tolerance_pct / 100
    return write(out, meta)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="perf_ab.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--base", help="the revision to compare against (a commit, tag or branch)")
    p.add_argument("--head", help="the revision to compare (default: this checkout as it is)")
    p.add_argument("--out", type=Path, help="where the trees, runs and tables go")
    p.add_argument("--compare", type=Path, metavar="DIR", help="judge an earlier run's DIR again (no GPU)")
    p.add_argument("--labs", nargs="*", default=[], help="labs to time (default: all)")
    p.add_argument("--rounds", type=int, default=3, help="times each tree's binaries run, alternately (default 3)")
    p.add_argument("--preset", help="CMake preset (default: the grader's choice)")
    p.add_argument("-j", "--jobs", type=int, help="build jobs in all (default: the CPUs)")
    p.add_argument("--tolerance", type=float, help="per cent a ratio may fall before it is listed (default 2)")
    p.add_argument("--timeout", type=float, default=900, help="seconds one binary's perf tests may take")
    args = p.parse_args(argv)
    try:
        if args.compare:
            return compare(args.compare, args.tolerance)
        if not args.base or not args.out:
            raise PerfAbError("--base REV and --out DIR are needed (or --compare DIR)")
        if args.rounds < 1:
            raise PerfAbError("--rounds must be at least 1")
        args.tolerance = 2.0 if args.tolerance is None else args.tolerance
        return measure(args)
    except (PerfAbError, LabError) as err:
        print(f"perf_ab: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
