"""The mutation gate (grader/authoring/mutation.py): every lab's mutants still apply, and the judging of a batch's
results. Grading them needs a GPU (ci/gpu-check's mutation stage); here a stand-in batch writes the
results.json a real one would."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest

from grader.cli import mutants
from grader.authoring import mutation
from grader.model.errors import Exit, GraderError
from grader.model.labs import discover

ROOT = Path(__file__).resolve().parents[2]
LABS = [lab for lab in discover(ROOT) if lab.solution_dir.is_dir()]


@pytest.mark.parametrize("lab", LABS, ids=[lab.name for lab in LABS])
def test_every_lab_has_a_mutation_suite_that_applies(lab):
    checked = mutation.check_lab(lab)
    assert not checked.problems, "\n".join(checked.problems)
    assert checked.bugs >= mutation.MIN_BUGS and checked.correct >= mutation.MIN_CORRECT


@pytest.mark.parametrize("lab", LABS, ids=[lab.name for lab in LABS])
def test_mutants_touch_only_what_students_write(lab):
    """A mutant changes code inside BEGIN/END SOLUTION regions (what the skeleton leaves to the student),
    never the contract around them."""
    base = (lab.solution_dir / lab.student_files[0]).read_text().splitlines()
    for mutant in mutation.load_mutants(lab):
        body = mutation.mutated_source(lab, mutant).splitlines()
        assert sum("BEGIN SOLUTION" in ln for ln in body) == sum("BEGIN SOLUTION" in ln for ln in base), mutant.name
        assert sum("END SOLUTION" in ln for ln in body) == sum("END SOLUTION" in ln for ln in base), mutant.name


def _lab(tmp_path: Path):
    """A copy of lab 03's lab.toml, contract and solution: a lab tree of one lab to write mutants into."""
    import shutil

    lab = next(lab for lab in discover(ROOT) if lab.name == "03-vector-add")
    shutil.copytree(lab.path, tmp_path / "labs" / lab.name)
    (tmp_path / "solutions" / lab.name).mkdir(parents=True)
    shutil.copy(lab.solution_dir / "vector_add.cu", tmp_path / "solutions" / lab.name / "vector_add.cu")
    return next(iter(discover(tmp_path)))


GUARD = """--- solutions/03-vector-add/vector_add.cu
+++ m/vector_add.cu
@@ -23,3 +23,3 @@
   const int i = blockIdx.x * blockDim.x + threadIdx.x;
-  if (i < n) c[i] = a[i] + b[i];  // the last block usually has threads past the end
+  if (i <= n) c[i] = a[i] + b[i];  // the last block usually has threads past the end
   // END SOLUTION
"""


def _write(lab, name: str, header: str, body: str = GUARD) -> Path:
    folder = mutation.mutants_dir(lab)
    folder.mkdir(exist_ok=True)
    path = folder / f"{name}.patch"
    path.write_text(header + body)
    return path


def test_a_well_formed_mutant_parses_and_applies(tmp_path):
    lab = _lab(tmp_path)
    _write(lab, "guard-off-by-one", "# kind: bug\n# task: one-per-thread\n# what: the guard is i <= n\n# cause: guard\n")
    (m,) = mutation.load_mutants(lab)
    assert (m.kind, m.task, m.student) == ("bug", "one-per-thread", "bug-guard-off-by-one")
    assert "if (i <= n)" in mutation.mutated_source(lab, m)
    checked = mutation.check_lab(lab, minimum=False)
    assert checked.bugs == 1 and not checked.problems


@pytest.mark.parametrize("header, body, says", [
    ("# kind: bug\n# task: one-per-thread\n", GUARD, "lacks # what:"),
    ("# kind: typo\n# task: one-per-thread\n# what: x\n", GUARD, "kind is 'typo'"),
    ("# kind: bug\n# task: no-such-task\n# what: x\n# cause: guard\n", GUARD, "is not a task of lab.toml"),
    ("# kind: bug\n# task: one-per-thread\n# what: x\n# cause: guard\n", GUARD.replace("const int i", "const long i"), "no longer matches"),
    ("# kind: bug\n# task: one-per-thread\n# what: x\n# cause: guard\n", "--- a\n+++ b\n", "no hunk"),
    ("# kind: bug\n# task: one-per-thread\n# what: x\n", GUARD, "needs # cause:"),
    ("# kind: bug\n# task: one-per-thread\n# what: x\n# cause: gaurd\n", GUARD, "'gaurd' is declared in no [causes]"),
])
def test_a_broken_mutant_is_named_with_what_is_wrong(tmp_path, header, body, says):
    lab = _lab(tmp_path)
    _write(lab, "broken", header, body)
    checked = mutation.check_lab(lab, minimum=False)
    assert len(checked.problems) == 1 and says in checked.problems[0] and "broken.patch" in checked.problems[0]


