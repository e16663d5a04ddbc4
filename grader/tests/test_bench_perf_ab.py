"""bench/perf_ab.py without a GPU: trees from git, the run order, gtest JSON to ratios, the verdicts, and
a whole measurement with the GPU, the builds and the binaries stood in for."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import perf_ab  # noqa: E402

from grader.host.environment import GpuProbe  # noqa: E402

UNIFORM = "HistogramPerf.Uniform/16777216"
HOT = "HistogramPerf.HotBin/16777216"


def gtest_json(tests: dict[str, tuple[float, float]], baseline: str = "cub", failed: str = "") -> dict:
    """gtest's JSON for perf tests, as a bench::Suite records them: name -> (impl ms, baseline ms)."""
    suites: dict[str, list] = {}
    for full, (impl_ms, base_ms) in tests.items():
        suite, name = full.split(".", 1)
        entry = {"name": name, "status": "RUN", "result": "COMPLETED", "time": "1.2s", "classname": suite,
                 "perf_metric": "GB/s", "perf_work": "16777216", "perf_variants": f"impl,{baseline}",
                 "perf_baseline": baseline, "impl.median_ms": str(impl_ms), f"{baseline}.median_ms": str(base_ms)}
        if full == failed:
            entry["failures"] = [{"failure": "the timed call's output was wrong", "type": ""}]
        suites.setdefault(suite, []).append(entry)
    return {"tests": len(tests), "failures": 0, "testsuites": [{"name": s, "testsuite": t} for s, t in suites.items()]}


def write_runs(runs: Path, ratios: dict[str, dict[str, list[float]]], lab: str = "08") -> None:
    """ratios: tree -> test -> the ratio (baseline time / impl time) of each round."""
    runs.mkdir(parents=True, exist_ok=True)
    for tree, by_test in ratios.items():
        rounds = len(next(iter(by_test.values())))
        for r in range(rounds):
            tests = {t: (1.0, values[r]) for t, values in by_test.items()}
            (runs / f"{tree}-{lab}-{r + 1}.json").write_text(json.dumps(gtest_json(tests)))


def meta(tolerance: float = 0.02) -> dict:
    return {"gpu": "NVIDIA H100 80GB HBM3", "preset": "default", "rounds": 3, "tolerance": tolerance,
            "base": {"rev": "430bfeb", "commit": "430bfeb" + "0" * 33}, "head": {"rev": "working tree",
            "commit": "working tree"}, "labs": ["08-histogram"], "problems": []}


