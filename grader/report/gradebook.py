"""grades.csv for one run: one row per lab, long format (batch tools stack these into a class gradebook).
A lab that could not be graded (no GPU: grader/report/standing.py) has an empty score and its status
says why; a graded lab's status is "graded"."""

from __future__ import annotations

import csv
import io

from grader.report._format import clean_text, gpu_device, gpu_name
from grader.report.standing import GRADED, NOT_GRADED_NO_GPU, build_label, lab_standing
from grader.model.results import Results

COLUMNS = [
    "lab",
    "title",
    "score",
    "max_score",
    "passed",
    "failed",
    "skipped",
    "not_run",
    "perf_earned",
    "perf_points",
    "build_ok",
    "mode",
    "submission",
    "commit",
    "gpu",
    "started",
    "status",
]


def _cell(value: object) -> str:
    """Text cells cannot start a spreadsheet formula (=, +, -, @, tab, CR)."""
    text = clean_text(value).replace("\n", " ")
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


def _num(value: float) -> str:
    return f"{value:.4f}".rstrip("0").rstrip(".") if value != int(value) else str(int(value))


def render_csv(results: Results) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(COLUMNS)
    run = results.run
    gpu = (gpu_device(run) or gpu_name(run)) if run.gpu_available else ""
    for lab in results.labs:
        graded = lab_standing(lab).graded
        writer.writerow(
            [
                lab.name,
                _cell(lab.title),
                _num(lab.score) if graded else "",
                _num(lab.max_score),
                lab.passed,
                lab.failed,
                lab.skipped,
                lab.not_run,
                _num(sum(t.perf_earned for t in lab.tasks)) if graded else "",
                _num(sum(t.perf_points for t in lab.tasks)),
                "true" if build_label(lab) == "built" else "false",
                run.mode,
                _cell(run.submission),
                _cell(run.commit),
                _cell(gpu),
                _cell(run.started),
                GRADED if graded else NOT_GRADED_NO_GPU,
            ]
        )
    return out.getvalue()