def test_a_lab_below_the_minimum_is_reported(tmp_path):
    lab = _lab(tmp_path)
    _write(lab, "guard-off-by-one", "# kind: bug\n# task: one-per-thread\n# what: the guard is i <= n\n# cause: guard\n")
    problems = mutation.check_lab(lab).problems
    assert any("1 bug mutant(s); a lab needs at least 12" in p for p in problems)
    assert any("0 correct alternative(s)" in p for p in problems)


def _results(lab: str, earned: dict[str, float], compiled: bool = True) -> dict:
    tasks = [{"id": t, "points": 10.0, "earned": e, "perf_points": 0.0, "perf_earned": 0.0} for t, e in earned.items()]
    tests = [{"name": f"S.{t}", "status": "passed" if e == 10 else "failed", "kind": "correctness"}
             for t, e in earned.items()]
    builds = [{"target": "lab03_student_object", "ok": compiled}]
    return {"labs": [{"name": lab, "tasks": tasks, "tests": tests, "builds": builds}]}


def _fake_batch(scores: dict[str, dict]):
    """A stand-in for run_batch: writes each submission's results.json as the scores say."""
    calls = []

    def batch(root, subs, out, selectors, **options):
        calls.append((subs, out, selectors, options))
        for student in sorted(p.name for p in Path(subs).iterdir()):
            assert (Path(subs) / student / "labs" / selectors[0] / "vector_add.cu").is_file()
            if student in scores:
                (Path(out) / student).mkdir(parents=True, exist_ok=True)
                (Path(out) / student / "results.json").write_text(json.dumps(scores[student]))
        return Exit.OK

    return batch, calls


def test_run_judges_caught_missed_and_alternatives(tmp_path):
    lab = _lab(tmp_path)
    name = lab.name
    _write(lab, "caught", "# kind: bug\n# task: one-per-thread\n# what: a\n# cause: guard\n")
    _write(lab, "missed", "# kind: bug\n# task: one-per-thread\n# what: b\n# cause: guard\n")
    _write(lab, "no-compile", "# kind: bug\n# task: one-per-thread\n# what: c\n# cause: guard\n")
    _write(lab, "alt-ok", "# kind: correct\n# task: one-per-thread\n# what: d\n")
    _write(lab, "alt-bad", "# kind: correct\n# task: one-per-thread\n# what: e\n")
    full = {"one-per-thread": 10.0, "host-flow": 10.0}
    batch, calls = _fake_batch({
        mutation.REFERENCE_ID: _results(name, full),
        "bug-caught": _results(name, {"one-per-thread": 4.0, "host-flow": 10.0}),
        "bug-missed": _results(name, full),
        "bug-no-compile": _results(name, {"one-per-thread": 0.0, "host-flow": 0.0}, compiled=False),
        "correct-alt-ok": _results(name, full),
        "correct-alt-bad": _results(name, {"one-per-thread": 9.0, "host-flow": 10.0}),
    })
    out = io.StringIO()
    runs = mutation.run_mutants(tmp_path, [lab], tmp_path / "out", stdout=out, batch=batch, force=True)
    (run,) = runs
    status = {v.mutant: v.status for v in run.verdicts}
    assert status == {"alt-bad": "lost points", "alt-ok": "full", "caught": "caught", "missed": "missed",
                      "no-compile": "compile error"}
    assert run.reference == "full" and run.caught == 1 and run.rate == 0.5 and not run.ok
    assert calls[0][2] == [name] and calls[0][3] == {"force": True}
    text = mutation.format_runs(runs)
    assert "1/2" in text and "50%" in text and "1/2 full" in text
    assert "bug missed [one-per-thread]: missed" in text and "correct alt-bad [one-per-thread]: lost points" in text
    assert "bug no-compile [one-per-thread]: compile error" in text