@pytest.fixture()
def repo(tmp_path: Path) -> Path:
    """A repository whose one file reads 'one' at the first commit and 'two' at the second."""
    r = tmp_path / "repo"
    r.mkdir()
    git = ["git", "-C", str(r), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run(["git", "init", "-q", str(r)], check=True)
    for text in ("one", "two"):
        (r / "labs").mkdir(exist_ok=True)
        (r / "labs" / "file.txt").write_text(text + "\n")
        subprocess.run([*git, "add", "-A"], check=True)
        subprocess.run([*git, "commit", "-q", "-m", text], check=True)
    (r / "labs" / "file.txt").write_text("uncommitted\n")
    return r


def test_prepare_tree_holds_the_revisions_files_and_is_kept(repo: Path, tmp_path: Path) -> None:
    dest = tmp_path / "trees" / "base"
    commit = perf_ab.prepare_tree(repo, "HEAD~1", dest)
    assert (dest / "labs" / "file.txt").read_text() == "one\n"
    assert (dest / perf_ab.MARKER).read_text().strip() == commit
    (dest / "build").mkdir()  # a build made in it survives a second call for the same commit
    assert perf_ab.prepare_tree(repo, commit[:10], dest) == commit
    assert (dest / "build").is_dir()
    perf_ab.prepare_tree(repo, "HEAD", dest)  # another commit replaces the tree
    assert (dest / "labs" / "file.txt").read_text() == "two\n"
    assert not (dest / "build").exists()


def test_an_unknown_revision_is_a_usage_error(repo: Path, tmp_path: Path) -> None:
    with pytest.raises(perf_ab.PerfAbError, match="nosuch: not a commit"):
        perf_ab.prepare_tree(repo, "nosuch", tmp_path / "t")
    assert perf_ab.main(["--base", "nosuch", "--out", str(tmp_path / "o")]) == 2
    assert perf_ab.main(["--base", "HEAD", "--out", str(tmp_path / "o"), "--labs", "99"]) == 2
    assert perf_ab.main(["--out", str(tmp_path / "o")]) == 2
    assert perf_ab.main(["--base", "HEAD", "--out", str(tmp_path / "o"), "--rounds", "0"]) == 2


def test_the_order_swaps_every_round() -> None:
    assert perf_ab.run_order(1) == ["base", "head"]
    assert perf_ab.run_order(2) == ["head", "base"]
    assert perf_ab.run_order(3) == ["base", "head"]


def test_a_ratio_below_base_by_more_than_the_tolerance_is_listed(tmp_path: Path) -> None:
    write_runs(tmp_path / "runs", {"base": {UNIFORM: [1.02, 1.01, 1.03], HOT: [1.00, 1.01, 1.00]},
                                   "head": {UNIFORM: [0.96, 0.96, 0.97], HOT: [0.99, 1.00, 0.99]}})
    rows = {r.test: r for r in perf_ab.judge(*perf_ab.collect(tmp_path / "runs"), 0.02)}
    assert rows[UNIFORM].base == [1.02, 1.01, 1.03] and rows[UNIFORM].head == [0.96, 0.96, 0.97]
    assert rows[UNIFORM].verdict == "below" and rows[UNIFORM].change == pytest.approx(0.96 / 1.02 - 1)
    assert rows[HOT].verdict == "ok"  # -1 %: inside the tolerance
    assert rows[UNIFORM].spread(rows[UNIFORM].base) == pytest.approx(0.02 / 1.02)
    assert perf_ab.judge(*perf_ab.collect(tmp_path / "runs"), 0.07)[1].verdict == "ok"


def test_the_table_tells_a_slower_reference_from_a_faster_library(tmp_path: Path) -> None:
    """Both ratios fall 5 %: Uniform because the library got faster (impl time held), HotBin because the
    reference got slower. Only the first is named as the library's move."""
    runs = tmp_path / "runs"
    runs.mkdir()
    for r in (1, 2):
        (runs / f"base-08-{r}.json").write_text(json.dumps(gtest_json({UNIFORM: (1.0, 1.0), HOT: (1.0, 1.0)})))
        (runs / f"head-08-{r}.json").write_text(json.dumps(gtest_json({UNIFORM: (1.0, 0.95), HOT: (1.0 / 0.95, 1.0)})))
    rows = {r.test: r for r in perf_ab.judge(*perf_ab.collect(runs), 0.02)}
    assert rows[UNIFORM].verdict == rows[HOT].verdict == "below"
    assert rows[UNIFORM].time_change == pytest.approx(0.0)
    assert rows[HOT].time_change == pytest.approx(1 / 0.95 - 1)
    (tmp_path / "meta.json").write_text(json.dumps(meta()))
    assert perf_ab.main(["--compare", str(tmp_path)]) == 1
    text = (tmp_path / "perf-ab.txt").read_text()
    assert "impl time" in text and "+5.3%" in text
    assert f"the reference's own time is within 2% of base in: {UNIFORM} (the library" in text
    assert f"in: {HOT}" not in text and f", {HOT}" not in text.splitlines()[-1]
    saved = json.loads((tmp_path / "perf-ab.json").read_text())["rows"]
    assert {r["test"]: r["head_ms"] for r in saved} == {HOT: [1.0 / 0.95] * 2, UNIFORM: [1.0, 1.0]}


def test_failed_or_unreadable_runs_count_for_no_tree(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    write_runs(runs, {"base": {UNIFORM: [1.0]}, "head": {UNIFORM: [1.0]}})
    (runs / "base-08-2.json").write_text(json.dumps(gtest_json({UNIFORM: (1.0, 0.5)}, failed=UNIFORM)))
    (runs / "head-08-2.json").write_text('{"testsuites": [')  # cut short
    (runs / "head-08-2.log").write_text("not a report")
    ratios, times = perf_ab.collect(runs)
    assert ratios == {("08", UNIFORM): {"base": [1.0], "head": [1.0]}}
    assert times == {("08", UNIFORM): {"base": [1.0], "head": [1.0]}}


def test_a_test_only_one_tree_has_is_shown_not_judged(tmp_path: Path) -> None:
    write_runs(tmp_path / "runs", {"base": {UNIFORM: [1.0]}, "head": {UNIFORM: [1.0], HOT: [0.5]}})
    rows = {r.test: r for r in perf_ab.judge(*perf_ab.collect(tmp_path / "runs"), 0.02)}
    assert rows[HOT].verdict == "only in head" and rows[UNIFORM].verdict == "ok"


def test_compare_rejudges_an_earlier_run_and_writes_its_tables(tmp_path: Path, capsys) -> None:
    write_runs(tmp_path / "runs", {"base": {UNIFORM: [1.02, 1.02]}, "head": {UNIFORM: [0.96, 0.97]}})
    (tmp_path / "meta.json").write_text(json.dumps(meta()))
    assert perf_ab.main(["--compare", str(tmp_path)]) == 1
    text = (tmp_path / "perf-ab.txt").read_text()
    assert "NVIDIA H100 80GB HBM3" in text and "430bfeb" in text
    assert "below: " + UNIFORM in text and "0 of 1 ratio(s) within 2%" in text
    assert UNIFORM in capsys.readouterr().out
    saved = json.loads((tmp_path / "perf-ab.json").read_text())
    assert saved["rows"][0]["verdict"] == "below" and saved["rows"][0]["head"] == [0.96, 0.97]
    assert perf_ab.main(["--compare", str(tmp_path), "--tolerance", "10"]) == 0
    assert "1 of 1 ratio(s) within 10%" in (tmp_path / "perf-ab.txt").read_text()


def test_without_a_gpu_it_says_so_and_exits_4(monkeypatch, tmp_path: Path, capsys) -> None:
    monkeypatch.setattr(perf_ab, "probe_gpu", lambda: GpuProbe(False, reason="no NVIDIA driver"))
    assert perf_ab.main(["--base", "HEAD", "--labs", "08", "--out", str(tmp_path / "o")]) == 4
    assert "no GPU here (no NVIDIA driver)" in capsys.readouterr().err


def test_a_whole_measurement_with_stand_ins(monkeypatch, tmp_path: Path) -> None:
    """GPU, trees, builds and binaries stood in for: both trees built, lab 08 timed in every round in the
    swapped order, the verdict from what the binaries wrote, the tables and meta.json written."""
    monkeypatch.setattr(perf_ab, "probe_gpu", lambda: GpuProbe(True, name="NVIDIA H100 80GB HBM3",
                                                                compute_capability="9.0"))
    monkeypatch.setattr(perf_ab, "commit_of", lambda root, rev: "c" * 40)
    monkeypatch.setattr(perf_ab, "prepare_tree", lambda root, rev, dest: (dest / "labs" / "08-histogram").mkdir(
        parents=True, exist_ok=True) or "c" * 40)
    monkeypatch.setattr(perf_ab, "CMakeBuilder", lambda tree, preset, jobs=None: stand_in_builder(tmp_path, tree))
    built: list[tuple[str, list[str]]] = []

    def fake_build(tree: Path, preset: str, labs: list[str], jobs: int, log: Path) -> bool:
        where = perf_ab.CMakeBuilder(tree, preset).bin_dir
        built.append((where.name, labs))
        where.mkdir(parents=True, exist_ok=True)
        for name in labs:
            (where / f"lab{name[:2]}_solution").write_text("")
        log.write_text("built\n")
        return True

    order: list[str] = []

    def fake_run(binary: Path, report: Path, log: Path, timeout_s: float) -> str:
        order.append(binary.parent.name)
        ratio = 1.02 if binary.parent.name == "base" else 0.96
        report.write_text(json.dumps(gtest_json({UNIFORM: (1.0, ratio)})))
        return ""

    monkeypatch.setattr(perf_ab, "build_tree", fake_build)
    monkeypatch.setattr(perf_ab, "run_perf", fake_run)
    out = tmp_path / "out"
    assert perf_ab.main(["--base", "430bfeb", "--labs", "08", "--out", str(out), "--rounds", "2"]) == 1
    assert sorted(built) == [("base", ["08-histogram"]), ("head", ["08-histogram"])]
    assert order == ["base", "head", "head", "base"]
    saved = json.loads((out / "perf-ab.json").read_text())
    assert saved["gpu"] == "NVIDIA H100 80GB HBM3" and saved["head"]["rev"] == "working tree"
    assert saved["head"]["commit"]  # this checkout's short hash (+dirty), for the record
    assert saved["rows"][0]["base"] == [1.02, 1.02] and saved["rows"][0]["verdict"] == "below"
    assert json.loads((out / "meta.json").read_text())["rounds"] == 2
    assert "0 of 1 ratio(s) within 2%" in (out / "perf-ab.txt").read_text()


def test_nothing_built_is_exit_3(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setattr(perf_ab, "probe_gpu", lambda: GpuProbe(True, name="NVIDIA H200", compute_capability="9.0"))
    monkeypatch.setattr(perf_ab, "commit_of", lambda root, rev: "c" * 40)
    monkeypatch.setattr(perf_ab, "prepare_tree", lambda root, rev, dest: "c" * 40)
    monkeypatch.setattr(perf_ab, "CMakeBuilder", lambda tree, preset, jobs=None: SimpleNamespace(bin_dir=tmp_path))
    monkeypatch.setattr(perf_ab, "build_tree", lambda *a: False)
    assert perf_ab.main(["--base", "430bfeb", "--labs", "08", "--out", str(tmp_path / "o")]) == 3


class StandInBuilder:
    """CMakeBuilder's part that build_tree uses: configure may fail, the build of all targets fails, and
    then each target alone builds unless it is named in `broken`."""

    def __init__(self, bin_dir: Path, broken: set[str] = frozenset(), configure_error: str = "") -> None:
        self.bin_dir, self.broken, self.configure_error = bin_dir, broken, configure_error
        self.calls: list[tuple] = []

    def configure(self, labs: list[str]) -> None:
        self.calls.append(("configure", labs))
        if self.configure_error:
            raise perf_ab.GraderError(self.configure_error)

    def run_build(self, *targets: str) -> tuple[int, str]:
        self.calls.append(("build all", targets))
        return 1, "FAILED: one target"

    def build(self, target: str):
        self.calls.append(("build", target))
        ok = target not in self.broken
        if ok:
            (self.bin_dir / target).write_text("")
        return SimpleNamespace(ok=ok, log=f"{target}: {'built' if ok else 'error'}")


def stand_in_builder(tmp_path: Path, tree: Path) -> StandInBuilder:
    return StandInBuilder(tmp_path / "bins" / ("base" if tree.name == "base" else "head"))


def test_build_tree_builds_each_target_alone_after_a_failure(monkeypatch, tmp_path: Path) -> None:
    """One lab that does not build leaves the others built (and the log says which failed)."""
    builder = StandInBuilder(tmp_path, broken={"lab06_solution"})
    monkeypatch.setattr(perf_ab, "CMakeBuilder", lambda tree, preset, jobs=None: builder)
    log = tmp_path / "build.log"
    assert not perf_ab.build_tree(tmp_path, "default", ["03-vector-add", "06-reduce"], 4, log)
    assert builder.calls == [("configure", ["03-vector-add", "06-reduce"]),
                             ("build all", ("lab03_solution", "lab06_solution")),
                             ("build", "lab03_solution"), ("build", "lab06_solution")]
    assert (tmp_path / "lab03_solution").exists() and not (tmp_path / "lab06_solution").exists()
    assert "lab06_solution: error" in log.read_text()
    failing = StandInBuilder(tmp_path, configure_error="cmake --preset default failed: no nvcc")
    monkeypatch.setattr(perf_ab, "CMakeBuilder", lambda tree, preset, jobs=None: failing)
    assert not perf_ab.build_tree(tmp_path, "default", ["03-vector-add"], 4, log)
    assert failing.calls == [("configure", ["03-vector-add"])] and "no nvcc" in log.read_text()


def test_runs_that_timed_nothing_are_exit_3_not_a_pass(tmp_path: Path) -> None:
    """Without a GPU every perf test skips: an empty comparison must not read as 'nothing got slower'."""
    runs = tmp_path / "runs"
    runs.mkdir()
    skipped = gtest_json({UNIFORM: (1.0, 1.0)})
    entry = skipped["testsuites"][0]["testsuite"][0]
    entry["result"] = "SKIPPED"
    for k in [k for k in entry if k.startswith(("perf_", "impl.", "cub."))]:
        del entry[k]
    for tree in ("base", "head"):
        (runs / f"{tree}-08-1.json").write_text(json.dumps(skipped))
    (tmp_path / "meta.json").write_text(json.dumps(meta()))
    assert perf_ab.main(["--compare", str(tmp_path)]) == 3
    assert "nothing to compare" in (tmp_path / "perf-ab.txt").read_text()


def test_run_perf_runs_full_size_and_reports_a_missing_report(tmp_path: Path, monkeypatch) -> None:
    """A stand-in binary (a shell script) shows the arguments and environment a real one gets."""
    monkeypatch.setenv("CUDALAB_SMALL", "1")
    monkeypatch.setenv("CUDALAB_RUN_NONCE", "n")
    binary = tmp_path / "lab08_solution"
    binary.write_text('#!/bin/sh\necho "$@" > "$(dirname "$0")/args"; env > "$(dirname "$0")/env"\n'
                      'case "$2" in --gtest_output=json:*) echo "{}" > "${2#--gtest_output=json:}";; esac\n')
    binary.chmod(0o755)
    assert perf_ab.run_perf(binary, tmp_path / "r.json", tmp_path / "r.log", 10) == ""
    assert (tmp_path / "args").read_text().split() == ["--gtest_filter=*Perf*", f"--gtest_output=json:{tmp_path / 'r.json'}"]
    env = (tmp_path / "env").read_text()
    assert "CUDALAB_SMALL" not in env and "CUDALAB_RUN_NONCE" not in env
    binary.write_text("#!/bin/sh\nexit 3\n")
    assert "exit code 3, no results" in perf_ab.run_perf(binary, tmp_path / "s.json", tmp_path / "s.log", 10)
    binary.write_text("#!/bin/sh\nsleep 5\n")
    assert "still running after 0.5 s" in perf_ab.run_perf(binary, tmp_path / "t.json", tmp_path / "t.log", 0.5)
