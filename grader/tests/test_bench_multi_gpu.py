"""bench/multi_gpu.py and bench/multi_gpu_compare.py on hand-made batch outputs: no GPU, no build."""

from __future__ import annotations

import csv
import json
import shutil
import sys
import tarfile
import zipfile
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import multi_gpu  # noqa: E402
import multi_gpu_compare as mc  # noqa: E402

L03, L06 = "03-vector-add", "06-reduce"
T03 = "VectorAddPerf.Fast/268435456"  # rubric: 10 points, zero_at 0.5, full_at 0.95
T06 = "ReducePerf.SinglePass/268435456"  # rubric: 10 points, zero_at 0.5, full_at 0.9
UUIDS = {"0": "GPU-aaaa", "1": "GPU-bbbb"}


def lab_json(name: str, test: str, correct: float, perf_earned: float, impl_ms: float, ref_ms: float) -> dict:
    return {
        "number": int(name[:2]), "name": name, "title": name, "max_score": 100.0,
        "score": correct + perf_earned,
        "tests": [{"name": test, "status": "passed", "kind": "perf",
                   "perf": {"metric": "GB/s", "work": 1.0, "points": 10.0, "earned": perf_earned,
                            "variants": [{"name": "impl", "median_ms": impl_ms}],
                            "reference": {"name": "impl", "median_ms": ref_ms}}}],
        "tasks": [{"id": "main", "title": "t", "points": 50.0, "earned": correct},
                  {"id": "fast", "title": "f", "points": 10.0, "earned": 0.0, "perf_points": 10.0,
                   "perf_earned": perf_earned}],
    }


def write_run(out: Path, students: dict[str, dict], *, gpu_column: bool = True) -> Path:
    """students: {id: {"status", "gpu" (index or None), "labs": [lab_json...], "html": bool}}; None labs: broken."""
    out.mkdir(parents=True)
    rows = []
    for s, spec in students.items():
        labs = spec.get("labs")
        gpu = spec.get("gpu")
        row = {"student": s, "status": spec.get("status", "graded")}
        if labs is not None:
            d = out / s
            d.mkdir()
            run = {"started": "", "gpu": {"gpu_name": "NVIDIA H100"}, "gpu_available": True}
            if gpu is not None:
                run["gpu"].update({"gpu_index": gpu, "gpu_uuid": spec.get("uuid", UUIDS[gpu])})
            (d / "results.json").write_text(json.dumps({"schema_version": 2, "run": run, "labs": labs}))
            state = {"student": s, "finished_unix": 1000.0 + 10 * len(rows), **({"gpu": int(gpu)} if gpu else {})}
            (d / ".batch.json").write_text(json.dumps(state))
            if spec.get("html", True):
                (d / "report.html").write_text(f"<td>GPU index</td><td>{gpu}</td>" if gpu else "<p>no gpu</p>")
            total = sum(lab["score"] for lab in labs)
            row.update({"total": f"{total:g}", **{lab["name"]: f"{lab['score']:g}" for lab in labs},
                        "gpu": f"GPU {gpu} (NVIDIA H100)" if gpu is not None else ""})
        else:
            row.update({"total": "", "gpu": ""})
        rows.append(row)
    fields = ["student", "total", L03, L06, "status"] + (["gpu"] if gpu_column else []) + ["notes"]
    with open(out / "gradebook.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore", restval="")
        w.writeheader()
        w.writerows(rows)
    return out


def two_labs(correct: float = 50.0, perf03: float = 10.0, ref: float = 1.0, impl: float = 1.0) -> list[dict]:
    return [lab_json(L03, T03, correct, perf03, impl, ref), lab_json(L06, T06, correct, 10.0, impl, ref)]


GOALS = {(L03, T03): (0.5, 0.95), (L06, T06): (0.5, 0.9)}


