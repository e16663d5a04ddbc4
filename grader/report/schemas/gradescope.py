"""Gradescope results.json (gradescope/autograder_samples docs/specs.md).

Every field is optional, but either the top-level score or a score on every test must be there.
Unknown fields are reported: Gradescope ignores them, so an unknown one is almost always a typo.
"""

from __future__ import annotations

from typing import Any

from grader.report.schemas._check import Schema, json_value_errors, validate

VISIBILITY = ("hidden", "after_due_date", "after_published", "visible")
OUTPUT_FORMATS = ("text", "simple_format", "html", "md", "ansi")
TEST_STATUS = ("passed", "failed")
LEADERBOARD_ORDER = ("asc", "desc")

_NUMBER: Schema = {"type": "number"}
_TEXT: Schema = {"type": "string"}
_FORMAT: Schema = {"type": "string", "enum": OUTPUT_FORMATS}
_VISIBILITY: Schema = {"type": "string", "enum": VISIBILITY}

TEST: Schema = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "score": _NUMBER,
        "max_score": {"type": "number", "minimum": 0},
        "status": {"type": "string", "enum": TEST_STATUS},
        "name": _TEXT,
        "name_format": _FORMAT,
        "number": _TEXT,
        "output": _TEXT,
        "output_format": _FORMAT,
        "tags": {"type": "array", "items": _TEXT},
        "visibility": _VISIBILITY,
        "extra_data": {"type": "object"},
    },
}

LEADERBOARD_ENTRY: Schema = {
    "type": "object",
    "additionalProperties": False,
    "required": ["name", "value"],
    "properties": {
        "name": {"type": "string", "minLength": 1},
        "value": {"type": ("number", "string")},
        "order": {"type": "string", "enum": LEADERBOARD_ORDER},
    },
}

RESULTS: Schema = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "score": _NUMBER,
        "execution_time": {"type": "number", "minimum": 0},
        "output": _TEXT,
        "output_format": _FORMAT,
        "test_output_format": _FORMAT,
        "test_name_format": _FORMAT,
        "visibility": _VISIBILITY,
        "stdout_visibility": _VISIBILITY,
        "extra_data": {"type": "object"},
        "tests": {"type": "array", "items": TEST},
        "leaderboard": {"type": "array", "items": LEADERBOARD_ENTRY},
    },
}


def validate_gradescope(data: Any) -> list[str]:
    """Problems with a Gradescope results.json object; [] when Gradescope will read it."""
    errors = json_value_errors(data) + validate(data, RESULTS)
    if errors or not isinstance(data, dict):
        return errors
    tests = data.get("tests", [])
    if "score" not in data:
        if not tests:
            errors.append("$: neither a top-level score nor tests with scores")
        errors += [
            f"$.tests[{i}]: no score, and no top-level score" for i, t in enumerate(tests) if "score" not in t
        ]
    return errors


__all__ = ["LEADERBOARD_ENTRY", "OUTPUT_FORMATS", "RESULTS", "TEST", "VISIBILITY", "validate_gradescope"]
