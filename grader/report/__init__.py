"""Renderers of a Results object: terminal summary, self-contained HTML, results.json, JUnit XML,
Gradescope results.json and a CSV gradebook row per lab. They read only the result model."""

from __future__ import annotations

import json
from pathlib import Path

from grader.report.console import render_console
from grader.report.gradebook import render_csv
from grader.report.gradescope import render_gradescope
from grader.report.html import render_html
from grader.report.junit import render_junit
from grader.results import Results

__all__ = [
    "render_console",
    "render_csv",
    "render_gradescope",
    "render_html",
    "render_junit",
    "write_reports",
]

FILES = {
    "json": "results.json",
    "html": "report.html",
    "junit": "junit.xml",
    "gradescope": "gradescope.json",
    "csv": "grades.csv",
}


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)  # a reader never sees half a report


def write_reports(results: Results, out_dir: Path) -> dict[str, Path]:
    """Write every report into out_dir; returns {format: path}."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {fmt: out_dir / name for fmt, name in FILES.items()}
    results.save(paths["json"])
    _write(paths["html"], render_html(results))
    _write(paths["junit"], render_junit(results))
    _write(paths["gradescope"], json.dumps(render_gradescope(results), indent=2, ensure_ascii=False) + "\n")
    _write(paths["csv"], render_csv(results))
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
