"""The GitHub Classroom runner `result` object: what a grader
action puts, base64-encoded, in its `result` output and classroom-resources/autograding-grading-reporter
decodes. The reporter sums tests[].score (so every test needs a numeric score), takes max_score from
the top level, prints message for errors and test_code when present, and fails the job on a top-level
status of fail or error. A negative score is a deduction the reporter adds like any other (the grader's
late penalty); the sum must stay between 0 and max_score."""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from grader.report.schemas._check import Schema, json_value_errors, validate

STATUS = ("pass", "fail", "error")

TEST: Schema = {
    "type": "object",
    "additionalProperties": False,
    "required": ["name", "status", "score"],
    "properties": {
        "name": {"type": "string", "minLength": 1},
        "status": {"type": "string", "enum": STATUS},
        "score": {"type": "number"},  # negative: a deduction (a late penalty)
        "message": {"type": "string"},
        "test_code": {"type": "string"},
        "filename": {"type": "string"},
        "line_no": {"type": "integer", "minimum": 0},
        "duration": {"type": "number", "minimum": 0},
    },
}

RESULT: Schema = {
    "type": "object",
    "additionalProperties": False,
    "required": ["version", "status", "max_score", "tests"],
    "properties": {
        "version": {"type": "integer", "const": 1},
        "status": {"type": "string", "enum": STATUS},
        "max_score": {"type": "number", "minimum": 0},
        "tests": {"type": "array", "items": TEST},
    },
}


def validate_classroom(data: Any) -> list[str]:
    """Problems with a runner result object; [] when the reporter will add it up correctly."""
    errors = json_value_errors(data) + validate(data, RESULT)
    if errors:
        return errors
    tests = data["tests"]
    statuses = {t["status"] for t in tests}
    if data["status"] == "pass" and statuses - {"pass"}:
        errors.append("$.status: 'pass' while some tests did not pass")
    if data["status"] != "pass" and tests and statuses == {"pass"}:
        errors.append(f"$.status: {data['status']!r} while every test passed")
    if "error" in statuses and data["status"] != "error":
        errors.append("$.status: a test errored, so the result must be 'error'")
    total = sum(t["score"] for t in tests)
    if total > data["max_score"] + 1e-6:
        errors.append(f"$: the tests' scores add up to {total:g}, above max_score {data['max_score']:g}")
    if total < -1e-6:
        errors.append(f"$: the tests' scores add up to {total:g}, below 0")
    errors += [f"$.tests[{i}].status: a deduction (score {t['score']:g}) must be 'fail' or 'error'"
               for i, t in enumerate(tests) if t["score"] < 0 and t["status"] == "pass"]
    names = [t["name"] for t in tests]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        errors.append(f"$.tests: duplicate names {dupes[:3]}")
    return errors


def validate_classroom_encoded(text: str) -> list[str]:
    """The step output as the reporter reads it: base64 of UTF-8 JSON, on one line."""
    if not isinstance(text, str) or not text or any(c.isspace() for c in text):
        return ["the encoded result must be one non-empty line without whitespace"]
    try:
        raw = base64.b64decode(text, validate=True)
        data = json.loads(raw.decode("utf-8"))
    except (binascii.Error, ValueError) as err:
        return [f"the encoded result does not decode as base64 JSON: {err}"]
    return validate_classroom(data)


__all__ = ["RESULT", "STATUS", "TEST", "validate_classroom", "validate_classroom_encoded"]
