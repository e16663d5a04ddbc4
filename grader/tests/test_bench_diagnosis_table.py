"""bench/diagnosis_table.py without a GPU: a mutation gate's per-mutant results.json files counted by
what their first failure says (issue 25's per-lab diagnosis table)."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import diagnosis_table  # noqa: E402

from grader.model.results import Category, LabResult, Results, Status  # noqa: E402
from grader.model.results import TestResult as TResult  # noqa: E402
from grader.report.sample import sample_results  # noqa: E402
from grader.score import hints  # noqa: E402
from grader.tests.conftest import write_lab  # noqa: E402

LAB_HINT = "The carry between tiles is lost: add the tile's offset."
TAIL = ("Value of: x\n  Actual: false (3 of 257 elements differ (seed 42, exact); mismatches span indices "
        "254..256\n  [254] expected 1, actual 2779096485\n)\nExpected: true")  # the poison: never written


def _mutant(out: Path, name: str, test: TResult) -> None:
    results = sample_results()
    lab = LabResult(1, "01-add", "Add", 100, tests=[test])
    hints.annotate(lab, hints.hints_for_lab(out.parent / "tree" / "labs" / "01-add"), geometry={"block": 256})
    results.labs = [lab]
    results.save(out / "01-add" / "graded" / name / "results.json")


def test_each_caught_bug_is_counted_by_its_first_failure(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    write_lab(tree)
    (tree / "labs" / "01-add" / "hints.toml").write_text(
        '[causes]\ncarry = "the carry between tiles is lost"\n\n'
        f'[[hint]]\ncategory = "wrong_answer"\ntest = "AddCorrectness.Carry*"\ntext = "{LAB_HINT}"\n'
        'causes = ["carry"]\n')
    # What each bug plants (its header's cause): the table checks the first hint against it.
    planted = {"lab-hint": "carry", "tail": "grid-coverage", "race": "missing-barrier", "crash": "out-of-bounds",
               "missed": "guard", "default": "carry"}
    mutants = tree / "solutions" / "01-add" / "mutants"
    mutants.mkdir(parents=True)
    for name, cause in planted.items():
        (mutants / f"{name}.patch").write_text(f"# kind: bug\n# task: small\n# what: x\n# cause: {cause}\n"
                                               "--- a\n+++ b\n")
    out = tmp_path / "mutants"
    failed = dict(status=Status.FAILED, task="small")
    _mutant(out, "bug-lab-hint", TResult("AddCorrectness.Carry/1", category=Category.WRONG_ANSWER,
                                            message="Expected equality", **failed))
    _mutant(out, "bug-tail", TResult("AddCorrectness.Small/257", category=Category.WRONG_ANSWER, message=TAIL,
                                        **failed))
    _mutant(out, "bug-race", TResult("sanitizer.racecheck", category=Category.SANITIZER, message=(
        "compute-sanitizer racecheck reported 1 error(s):\n  Shared-memory race (error) between a write at "
        "add.cu:12 and a read at add.cu:14 in add_kernel"), **failed))
    _mutant(out, "bug-crash", TResult("AddCorrectness.Small/1", category=Category.CRASH,
                                         message="the test binary crashed (SIGSEGV)", **failed))
    _mutant(out, "bug-missed", TResult("AddCorrectness.Small/1", status=Status.PASSED))
    _mutant(out, "bug-default", TResult("AddCorrectness.Small/2", category=Category.WRONG_ANSWER,
                                        message="Expected equality", **failed))
    _mutant(out, "correct-alt", TResult("AddCorrectness.Small/2", category=Category.WRONG_ANSWER,
                                           message="Expected equality", **failed))
    rows = diagnosis_table.table(out, tree)
    assert rows["01-add"].kinds == {"lab hint": 1, "pattern": 1, "sanitizer": 1, "grader hint": 1, "default": 1}
    # Right: the lab hint (carry), the unwritten tail's grader hint (grid-coverage), racecheck's (missing-barrier). Wrong: the
    # crash's hint names a host fault, not the out-of-bounds index; the default names nothing.
    row = rows["01-add"]
    assert (row.right, row.labelled) == (3, 5)
    assert sorted(m.split(":")[0] for m in row.misses) == ["crash", "default"]
    assert "plants out-of-bounds; the first hint (AddCorrectness.Small/1) names host-fault" in " ".join(row.misses)
    text = diagnosis_table.render(rows)
    assert "01-add" in text and "4 of 5 caught bugs (80 %) are explained by more than the category's default" in text
    assert "3/5  60 %" in text and "not met in 01-add" in text
    assert Results.load(out / "01-add" / "graded" / "bug-tail" / "results.json").labs[0].tests[0].hint
    assert (row.graded, row.bugs) == (6, 6) and "not graded" not in text
    (mutants / "ungraded.patch").write_text("# kind: bug\n# task: small\n# what: x\n# cause: guard\n--- a\n+++ b\n")
    assert "01-add 6 of 7" in diagnosis_table.render(diagnosis_table.table(out, tree))
    # --rehint: the recorded failures explained by the hints the tree has now (a hint for the default's case).
    own = tree / "labs" / "01-add" / "hints.toml"
    own.write_text(own.read_text() + '\n[[hint]]\ncategory = "wrong_answer"\ntest = "AddCorrectness.Small/2"\n'
                   'text = "Each sum misses its carry."\ncauses = ["carry"]\n')
    hints.load_hints.cache_clear()
    assert diagnosis_table.table(out, tree)["01-add"].right == 3  # the hints recorded at grading
    fresh = diagnosis_table.table(out, tree, fresh_hints=True)["01-add"]
    assert (fresh.right, fresh.labelled) == (4, 5) and [m.split(":")[0] for m in fresh.misses] == ["crash"]


def test_a_gate_that_stopped_each_bug_at_its_first_failure_is_named(tmp_path: Path) -> None:
    """Without --diagnose the gate stops a bug at its first failure and skips the sanitizers: the table says
    its first entries are not what a student's full report shows first."""
    tree = tmp_path / "tree"
    write_lab(tree)
    out = tmp_path / "mutants"
    failed = TResult("AddCorrectness.Small/257", status=Status.FAILED, task="small", category=Category.WRONG_ANSWER,
                     message=TAIL)
    _mutant(out, "bug-full", failed)
    assert diagnosis_table.table(out, tree)["01-add"].cut_short == 0
    results = Results.load(out / "01-add" / "graded" / "bug-full" / "results.json")
    results.labs[0].tests.append(TResult("sanitizer.racecheck", status=Status.NOT_RUN, category=Category.HARNESS,
                                         message="not run: a correctness test failed already"))
    results.save(out / "01-add" / "graded" / "bug-full" / "results.json")
    rows = diagnosis_table.table(out, tree)
    assert rows["01-add"].cut_short == 1
    assert "1 of 1 caught bugs were graded only up to their first failure" in diagnosis_table.render(rows)