def test_a_lab_at_the_goal_is_ok_and_the_verb_says_so(tmp_path):
    lab = _lab(tmp_path)
    name = lab.name
    _write(lab, "caught", "# kind: bug\n# task: one-per-thread\n# what: a\n# cause: guard\n")
    _write(lab, "alt", "# kind: correct\n# task: grid-stride\n# what: b\n")
    full = {"one-per-thread": 10.0}
    batch, calls = _fake_batch({mutation.REFERENCE_ID: _results(name, full), "bug-caught": _results(name, {"one-per-thread": 0.0}),
                                "correct-alt": _results(name, full)})
    out = io.StringIO()
    code = mutants.cmd_mutants(tmp_path, [], out=tmp_path / "o", stdout=out, batch=batch)
    assert code == Exit.OK, out.getvalue()
    # correctness only, runs side by side, and a failing mutant stops at its first failure, unsanitized
    options = calls[0][3]
    assert options["perf"] is False and options["gpu_runs"] == 3 and options["force"] is True
    assert options["stop_at_first_failure"] is True and options["sanitize_failing"] is False
    # --diagnose: every mutant graded as a student's grade runs, so its report's first entry is the student's.
    mutants.cmd_mutants(tmp_path, [], out=tmp_path / "o2", stdout=io.StringIO(), batch=batch, diagnose=True)
    options = calls[-1][3]
    assert options["stop_at_first_failure"] is False and options["sanitize_failing"] is True
    assert options["jobs"] == min(os.cpu_count() or 1, 5) and "gpus" not in options  # 3 runs + 2 slots ahead
    assert options["similarity"] is False  # every mutant is a copy of the reference
    assert (tmp_path / "o" / "mutation.txt").read_text().splitlines()[2].split()[1:3] == ["1/1", "100%"]
    data = json.loads((tmp_path / "o" / "mutation.json").read_text())
    assert data[0]["ok"] and data[0]["caught"] == 1


def test_the_gate_spreads_over_the_gpus_it_is_given(tmp_path, monkeypatch):
    from grader.host.environment import GpuDevice

    lab = _lab(tmp_path)
    _write(lab, "caught", "# kind: bug\n# task: one-per-thread\n# what: a\n# cause: guard\n")
    devices = [GpuDevice(0, "NVIDIA H100", "GPU-a"), GpuDevice(1, "NVIDIA H100", "GPU-b")]
    monkeypatch.setattr("grader.course.batch.gpus.parse_gpus", lambda spec: devices if spec == "all" else None)
    monkeypatch.setattr(os, "cpu_count", lambda: 32)
    batch, calls = _fake_batch({mutation.REFERENCE_ID: _results(lab.name, {"one-per-thread": 10.0}),
                                "bug-caught": _results(lab.name, {"one-per-thread": 0.0})})
    mutants.cmd_mutants(tmp_path, [], out=tmp_path / "o", stdout=io.StringIO(), batch=batch, gpus="all", gpu_runs=3)
    options = calls[0][3]
    assert options["gpus"] == devices and options["gpu_runs"] == 3 and options["jobs"] == 8  # 2 GPUs x 3 runs + 2


def test_points_lost_without_a_working_gpu_catch_nothing(tmp_path):
    """With no GPU (or one that stopped working mid-gate) every test is skipped or not run: the points a
    mutant then lacks say nothing, so it is neither caught nor missed, and the lab is not at its goal."""
    lab = _lab(tmp_path)
    _write(lab, "caught", "# kind: bug\n# task: one-per-thread\n# what: a\n# cause: guard\n")
    _write(lab, "sick", "# kind: bug\n# task: one-per-thread\n# what: b\n# cause: guard\n")
    no_gpu = _results(lab.name, {"one-per-thread": 0.0})
    no_gpu["run"] = {"gpu_available": False}
    sick = _results(lab.name, {"one-per-thread": 0.0})
    sick["labs"][0]["tests"][0].update(status="not_run", message="not graded: GPU unhealthy after S.x (probe: 999)")
    batch, _ = _fake_batch({mutation.REFERENCE_ID: no_gpu, "bug-caught": no_gpu, "bug-sick": sick})
    (run,) = mutation.run_mutants(tmp_path, [lab], tmp_path / "o", stdout=io.StringIO(), batch=batch)
    status = {v.mutant: v.status for v in run.verdicts}
    assert status == {"caught": "not graded (no GPU)", "sick": "not graded (GPU unhealthy)"}
    assert run.reference == "not graded (no GPU)" and run.caught == 0 and not run.ok


def test_an_ungraded_reference_fails_the_lab(tmp_path):
    lab = _lab(tmp_path)
    _write(lab, "caught", "# kind: bug\n# task: one-per-thread\n# what: a\n# cause: guard\n")
    batch, _ = _fake_batch({"bug-caught": _results(lab.name, {"one-per-thread": 0.0})})
    (run,) = mutation.run_mutants(tmp_path, [lab], tmp_path / "o", stdout=io.StringIO(), batch=batch)
    assert run.reference == "not graded" and not run.ok


