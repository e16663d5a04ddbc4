"""Renderers of a Results object: terminal summary, self-contained HTML, results.json, JUnit XML,
Gradescope results.json, the GitHub Classroom runner result and a CSV gradebook row per lab. They read
only the result model. write_reports writes them all; hidden tests appear in each as grader/model/hidden.py says."""

from __future__ import annotations

import json
from pathlib import Path

from grader.report.console import render_console
from grader.report.gradebook import render_csv
from grader.report.gradescope import render_gradescope
from grader.report.html import render_html
from grader.report.junit import render_junit
from grader.model.results import Results

__all__ = [
    "render_console",
    "render_csv",
    "render_gradescope",
    "render_html",
    "render_junit",
    "results_json",
    "write_reports",
]

FILES = {
    "json": "results.json",
    "html": "report.html",
    "junit": "junit.xml",
    "gradescope": "gradescope.json",
    "csv": "grades.csv",
    "classroom": "classroom.json",
    "classroom_b64": "classroom.b64",
}


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)  # a reader never sees half a report


def results_json(results: Results) -> str:
    """results.json: the whole run (Results.to_dict) and, beside it, "grade": whether the score is a
    grade (grader/report/standing.py). Results.load reads it back and ignores "grade"."""
    from grader.report.standing import grade_record

    data = results.to_dict()
    data["grade"] = grade_record(results)
    return json.dumps(data, indent=2) + "\n"


def write_reports(
    results: Results, out_dir: Path, reveal_hidden: bool = False, root: Path | None = None
) -> dict[str, Path]:
    """Write every report into out_dir; returns {format: path}.

    results.json is the whole record, hidden tests and absolute paths included (the instructor's).
    Gradescope gets every test too and gates hidden ones with its own visibility. HTML, JUnit, CSV and
    the GitHub Classroom result render hidden.redact(results, reveal_hidden): concealed hidden tests
    are counted, never named. Every export but results.json shows paths relative to the checkout
    (root, and the grader's own; grader/report/paths.py)."""
    from grader.model.hidden import redact
    from grader.report.classroom import encode_classroom, render_classroom
    from grader.report.paths import portable, roots_of

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {fmt: out_dir / name for fmt, name in FILES.items()}
    roots = roots_of(root)
    shown = portable(redact(results, reveal_hidden), roots)
    _write(paths["json"], results_json(results))
    _write(paths["html"], render_html(shown))
    _write(paths["junit"], render_junit(shown))
    gradescope = render_gradescope(portable(results, roots))
    _write(paths["gradescope"], json.dumps(gradescope, indent=2, ensure_ascii=False) + "\n")
    _write(paths["csv"], render_csv(shown))
    _write(paths["classroom"], json.dumps(render_classroom(shown), indent=2, ensure_ascii=False) + "\n")
    _write(paths["classroom_b64"], encode_classroom(shown) + "\n")
    return paths


# Class-level (batch) reports and the GitHub Classroom runner result; write_reports above is unchanged.
from grader.report.batch import (
    StudentOutcome,
    render_class_summary,
    render_gradebook_csv,
    write_batch_reports,
)
from grader.report.classroom import encode_classroom, render_classroom

__all__ += [
    "StudentOutcome",
    "encode_classroom",
    "render_class_summary",
    "render_classroom",
    "render_gradebook_csv",
    "write_batch_reports",
]
