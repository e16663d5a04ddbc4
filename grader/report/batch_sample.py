"""A made-up class for looking at the batch reports without a GPU or any submissions:

    python3 -m grader.report.batch_sample OUT_DIR    # writes class-summary.html and gradebook.csv

sample_outcomes(): fourteen students graded on labs 03, 05, 06 and 09 of grader.report.sample (seeded,
so the page is the same every time), one who graded without a GPU, one whose lab 03 does not build,
and two broken submissions (no results: a missing file, a grader timeout).
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

from grader.report.batch import StudentOutcome, write_batch_reports
from grader.report.sample import _matmul_lab, _reduce_lab, _run, _streams_lab, _vector_add_lab
from grader.model.results import Category, LabResult, Perf, PerfSeries, Results, Status, TestResult

STUDENTS = [
    "ada.lovelace",
    "alan.turing",
    "barbara.liskov",
    "claude.shannon",
    "donald.knuth",
    "edsger.dijkstra",
    "frances.allen",
    "grace.hopper",
    "john.backus",
    "ken.thompson",
    "leslie.lamport",
    "margaret.hamilton",
    "radia.perlman",
    "tony.hoare",
]
_FULL_AT, _ZERO_AT = 0.9, 0.5  # the rubric's perf goal: full speed points at 0.9x the reference


def _fail(t: TestResult, rng: random.Random) -> None:
    t.status = Status.FAILED
    t.category = rng.choice([Category.WRONG_ANSWER] * 4 + [Category.CUDA_ERROR, Category.TIMEOUT])
    t.message = {
        Category.WRONG_ANSWER: f"{rng.randint(1, 900)} of {rng.randint(1000, 9000)} elements differ (seed 7)",
        Category.CUDA_ERROR: "cudaErrorIllegalAddress: an illegal memory access was encountered",
        Category.TIMEOUT: "the test did not finish within 20 s",
    }[t.category]


def _rescore(lab: LabResult) -> LabResult:
    """Recompute task and lab points from the tests, as grader.score.scoring would."""
    for task in lab.tasks:
        members = [t for t in lab.tests if t.task == task.id and t.perf is None and t.kind != "perf"]
        if members:
            task.tests_total = len(members)
            task.tests_passed = sum(t.status is Status.PASSED for t in members)
            task.earned = round(task.points * task.tests_passed / task.tests_total, 4)
        task.perf_earned = 0.0
        for t in lab.tests:
            if t.task != task.id or t.perf is None or t.perf.points <= 0:
                continue
            ratio = t.perf.ratio_to_reference or 0.0
            frac = min(1.0, max(0.0, (ratio - _ZERO_AT) / (_FULL_AT - _ZERO_AT)))
            t.perf.earned = round(t.perf.points * frac, 4) if t.status is Status.PASSED else 0.0
            task.perf_earned = round(task.perf_earned + t.perf.earned, 4)
    lab.score = round(sum(t.earned + t.perf_earned for t in lab.tasks), 4)
    return lab


def _student(name: str, rng: random.Random, skill: float) -> Results:
    run = _run(gpu=True)
    run.submission = f"submissions/{name}"
    labs = [_vector_add_lab(), _matmul_lab(), _reduce_lab(), _streams_lab()]
    vec, mat, red, streams = labs
    if rng.random() < 0.85:  # most students' lab 03 builds and mostly passes
        vec.builds[0].ok, vec.builds[0].category, vec.builds[0].log, vec.builds[0].message = (
            True,
            None,
            "",
            "",
        )
        vec.messages = []
        for t in vec.tests:
            t.status, t.category, t.message = Status.PASSED, None, ""
            if rng.random() > skill + 0.15:
                _fail(t, rng)
    for lab in (mat, red, streams):
        lab.messages = []
        for t in lab.tests:
            if t.perf is not None or t.kind == "perf":
                continue
            passed = rng.random() < skill
            t.status, t.category, t.message, t.hint, t.properties = Status.PASSED, None, "", "", {}
            if not passed:
                _fail(t, rng)
    for t in mat.tests:  # the tiled perf test is timed only when tiled is correct
        if t.name == "MatmulPerf.Tiled/2048":
            tiled_ok = all(
                x.status is Status.PASSED for x in mat.tests if x.task == "tiled" and x.kind != "perf"
            )
            if tiled_ok:
                ms = 0.62 / (0.4 + 0.7 * skill + rng.uniform(-0.1, 0.15))
                t.status, t.message, t.properties = Status.PASSED, "", {}
                t.perf = Perf(
                    "TFLOP/s",
                    2.0 * 2048**3,
                    [PerfSeries("impl", ms, samples=20), PerfSeries("cublas", 0.31, samples=20)],
                    baseline="cublas",
                    label="2048 x 2048",
                    reference=PerfSeries("impl", 0.62, samples=20),
                    points=10.0,
                )
    for lab in (red, streams):
        for t in lab.tests:
            if t.perf is None:
                continue
            task_ok = all(x.status is Status.PASSED for x in lab.tests if x.task == t.task and x.perf is None)
            if not task_ok:
                t.status, t.perf, t.message = (
                    Status.SKIPPED,
                    None,
                    "the function is incorrect at this size: not timed",
                )
                continue
            impl = t.perf.impl
            ref = t.perf.reference
            assert impl is not None and ref is not None
            impl.median_ms = round(
                ref.median_ms / max(0.3, 0.55 + 0.55 * skill + rng.uniform(-0.12, 0.12)), 4
            )
    for lab in labs:
        _rescore(lab)
    return Results(run=run, labs=labs)


def sample_outcomes() -> list[StudentOutcome]:
    rng = random.Random(408)
    outcomes = []
    for name in STUDENTS:
        skill = min(1.0, max(0.2, rng.gauss(0.8, 0.17)))
        results = _student(name, rng, skill)
        outcomes.append(
            StudentOutcome(name, results, report_dir=f"students/{name}", seconds=rng.uniform(180, 420))
        )
    # one run on a machine without a GPU: not graded, no score
    lonely = _student("ivan.sutherland", rng, 1.0)
    lonely.run = _run(gpu=False)
    lonely.run.submission = "submissions/ivan.sutherland"
    reason = "no CUDA device (cudaGetDeviceCount: no CUDA-capable device is detected)"
    for lab in lonely.labs:
        for t in lab.tests:
            if t.status is Status.PASSED or t.perf is not None:
                t.status, t.category, t.perf, t.message = Status.SKIPPED, Category.NO_GPU, None, ""
                t.properties = {"skip_reason": reason}
        _rescore(lab)
    outcomes.append(
        StudentOutcome(
            "ivan.sutherland",
            lonely,
            report_dir="students/ivan.sutherland",
            seconds=95.0,
        )
    )
    outcomes.append(
        StudentOutcome(
            "jim.gray",
            None,
            error="submission has no vector_add.cu (expected labs/03-vector-add/vector_add.cu in the archive)",
            report_dir="students/jim.gray",
            seconds=0.4,
        )
    )
    outcomes.append(
        StudentOutcome(
            "niklaus.wirth",
            None,
            error="the grader timed out after 1800 s while building lab 05\n(last output: nvcc -O3 ... tiled_matmul.cu)",
            seconds=1800.0,
        )
    )
    return outcomes


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python3 -m grader.report.batch_sample OUT_DIR", file=sys.stderr)
        return 2
    for fmt, path in write_batch_reports(
        sample_outcomes(), Path(argv[0]), "CS 508 · fall 2025 · labs 03–09"
    ).items():
        print(f"{fmt:>5}: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