def test_identical_runs_pass(tmp_path):
    students = {"s1": {"gpu": "0", "labs": two_labs()}, "s2": {"status": "broken", "labs": None}}
    a = mc.load_run(write_run(tmp_path / "a", students))
    b = mc.load_run(write_run(tmp_path / "b", {"s1": {"gpu": "1", "labs": two_labs()}, "s2": students["s2"]}))
    diffs, spread = mc.compare_scores(a, b, GOALS)
    assert [d.ok for d in diffs] == [True, True]
    assert spread[(L03, T03)]["spread"] == 0.0
    assert mc.check_gpus(a, {"0": UUIDS["0"]}) == {"s1": []}  # the broken one has no report to check
    assert mc.check_gpus(b, UUIDS) == {"s1": []}
    assert mc.verdict(diffs, {}, {}) == []
    assert mc.per_gpu(b) == {"1": 1}


def test_correctness_must_match_exactly(tmp_path):
    a = mc.load_run(write_run(tmp_path / "a", {"s1": {"gpu": "0", "labs": two_labs(50.0)}}))
    b = mc.load_run(write_run(tmp_path / "b", {"s1": {"gpu": "1", "labs": two_labs(49.9999)}}))
    (d,), _ = mc.compare_scores(a, b, GOALS, fixed_pct=100)
    assert not d.ok and not d.correctness_equal
    assert any("correctness points differ in main 50.0 vs 49.9999" in p for p in d.problems)


def test_status_and_missing_rows(tmp_path):
    a = mc.load_run(write_run(tmp_path / "a", {"s1": {"gpu": "0", "labs": two_labs()}, "s2": {"gpu": "0", "labs": two_labs()}}))
    b = mc.load_run(write_run(tmp_path / "b", {"s1": {"status": "broken", "labs": None}}))
    d1, d2 = mc.compare_scores(a, b, GOALS, students=["s1", "s2"])[0]
    assert any("status 'graded' vs 'broken'" in p for p in d1.problems)
    assert any("results.json only in run A" in p for p in d1.problems)
    assert any("no gradebook row in run B" in p for p in d2.problems)


def test_perf_tolerance_is_the_measured_reference_spread(tmp_path):
    # The reference took 1.00 ms in A and 1.05 ms in B: 5% spread. Student ratio ~1 (capped by full_at),
    # so lab 03 allows 10 * 2 * 0.05 * 1.05 / 0.45 = 2.33 points, lab 06 10 * 2 * 0.05 * 1.05/0.4 = 2.63.
    a = mc.load_run(write_run(tmp_path / "a", {"s1": {"gpu": "0", "labs": two_labs(perf03=10.0, ref=1.0)}}))
    b = mc.load_run(write_run(tmp_path / "b", {"s1": {"gpu": "1", "labs": two_labs(perf03=8.0, ref=1.05)}}))
    (d,), spread = mc.compare_scores(a, b, GOALS)
    assert spread[(L03, T03)]["spread"] == pytest.approx(0.05)
    assert d.ok, d.problems
    assert d.perf_diff == pytest.approx(2.0)
    assert d.perf_allowed == pytest.approx(10 * 2 * 0.05 * 1.05 / 0.45)
    # Past the noise: 3 points apart with the same 5% spread.
    b2 = mc.load_run(write_run(tmp_path / "b2", {"s1": {"gpu": "1", "labs": two_labs(perf03=7.0, ref=1.05)}}))
    (d2,), _ = mc.compare_scores(a, b2, GOALS)
    assert not d2.ok and any(p.startswith(f"{L03}: perf points 10 vs 7") for p in d2.problems)


