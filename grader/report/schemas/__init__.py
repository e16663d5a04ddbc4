"""Schema checkers for every export, without network or dependencies: Gradescope results.json, the
GitHub Classroom runner result, JUnit XML, and the CSV gradebooks (Canvas's and Moodle's: lms.py).
Each validate_* returns a list of problems ("path: what is wrong"); an empty list means the consumer
will read the export.

check_exports(results) renders every export of one run and validates each (a runtime self-check)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from grader.report.schemas._check import json_value_errors, validate
from grader.report.schemas.classroom import validate_classroom, validate_classroom_encoded
from grader.report.schemas.gradebook import validate_class_gradebook, validate_csv_cells
from grader.report.schemas.gradescope import validate_gradescope
from grader.report.schemas.junit import validate_junit
from grader.report.schemas.lms import validate_canvas_csv, validate_moodle_csv

if TYPE_CHECKING:
    from grader.model.results import Results


def check_exports(results: Results) -> dict[str, list[str]]:
    """{export: problems} for the Gradescope, GitHub Classroom, JUnit and CSV renderings of results."""
    from grader.report.classroom import encode_classroom, render_classroom
    from grader.report.gradebook import render_csv
    from grader.report.gradescope import render_gradescope
    from grader.report.junit import render_junit

    gradescope = render_gradescope(results)
    problems = {
        "gradescope": validate_gradescope(gradescope),
        "classroom": validate_classroom(render_classroom(results)),
        "classroom_encoded": validate_classroom_encoded(encode_classroom(results)),
        "junit": validate_junit(render_junit(results)),
        "csv": validate_csv_cells(render_csv(results)),
    }
    try:  # what write_reports does with it
        json.dumps(gradescope, allow_nan=False)
    except ValueError as err:
        problems["gradescope"].append(f"not serializable as strict JSON: {err}")
    return problems


__all__ = [
    "check_exports",
    "json_value_errors",
    "validate",
    "validate_canvas_csv",
    "validate_class_gradebook",
    "validate_classroom",
    "validate_classroom_encoded",
    "validate_csv_cells",
    "validate_gradescope",
    "validate_junit",
    "validate_moodle_csv",
]
