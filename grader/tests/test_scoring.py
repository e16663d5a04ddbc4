"""Scoring from a rubric: task fractions, skipped tests, perf credit against the reference."""

from __future__ import annotations

from pathlib import Path

import pytest

from grader.execute import gtest
from grader.score import penalties
from grader.model.labs import load_lab
from grader.model.results import Category, LabResult, Perf, PerfSeries, Status
from grader.model.results import TestResult as TResult
from grader.score.scoring import perf_fraction, score_lab

from grader.tests.conftest import FIXTURES, write_lab


@pytest.fixture
def lab(tmp_path: Path):
    return load_lab(write_lab(tmp_path), tmp_path)


def t(name: str, status: Status = Status.PASSED, message: str = "", category: Category | None = None) -> TResult:
    kind = "perf" if gtest.is_perf_suite(name.split(".")[0]) else "correctness"
    return TResult(name=name, status=status, kind=kind, message=message, category=category)


def perf_test(student_ms: float, reference_ms: float | None, status: Status = Status.PASSED) -> TResult:
    test = t("AddPerf.Fast/16777216", status)
    test.perf = Perf(
        metric="GB/s", work=1e9, variants=[PerfSeries("impl", student_ms)],
        reference=PerfSeries("impl", reference_ms) if reference_ms else None,
    )
    return test


def result(*tests: TResult) -> LabResult:
    return LabResult(number=1, name="01-add", title="Add", max_score=0, tests=list(tests))


def task(res: LabResult, task_id: str):
    return next(ts for ts in res.tasks if ts.id == task_id)


def test_task_points_in_proportion(lab) -> None:
    res = score_lab(lab, result(
        t("AddCorrectness.Small/1"), t("AddCorrectness.Small/257", Status.FAILED),
        t("AddCorrectness.Large/1"), t("AddCorrectness.Large/2"),
        perf_test(1.0, 1.0),
    ))
    small, large = task(res, "small"), task(res, "large")
    assert (small.tests_passed, small.tests_total, small.earned) == (1, 2, 20.0)
    assert (large.tests_passed, large.tests_total, large.earned) == (2, 2, 40.0)
    assert large.perf_points == 20 and large.perf_earned == 20.0
    assert res.max_score == 100 and res.score == 80.0
    assert [x.task for x in res.tests] == ["small", "small", "large", "large", "large"]


def test_no_gpu_skips_count_as_not_passed_small_mode_skips_are_excluded(lab) -> None:
    res = score_lab(lab, result(
        t("AddCorrectness.Small/1"),
        t("AddCorrectness.Small/2", Status.SKIPPED, "no CUDA device (no driver)", Category.NO_GPU),
        t("AddCorrectness.Large/1"),
        t("AddCorrectness.Large/99999999", Status.SKIPPED, "small mode (CUDALAB_SMALL): size 99999999 left out"),
    ))
    assert task(res, "small").earned == 20.0 and task(res, "small").tests_total == 2
    assert task(res, "large").earned == 40.0 and task(res, "large").tests_total == 1


@pytest.mark.parametrize(
    ("student_ms", "reference_ms", "earned"),
    [
        (1.0, 1.0, 20.0),  # as fast as the reference: r = 1 >= full_at
        (1.0, 0.9, 20.0),  # r = 0.9 = full_at
        (1.0, 0.7, 10.0),  # r = 0.7: halfway between zero_at 0.5 and full_at 0.9
        (1.0, 0.5, 0.0),  # r = zero_at
        (4.0, 1.0, 0.0),  # far slower
        (0.5, 1.0, 20.0),  # faster than the reference: clamped
    ],
)
def test_perf_points_are_linear_between_zero_at_and_full_at(lab, student_ms, reference_ms, earned) -> None:
    res = score_lab(lab, result(perf_test(student_ms, reference_ms)))
    assert task(res, "large").perf_earned == pytest.approx(earned)
    assert res.tests[0].perf.points == 20 and res.tests[0].perf.earned == pytest.approx(earned)


def test_perf_needs_a_run_and_a_reference(lab) -> None:
    skipped = perf_test(1.0, 1.0, Status.SKIPPED)
    res = score_lab(lab, result(skipped))
    assert task(res, "large").perf_earned == 0
    res = score_lab(lab, result(perf_test(1.0, None)))
    assert task(res, "large").perf_earned == 0
    assert any("no reference timing" in n for n in task(res, "large").notes)
    res = score_lab(lab, result(t("AddPerf.Fast/16777216", Status.SKIPPED, "f is incorrect at this size: not timed")))
    assert task(res, "large").perf_earned == 0


def test_unmatched_tests_are_kept_with_no_points(lab) -> None:
    res = score_lab(lab, result(t("Other.Thing"), t("AddCorrectness.Small/1")))
    assert res.tests[0].task is None and len(res.tests) == 2
    assert res.score == 40.0