def test_perf_tolerance_has_a_floor_and_a_fixed_mode(tmp_path):
    # No spread at all: the 1% floor allows 10 * 2 * 0.01 * 1 / 0.45 = 0.44 points.
    a = mc.load_run(write_run(tmp_path / "a", {"s1": {"gpu": "0", "labs": two_labs(perf03=10.0)}}))
    b = mc.load_run(write_run(tmp_path / "b", {"s1": {"gpu": "1", "labs": two_labs(perf03=9.7)}}))
    (d,), _ = mc.compare_scores(a, b, GOALS)
    assert d.ok and d.perf_allowed == pytest.approx(0.2 / 0.45)
    b2 = mc.load_run(write_run(tmp_path / "b2", {"s1": {"gpu": "1", "labs": two_labs(perf03=9.0)}}))
    assert not mc.compare_scores(a, b2, GOALS)[0][0].ok
    (fixed,), _ = mc.compare_scores(a, b2, GOALS, fixed_pct=10)  # +-10% of 10 perf points
    assert fixed.ok and fixed.perf_allowed == pytest.approx(1.0)


def test_reference_spread_per_gpu(tmp_path):
    a = mc.load_run(write_run(tmp_path / "a", {"s1": {"gpu": "0", "labs": two_labs(ref=2.0)}}))
    b = mc.load_run(write_run(tmp_path / "b", {"s1": {"gpu": "0", "labs": two_labs(ref=2.1)},
                                               "s2": {"gpu": "1", "labs": two_labs(ref=2.2)}}))
    spread = mc.reference_spread([a, b])[(L06, T06)]
    assert spread["medians_ms"] == {"run0/gpu0": 2.0, "run1/gpu0": 2.1, "run1/gpu1": 2.2}
    assert spread["spread"] == pytest.approx(0.1)


def test_reports_must_name_their_gpu(tmp_path):
    run = mc.load_run(write_run(tmp_path / "a", {
        "ok": {"gpu": "1", "labs": two_labs()},
        "no-index": {"gpu": None, "labs": two_labs()},
        "wrong-uuid": {"gpu": "1", "uuid": "GPU-zzzz", "labs": two_labs()},
        "other-gpu": {"gpu": "0", "labs": two_labs()},
        "no-html": {"gpu": "1", "labs": two_labs(), "html": False},
        "broken": {"status": "broken", "labs": None},
    }))
    got = mc.check_gpus(run, {"1": UUIDS["1"]})
    assert got["ok"] == [] and "broken" not in got
    assert "results.json: no run.gpu.gpu_index" in got["no-index"]
    assert any("gradebook: gpu column" in p for p in got["no-index"])
    assert any("report.html does not name its GPU" in p for p in got["no-index"])
    assert got["wrong-uuid"] == ["results.json: gpu_uuid GPU-zzzz is not GPU 1's GPU-bbbb"]
    assert got["other-gpu"] == ["results.json: GPU 0 is not one of this run's (1)"]
    assert got["no-html"] == ["no report.html"]
    no_column = mc.load_run(write_run(tmp_path / "b", {"s": {"gpu": "0", "labs": two_labs()}}, gpu_column=False))
    assert mc.check_gpus(no_column, {"0": ""}) == {"s": ["gradebook: no gpu column"]}


def test_kind_checks():
    kinds = {"a": {L03: "solution", L06: "skeleton"}, "b": {L03: "skeleton", L06: "solution"},
             "c": {L03: "compile-error", L06: "wrong-kernel"}, "d": dict.fromkeys((L03, L06), "broken-archive")}
    book = {"a": {"status": "graded", L03: "95", L06: "10"}, "b": {"status": "graded", L03: "0", L06: "90"},
            "c": {"status": "graded", L03: "0", L06: "40"}, "d": {"status": "broken", L03: "", L06: ""}}
    assert all(ok for _, ok in mc.kind_checks(book, kinds))
    book["c"][L06] = "90"
    failed = [what for what, ok in mc.kind_checks(book, kinds) if not ok]
    assert failed == [f"{L06}: wrong kernels score below every solution"]


