"""The LMS gradebooks' layouts (grader/report/lms.py, where the sources are cited): what Canvas's and
Moodle's CSV grade imports read. Each validate_* returns a list of problems; empty means the LMS will
read the file. The text is checked as it is written to disk: UTF-8 without a byte order mark, CRLF
line ends, RFC 4180 quoting, every row as wide as the header, no cell that starts like a formula."""

from __future__ import annotations

import csv
import io
import re

from grader.report.schemas.gradebook import FORMULA_START

CANVAS_HEAD = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")
CANVAS_POINTS = "Points Possible"
MOODLE_HEAD = ("ID number", "Email address", "Full name")
_NUMBER = re.compile(r"^\d+(\.\d+)?$")
_LAB = re.compile(r"^Lab \d{2}(: .+)?( \(\d+\))?$")


def _parse(data: bytes | str) -> tuple[list[list[str]], list[str]]:
    """The rows, and what is wrong with the encoding, the line ends or the quoting."""
    errors: list[str] = []
    if isinstance(data, str):
        data = data.encode("utf-8")
    if data.startswith(b"\xef\xbb\xbf"):
        errors.append("starts with a UTF-8 byte order mark")
        data = data[3:]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        return [], [*errors, f"not UTF-8: {err}"]
    if not text:
        return [], [*errors, "empty file: no header"]
    if not text.endswith("\r\n"):
        errors.append("the last row does not end with CRLF")
    try:
        rows = list(csv.reader(io.StringIO(text, newline=""), strict=True))
    except csv.Error as err:
        return [], [*errors, f"not RFC 4180 CSV: {err}"]
    # a bare LF or CR outside a quoted cell: count the line ends the parser saw as row ends
    bare = text.replace("\r\n", "").count("\n") + text.replace("\r\n", "").count("\r")
    quoted_breaks = sum(c.count("\n") + c.count("\r") for row in rows for c in row)
    if bare > quoted_breaks:
        errors.append("a row ends with a bare LF or CR, not CRLF")
    width = len(rows[0]) if rows else 0
    for r, row in enumerate(rows):
        if len(row) != width:
            errors.append(f"row {r}: {len(row)} cells, the header has {width}")
        for c, cell in enumerate(row):
            if cell[:1] in FORMULA_START and not (r == 1 and c == 0 and cell.strip() == CANVAS_POINTS):
                errors.append(f"row {r} col {c}: {cell[:20]!r} starts like a formula")
    return rows, errors


def _grades(rows: list[list[str]], first: int, labs: int, start: int) -> list[str]:
    errors = []
    for r, row in enumerate(rows[start:], start=start):
        for c, value in enumerate(row[first : first + labs], start=first):
            if value and not _NUMBER.match(value):
                errors.append(f"row {r} col {c}: grade {value!r} is not a number (or empty: no grade)")
    return errors


def _assignments(header: list[str], first: int) -> list[str]:
    errors = []
    names = header[first:]
    if not names:
        errors.append("header: no assignment column (one per lab)")
    for name in names:
        if not _LAB.match(name):
            errors.append(f"header: assignment column {name!r} is not 'Lab NN: title' [' (id)']")
    if len(set(names)) != len(names):
        errors.append("header: duplicate assignment columns")
    return errors


def validate_canvas_csv(data: bytes | str) -> list[str]:
    """Student, ID, SIS User ID, SIS Login ID, Section, one column per lab; the Points Possible row
    second (identity cells empty, every lab's points a number); then one row per student with a name or
    an id Canvas can match, and a number or nothing per lab."""
    rows, errors = _parse(data)
    if not rows:
        return errors
    header = rows[0]
    if tuple(header[:5]) != CANVAS_HEAD:
        return [*errors, f"header {header[:5]} is not {list(CANVAS_HEAD)}"]
    errors += _assignments(header, 5)
    labs = len(header) - 5
    if len(rows) < 2 or (rows[1] or [""])[0].strip() != CANVAS_POINTS:
        return [*errors, "row 1 is not the Points Possible row"]
    points = rows[1]
    if any(points[1:5]):
        errors.append("row 1: the Points Possible row has identity cells")
    for c, value in enumerate(points[5:], start=5):
        if not _NUMBER.match(value):
            errors.append(f"row 1 col {c}: points possible {value!r} is not a number")
    for r, row in enumerate(rows[2:], start=2):
        if len(row) == len(header) and not (row[0] or row[1] or row[2]):
            errors.append(f"row {r}: no Student, ID or SIS User ID to match the student by")
    return errors + _grades(rows, 5, labs, 2)


def validate_moodle_csv(data: bytes | str) -> list[str]:
    """ID number, Email address, Full name, one column per lab; every row names the user by ID number
    or email (what 'Map to' useridnumber / useremail reads), a number or nothing per lab."""
    rows, errors = _parse(data)
    if not rows:
        return errors
    header = rows[0]
    if tuple(header[:3]) != MOODLE_HEAD:
        return [*errors, f"header {header[:3]} is not {list(MOODLE_HEAD)}"]
    errors += _assignments(header, 3)
    for r, row in enumerate(rows[1:], start=1):
        if len(row) == len(header) and not (row[0] or row[1]):
            errors.append(f"row {r}: no ID number or email address to map the user by")
        if len(row) == len(header) and row[1] and "@" not in row[1]:
            errors.append(f"row {r}: email address {row[1]!r} has no @")
    return errors + _grades(rows, 3, len(header) - 3, 1)


__all__ = ["validate_canvas_csv", "validate_moodle_csv"]