def test_perf_fraction_edge_cases(lab) -> None:
    goal = lab.perf[0]
    assert perf_fraction(None, goal) == 0.0
    assert perf_fraction(0.7, goal) == pytest.approx(0.5)


def test_score_real_lab03_runs() -> None:
    root = Path(__file__).resolve().parents[2]
    lab = load_lab(root / "labs" / "03-vector-add", root)
    student = gtest.load_report(FIXTURES / "lab03_student_fail.json").tests
    res = score_lab(lab, result(*student))
    assert res.max_score == 100
    assert 0 <= res.score < 100
    solution = gtest.load_report(FIXTURES / "lab03_solution_pass.json", "solution").tests
    for x in solution:
        if x.perf:
            x.perf.reference = x.perf.impl
    # lab.toml's hidden task counts only the hidden binary's tests (the fixture has none of them)
    assert score_lab(lab, result(*solution)).score == 90.0
    hidden = TResult("VectorAddHiddenCorrectness.Fast/16777229", Status.PASSED, binary="hidden")
    res = score_lab(lab, result(*solution, hidden))
    assert res.score == 100.0
    no_gpu = gtest.load_report(FIXTURES / "lab03_student_no_gpu.json").tests
    assert score_lab(lab, result(*no_gpu)).score == 0


def test_all_or_nothing_task_earns_nothing_when_one_test_fails(tmp_path: Path) -> None:
    from grader.tests.conftest import LAB_TOML

    toml = LAB_TOML.replace('tests = ["AddCorrectness.Small/*"]',
                            'tests = ["AddCorrectness.Small/*"]\nscoring = "all-or-nothing"')
    lab = load_lab(write_lab(tmp_path, toml=toml), tmp_path)
    res = score_lab(lab, result(t("AddCorrectness.Small/1"), t("AddCorrectness.Small/2"),
                                t("AddCorrectness.Small/257", Status.FAILED), t("AddCorrectness.Large/1")))
    small = task(res, "small")
    assert (small.tests_passed, small.tests_total, small.earned) == (2, 3, 0.0)
    assert "all or nothing: 1 of 3 test(s) failed, so the task earns no points" in small.notes
    res = score_lab(lab, result(t("AddCorrectness.Small/1"), t("AddCorrectness.Small/2"), t("AddCorrectness.Large/1")))
    assert task(res, "small").earned == 40.0
    # A test that did not run (a crash before it, the time limit) counts as not passed, and is said apart:
    # on the H200, lab 05's gate said "18 of 19 test(s) failed" where 1 failed and the rest did not run.
    res = score_lab(lab, result(t("AddCorrectness.Small/1", Status.FAILED), t("AddCorrectness.Small/2", Status.NOT_RUN),
                                t("AddCorrectness.Small/257", Status.NOT_RUN)))
    assert task(res, "small").notes == ["all or nothing: 1 of 3 test(s) failed and 2 did not run, so the task earns "
                                        "no points"]
    res = score_lab(lab, result(t("AddCorrectness.Small/1"), t("AddCorrectness.Small/2", Status.NOT_RUN)))
    assert task(res, "small").notes == ["all or nothing: 1 of 2 test(s) did not run, so the task earns no points"]


def test_a_sanitizer_finding_costs_the_task_that_owns_the_kernel(tmp_path: Path) -> None:
    from grader.execute import sanitizer

    from grader.tests.conftest import LAB_TOML

    toml = (LAB_TOML.replace('tests = ["AddCorrectness.Small/*"]',
                             'tests = ["AddCorrectness.Small/*"]\nkernels = ["add_small_*"]')
            + '\n[sanitizer]\ntools = ["memcheck", "racecheck"]\ncost = 0.5\n')
    lab = load_lab(write_lab(tmp_path, toml=toml), tmp_path)
    assert lab.task_for_kernel("add_small_kernel").id == "small" and lab.task_for_kernel("other") is None
    res = score_lab(lab, result(t("AddCorrectness.Small/1"), t("AddCorrectness.Large/1")))
    assert res.score == 80.0
    tools = sanitizer.not_run(["memcheck", "racecheck"], "why")
    tools[0].status = Status.FAILED
    tools[0].properties["sanitizer_kernels"] = "add_small_kernel,helper_nobody_owns"
    tools[1].status = Status.PASSED
    penalties.apply_points(lab, res, tools)
    small = task(res, "small")
    assert small.earned == 20.0 and res.score == 60.0  # half of the task's 40 points, once
    assert any("memcheck in add_small_kernel" in n for n in small.notes)
    assert task(res, "large").earned == 40.0 and tools[0].task == "small"