def fake_lab(tmp_path: Path, name: str, file: str):
    lab = SimpleNamespace(name=name, student_files=[file], path=tmp_path / "labs" / name,
                          solution_dir=tmp_path / "solutions" / name)
    for d, body in ((lab.path, "// TODO"), (lab.solution_dir, "done();")):
        d.mkdir(parents=True)
        (d / file).write_text(f"__global__ void k(float* x) {{ {body} }}\n")
    return lab


def test_submissions_hold_both_labs_in_every_form(tmp_path):
    labs = [fake_lab(tmp_path, L03, "vector_add.cu"), fake_lab(tmp_path, L06, "reduce.cu")]
    kinds = multi_gpu.make_submissions(labs, 24, tmp_path / "subs")
    assert len(kinds) == 24
    assert sum(k[L03] != k[L06] for k in kinds.values()) >= 12  # the labs' kinds are shifted
    broken = [s for s, k in kinds.items() if "broken-archive" in k.values()]
    assert broken and all(set(kinds[s].values()) == {"broken-archive"} for s in broken)
    for kind in ("solution", "skeleton", "wrong-kernel", "compile-error"):
        assert any(k[L06] == kind for k in kinds.values())
    first = tmp_path / "subs" / "s001-sol-cerr"  # a repository folder
    assert kinds["s001-sol-cerr"] == {L03: "solution", L06: "compile-error"}
    assert "done();" in (first / "labs" / L03 / "vector_add.cu").read_text()
    assert "this is not C++" in (first / "labs" / L06 / "reduce.cu").read_text()
    flat = next(p for p in (tmp_path / "subs").iterdir() if p.is_dir() and (p / "reduce.cu").exists())
    assert (flat / "vector_add.cu").exists()
    z = next(p for p in (tmp_path / "subs").glob("*.zip") if p.name not in {f"{b}.zip" for b in broken})
    assert len(zipfile.ZipFile(z).namelist()) == 2
    t = next((tmp_path / "subs").glob("*.tar.gz"))
    with tarfile.open(t) as tf:
        assert sorted(Path(n).name for n in tf.getnames()) == ["reduce.cu", "vector_add.cu"]


def test_compare_mode_judges_an_earlier_run(tmp_path):
    kinds = {"s1": {L03: "solution", L06: "solution"}, "s2": {L03: "solution", L06: "solution"},
             "s3": dict.fromkeys((L03, L06), "broken-archive")}
    broken = {"status": "broken", "labs": None}
    write_run(tmp_path / "gpus-1", {"s1": {"gpu": "0", "labs": two_labs()}, "s2": {"gpu": "0", "labs": two_labs()},
                                    "s3": broken})
    write_run(tmp_path / "gpus-N", {"s1": {"gpu": "0", "labs": two_labs()}, "s2": {"gpu": "1", "labs": two_labs()},
                                    "s3": broken})
    devs = [{"index": 0, "name": "NVIDIA H100", "uuid": UUIDS["0"]}, {"index": 1, "name": "NVIDIA H100", "uuid": UUIDS["1"]}]
    meta = {"labs": [L03, L06], "n": 3, "kinds": kinds, "cpus": 32, "jobs": None, "preset": "default",
            "gpus_a": devs[:1], "gpus_b": devs, "spec_a": "0", "spec_b": "all",
            "runs": {"A": {"rc": 0, "wall_s": 100.0, "log": "a.log"}, "B": {"rc": 0, "wall_s": 50.0, "log": "b.log"}}}
    (tmp_path / "devices.json").write_text(json.dumps(meta))
    assert multi_gpu.main(["--compare", str(tmp_path)]) == 0
    text = (tmp_path / "multi-gpu.txt").read_text()
    assert "speed-up B over A: 2.00x on 2 GPUs" in text and "multi-GPU check: PASS" in text
    data = json.loads((tmp_path / "multi-gpu.json").read_text())
    assert data["runs"]["A"]["students_per_hour"] == pytest.approx(108.0)
    assert data["runs"]["B"]["graded_per_gpu"] == {"0": 1, "1": 1}
    # One GPU of two never used, and a report without its GPU: both fail the bench.
    (tmp_path / "gpus-N" / "s2" / "report.html").write_text("<p>nothing</p>")
    meta["gpus_b"].append({"index": 2, "name": "NVIDIA H100", "uuid": "GPU-cccc"})
    (tmp_path / "devices.json").write_text(json.dumps(meta))
    assert multi_gpu.main(["--compare", str(tmp_path)]) == 1
    fails = json.loads((tmp_path / "multi-gpu.json").read_text())["failures"]
    assert "s2 (run B): report.html does not name its GPU (no 'GPU index')" in fails
    assert any(f.startswith("run B graded on GPU(s) 0, 1 of 3 given") for f in fails)