def test_the_verb_refuses_a_broken_patch_before_grading(tmp_path):
    lab = _lab(tmp_path)
    _write(lab, "broken", "# kind: bug\n# task: one-per-thread\n# what: x\n# cause: guard\n", GUARD.replace("const int i", "long i"))
    batch, calls = _fake_batch({})
    with pytest.raises(GraderError, match="no longer matches") as err:
        mutants.cmd_mutants(tmp_path, [], out=tmp_path / "o", stdout=io.StringIO(), batch=batch)
    assert err.value.code == Exit.USAGE and not calls


def test_check_mode_exit_codes(tmp_path):
    lab = _lab(tmp_path)
    _write(lab, "guard-off-by-one", "# kind: bug\n# task: one-per-thread\n# what: the guard is i <= n\n# cause: guard\n")
    out = io.StringIO()
    assert mutants.cmd_mutants(tmp_path, [], check=True, stdout=out) == Exit.TEST_FAILURES
    assert "a lab needs at least 12" in out.getvalue()


def _two_labs(tmp_path: Path):
    """Labs 03 and 06 (lab.toml, contract, solution and their real mutant suites): a tree to spread."""
    import shutil

    for lab in discover(ROOT):
        if lab.name in ("03-vector-add", "06-reduce"):
            shutil.copytree(lab.path, tmp_path / "labs" / lab.name)
            shutil.copytree(lab.solution_dir, tmp_path / "solutions" / lab.name)
    return sorted(discover(tmp_path), key=lambda lab: lab.name)


def test_labs_spread_over_lanes_dearest_first():
    from types import SimpleNamespace as NS

    labs = [NS(name=n) for n in ("01", "02", "07", "08", "11")]
    costs = {"01": 26, "02": 25, "07": 34, "08": 96, "11": 99}
    groups = mutation.plan_lanes(labs, costs, 2)
    assert [[lab.name for lab in g] for g in groups] == [["01", "02", "11"], ["07", "08"]]
    assert [[lab.name for lab in g] for g in mutation.plan_lanes(labs, costs, 9)] == [["11"], ["08"], ["07"], ["01"], ["02"]]
    lab08 = NS(sanitizer={"tools": ["memcheck", "racecheck"]})
    assert mutation.lab_cost(lab08, 31) == 96 and mutation.lab_cost(NS(sanitizer={}), 24) == 25


def test_with_several_gpus_the_gate_grades_labs_side_by_side(tmp_path, monkeypatch):
    """--gpus with two GPUs and two labs: one lane per GPU, each pinned to its GPU with a work folder and
    build slots of its own, the two labs graded at once; the table still lists them in lab order."""
    import threading

    from grader.host.environment import GpuDevice

    labs = _two_labs(tmp_path)
    devices = [GpuDevice(0, "NVIDIA H100", "GPU-a"), GpuDevice(1, "NVIDIA H100", "GPU-b")]
    monkeypatch.setattr("grader.course.batch.gpus.parse_gpus", lambda spec: devices)
    monkeypatch.setattr(os, "cpu_count", lambda: 32)
    both_running = threading.Barrier(2, timeout=10)  # fails unless the two batches overlap
    calls = []

    def batch(root, subs, out, selectors, **options):
        calls.append((selectors[0], options))
        both_running.wait()
        full = {t.id: 10.0 for t in next(lab for lab in labs if lab.name == selectors[0]).tasks}
        for student in (p.name for p in Path(subs).iterdir()):
            (Path(out) / student).mkdir(parents=True, exist_ok=True)
            (Path(out) / student / "results.json").write_text(json.dumps(_results(selectors[0], full)))
        return Exit.OK

    out = io.StringIO()
    mutants.cmd_mutants(tmp_path, [], out=tmp_path / "o", stdout=out, batch=batch, gpus="0,1", gpu_runs=3)
    lanes = {lab: (o["gpus"], o["jobs"], o["work_dir"]) for lab, o in calls}
    assert sorted(lanes) == ["03-vector-add", "06-reduce"]
    assert {len(g) for g, _, _ in lanes.values()} == {1} and {g[0].index for g, _, _ in lanes.values()} == {0, 1}
    assert {j for _, j, _ in lanes.values()} == {5}  # 3 runs + 2 slots ahead, per GPU
    assert len({w for _, _, w in lanes.values()}) == 2  # separate pristine builds: no lock between them
    table = (tmp_path / "o" / "mutation.txt").read_text().splitlines()
    assert [ln.split()[0] for ln in table[2:4]] == ["03-vector-add", "06-reduce"]
    assert "on GPU 0" in out.getvalue() and "on GPU 1" in out.getvalue()