def test_a_finding_inside_an_inlined_function_costs_its_owner_else_the_kernels(tmp_path: Path) -> None:
    """A memcheck finding inside a libcu++ atomic cost no task (no task owns the atomic); now it costs the
    kernel's. One inside a helper a task owns still costs that task, as before."""
    from grader.execute import sanitizer
    from grader.tests.conftest import LAB_TOML

    toml = (LAB_TOML.replace('tests = ["AddCorrectness.Small/*"]',
                             'tests = ["AddCorrectness.Small/*"]\nkernels = ["add_small_*", "small_helper"]')
            .replace('tests = ["AddCorrectness.Large/*"]', 'tests = ["AddCorrectness.Large/*"]\nkernels = ["add_large_*"]')
            + '\n[sanitizer]\ntools = ["memcheck"]\ncost = 0.5\n')
    lab = load_lab(write_lab(tmp_path, toml=toml), tmp_path)
    for entry, charged in [("cuda::std::__4::__cuda_atomic_store<unsigned long>>add_large_kernel<false, 256, 4>", "large"),
                           ("small_helper>add_large_kernel<true, 256, 4>", "small")]:
        res = score_lab(lab, result(t("AddCorrectness.Small/1"), t("AddCorrectness.Large/1")))
        tools = sanitizer.not_run(["memcheck"], "why")
        tools[0].status = Status.FAILED
        tools[0].properties["sanitizer_kernels"] = entry
        penalties.apply_points(lab, res, tools)
        assert task(res, charged).earned == 20.0 and res.score == 60.0 and tools[0].task == charged, entry


def test_a_gpu_too_small_is_excused_but_memory_held_elsewhere_is_not(lab) -> None:
    too_small = t("AddCorrectness.Large/2", Status.SKIPPED,
                  "GPU too small: this test needs 19456 MiB of device memory and this GPU has 8192 MiB in all")
    res = score_lab(lab, result(t("AddCorrectness.Large/1"), too_small))
    assert (task(res, "large").tests_passed, task(res, "large").tests_total, task(res, "large").earned) == (1, 1, 40.0)
    assert any("need more device memory than this GPU has" in m for m in res.messages)
    held = t("AddCorrectness.Large/2", Status.SKIPPED,
             "not enough free GPU memory: this test needs 19456 MiB and 2048 MiB are free (another process ...)")
    res = score_lab(lab, result(t("AddCorrectness.Large/1"), held))
    assert (task(res, "large").tests_total, task(res, "large").earned) == (2, 20.0)


def test_a_big_all_or_nothing_task_reports_its_checkpoints(tmp_path: Path) -> None:
    """Issue 29: lab 07's any-n task is 25 points, all or nothing; a student who fails it sees which step is
    wrong. Declared checkpoints count the task's tests up to max_n; points do not change."""
    from grader.tests.conftest import LAB_TOML

    toml = LAB_TOML.replace('tests = ["AddCorrectness.Small/*"]', '''tests = ["AddCorrectness.Small/*", "AddHugeCorrectness.Big"]
scoring = "all-or-nothing"
checkpoints = [
  { title = "one block", tests = ["AddCorrectness.Small/*"], max_n = 256 },
  { title = "any n", tests = ["AddCorrectness.Small/*"] },
  { title = "past 2^32", tests = ["AddHugeCorrectness.Big"] },
]''')
    lab = load_lab(write_lab(tmp_path, toml=toml), tmp_path)
    res = score_lab(lab, result(t("AddCorrectness.Small/1"), t("AddCorrectness.Small/256"),
                                t("AddCorrectness.Small/257", Status.FAILED), t("AddHugeCorrectness.Big", Status.NOT_RUN)))
    small = task(res, "small")
    assert [(c.title, c.passed, c.total, c.ok) for c in small.checkpoints] == [
        ("one block", 2, 2, True), ("any n", 0, 1, False), ("past 2^32", 0, 1, False)]  # what each step adds
    assert small.earned == 0.0


def test_an_undeclared_big_all_or_nothing_task_gets_one_checkpoint_per_test_family(tmp_path: Path) -> None:
    from grader.tests.conftest import LAB_TOML

    toml = LAB_TOML.replace('points = 40\ntests = ["AddCorrectness.Small/*"]',
                            'points = 20\ntests = ["AddCorrectness.Small/*", "AddEdgeCorrectness.*"]\n'
                            'scoring = "all-or-nothing"')
    lab = load_lab(write_lab(tmp_path, toml=toml), tmp_path)
    res = score_lab(lab, result(t("AddCorrectness.Small/1"), t("AddCorrectness.Small/2", Status.FAILED),
                                t("AddEdgeCorrectness.Empty"), t("AddEdgeCorrectness.Aliased")))
    assert [(c.title, c.passed, c.total) for c in task(res, "small").checkpoints] == [
        ("AddCorrectness.Small", 1, 2), ("AddEdgeCorrectness.Empty", 1, 1), ("AddEdgeCorrectness.Aliased", 1, 1)]
    # 15 points or fewer, or proportional: the test list says enough.
    small = load_lab(write_lab(tmp_path / "b", toml=toml.replace("points = 20", "points = 15")), tmp_path / "b")
    assert task(score_lab(small, result(t("AddCorrectness.Small/1"), t("AddEdgeCorrectness.Empty"))),
                "small").checkpoints == []