def test_compare_mode_after_run_b_was_killed(tmp_path):
    kinds = {"s1": {L03: "solution", L06: "solution"}}
    write_run(tmp_path / "gpus-1", {"s1": {"gpu": "0", "labs": two_labs()}})
    devs = [{"index": 0, "name": "H100", "uuid": UUIDS["0"]}, {"index": 1, "name": "H100", "uuid": UUIDS["1"]}]
    meta = {"labs": [L03, L06], "n": 1, "kinds": kinds, "cpus": 32, "jobs": None, "preset": None,
            "gpus_a": devs[:1], "gpus_b": devs, "spec_a": "0", "spec_b": "all",
            "runs": {"A": {"rc": 0, "wall_s": 10.0, "log": "a.log"}}}
    (tmp_path / "devices.json").write_text(json.dumps(meta))
    assert multi_gpu.main(["--compare", str(tmp_path)]) == 1
    data = json.loads((tmp_path / "multi-gpu.json").read_text())
    assert data["speed_up"] is None and "batch B exited not run (killed?) (-)" in data["failures"]
    assert "s1: no gradebook row in run B" in data["failures"]


def test_compare_mode_against_a_batch_without_gpus(tmp_path):
    """--single default (issue 13): run A is the batch without --gpus, which names no GPU index; the scores
    must still match run B's pinned worker, and B's reports must still name their GPU."""
    kinds = {"s1": {L03: "solution", L06: "solution"}, "s2": {L03: "solution", L06: "solution"}}
    write_run(tmp_path / "gpus-1", {"s1": {"labs": two_labs()}, "s2": {"labs": two_labs()}})
    write_run(tmp_path / "gpus-N", {"s1": {"gpu": "1", "labs": two_labs()}, "s2": {"gpu": "1", "labs": two_labs()}})
    devs = [{"index": 1, "name": "NVIDIA H100", "uuid": UUIDS["1"]}]
    meta = {"labs": [L03, L06], "n": 2, "kinds": kinds, "cpus": 32, "jobs": None, "preset": "default",
            "gpus_a": [], "gpus_b": devs, "spec_a": "default", "spec_b": "all",
            "runs": {"A": {"rc": 0, "wall_s": 40.0, "log": "a.log"}, "B": {"rc": 0, "wall_s": 41.0, "log": "b.log"}}}
    (tmp_path / "devices.json").write_text(json.dumps(meta))
    assert multi_gpu.main(["--compare", str(tmp_path)]) == 0
    text = (tmp_path / "multi-gpu.txt").read_text()
    assert "A: no --gpus" in text and "multi-GPU check: PASS" in text
    assert "wall B / wall A: 1.03 (one GPU both times)" in text and "speed-up" not in text  # 41 s / 40 s
    # A score that differs between the unpinned and the pinned batch fails it.
    changed = two_labs()
    changed[0]["tasks"][0]["earned"] -= 1
    shutil.rmtree(tmp_path / "gpus-N")
    write_run(tmp_path / "gpus-N", {"s1": {"gpu": "1", "labs": changed}, "s2": {"gpu": "1", "labs": two_labs()}})
    assert multi_gpu.main(["--compare", str(tmp_path)]) == 1
