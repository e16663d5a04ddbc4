"""A tiny validator for a JSON-Schema-like subset, enough to pin an export's shape without a dependency.

Keywords: type ("object", "array", "string", "number", "integer", "boolean", "null", or a tuple of
them), enum, const, properties, required, additionalProperties (bool or schema), items, minItems,
minimum, maximum, minLength, pattern. Numbers must be finite (JSON has no NaN or Infinity) and a bool
is never a number. validate() returns a list of "path: problem" lines; an empty list means valid.
"""

from __future__ import annotations

import math
import re
from typing import Any

Schema = dict[str, Any]

_TYPES = ("object", "array", "string", "number", "integer", "boolean", "null")


def _is(value: Any, kind: str) -> bool:
    if kind == "object":
        return isinstance(value, dict)
    if kind == "array":
        return isinstance(value, list)
    if kind == "string":
        return isinstance(value, str)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "null":
        return value is None
    if isinstance(value, bool):
        return False
    if kind == "integer":
        return isinstance(value, int)
    if kind == "number":
        return isinstance(value, (int, float))
    raise ValueError(f"unknown schema type {kind!r}")


def validate(value: Any, schema: Schema, path: str = "$") -> list[str]:
    errors: list[str] = []
    kinds = schema.get("type")
    if kinds is not None:
        kinds = (kinds,) if isinstance(kinds, str) else tuple(kinds)
        if not any(_is(value, k) for k in kinds):
            return [f"{path}: expected {' or '.join(kinds)}, got {type(value).__name__} {_show(value)}"]
    if "const" in schema and value != schema["const"]:
        errors.append(f"{path}: must be {schema['const']!r}, got {_show(value)}")
    if "enum" in schema and value not in schema["enum"]:
        allowed = ", ".join(repr(v) for v in schema["enum"])
        errors.append(f"{path}: {_show(value)} is not one of {allowed}")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if isinstance(value, float) and not math.isfinite(value):
            errors.append(f"{path}: {value} is not a finite number (JSON cannot hold it)")
        elif "minimum" in schema and value < schema["minimum"]:
            errors.append(f"{path}: {value} is below the minimum {schema['minimum']}")
        elif "maximum" in schema and value > schema["maximum"]:
            errors.append(f"{path}: {value} is above the maximum {schema['maximum']}")
    if isinstance(value, str):
        if "minLength" in schema and len(value) < schema["minLength"]:
            errors.append(f"{path}: shorter than {schema['minLength']} characters")
        if "pattern" in schema and not re.search(schema["pattern"], value):
            errors.append(f"{path}: {_show(value)} does not match {schema['pattern']}")
    if isinstance(value, dict):
        for key in schema.get("required", ()):
            if key not in value:
                errors.append(f"{path}: missing required field {key!r}")
        props: dict[str, Schema] = schema.get("properties", {})
        extra = schema.get("additionalProperties", True)
        for key, item in value.items():
            if not isinstance(key, str):
                errors.append(f"{path}: key {key!r} is not a string")
                continue
            if key in props:
                errors += validate(item, props[key], f"{path}.{key}")
            elif extra is False:
                errors.append(f"{path}: unknown field {key!r}")
            elif isinstance(extra, dict):
                errors += validate(item, extra, f"{path}.{key}")
    if isinstance(value, list):
        if "minItems" in schema and len(value) < schema["minItems"]:
            errors.append(f"{path}: fewer than {schema['minItems']} items")
        if "items" in schema:
            for i, item in enumerate(value):
                errors += validate(item, schema["items"], f"{path}[{i}]")
    return errors


def _show(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def json_value_errors(value: Any, path: str = "$") -> list[str]:
    """Anything that JSON cannot hold (NaN, tuples, sets, objects): what json.dumps(allow_nan=False) rejects."""
    if value is None or isinstance(value, (bool, str, int)):
        return []
    if isinstance(value, float):
        return [] if math.isfinite(value) else [f"{path}: {value} is not valid JSON"]
    if isinstance(value, list):
        return [e for i, v in enumerate(value) for e in json_value_errors(v, f"{path}[{i}]")]
    if isinstance(value, dict):
        out = []
        for k, v in value.items():
            if not isinstance(k, str):
                out.append(f"{path}: key {k!r} is not a string")
            out += json_value_errors(v, f"{path}.{k}")
        return out
    return [f"{path}: {type(value).__name__} is not a JSON type"]


__all__ = ["Schema", "json_value_errors", "validate"]
