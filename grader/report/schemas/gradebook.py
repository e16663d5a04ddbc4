"""CSV exports: cells a spreadsheet would run as a formula, and the class gradebook's layout
(grader/report/batch.py render_gradebook_csv)."""

from __future__ import annotations

import csv
import io
import re

FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
CLASS_HEAD = ("student", "total", "max_total")
CLASS_TAIL = ("status", "notes")
CLASS_STATUS = ("graded", "not graded (no GPU)", "compiled", "not compiled", "broken", "missing")  # report/standing.py
LATE_NUMBERS = ("raw", "penalty", "late days")  # a course file's per-lab columns `<lab> raw`, ... (numbers)
LATE_TEXT = ("submitted", "time source")
IDENTITY = ("name", "email")  # a roster's columns
COMPILE_STATES = ("compiled", "compile error", "link error", "refused")
_NUMBER = re.compile(r"^\d+(\.\d+)?$")


def _rows(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text)))


def validate_csv_cells(text: str) -> list[str]:
    """Every row as long as the header; no cell that a spreadsheet would evaluate."""
    rows = _rows(text)
    if not rows:
        return ["empty CSV: no header"]
    errors = []
    width = len(rows[0])
    for r, row in enumerate(rows):
        if len(row) != width:
            errors.append(f"row {r}: {len(row)} cells, the header has {width}")
        for c, cell in enumerate(row):
            if cell[:1] in FORMULA_START:
                errors.append(f"row {r} col {c}: {cell[:20]!r} starts like a formula")
    return errors


def validate_class_gradebook(text: str) -> list[str]:
    """student, total, max_total, <lab>..., <lab>:<task>..., status, notes; numbers or empty, and no
    number at all where the row has no score (broken, not graded); a compile check's lab columns hold
    each lab's compile state."""
    errors = validate_csv_cells(text)
    rows = _rows(text)
    if not rows:
        return errors
    header = rows[0]
    if tuple(header[:3]) != CLASS_HEAD or tuple(header[-2:]) != CLASS_TAIL or len(header) < 5:
        return errors + [f"header {header[:3]}…{header[-2:]} is not student,total,max_total,…,status,notes"]
    middle = header[3:-2]
    identity = [h for h in middle if h in IDENTITY]
    late = [h for h in middle if " " in h and h.split(" ", 1)[1] in LATE_NUMBERS + LATE_TEXT]
    late_text = [h for h in late if h.split(" ", 1)[1] in LATE_TEXT]
    middle = [h for h in middle if h not in identity and h not in late]
    labs = [h for h in middle if ":" not in h]
    tasks = [h for h in middle if ":" in h]
    if header[3:-2] != labs + tasks + late + identity:
        errors.append("header: the columns must be <lab>..., <lab>:<task>..., then the late policy's and the "
                      "roster's")
    for h in late:
        if h.split(" ", 1)[0] not in labs:
            errors.append(f"header: late column {h!r} names no lab column")
    if middle != labs + tasks:
        errors.append("header: every <lab> column must come before the <lab>:<task> columns")
    for h in tasks:
        if h.partition(":")[0] not in labs:
            errors.append(f"header: task column {h!r} names no lab column")
    if len(set(header)) != len(header):
        errors.append("header: duplicate column names")
    for r, row in enumerate(rows[1:], start=1):
        if len(row) != len(header):
            continue
        cell = dict(zip(header, row, strict=True))
        if not cell["student"]:
            errors.append(f"row {r}: no student")
        if cell["status"] not in CLASS_STATUS:
            errors.append(f"row {r}: status {cell['status']!r} is not one of {CLASS_STATUS}")
        status = cell["status"]
        if status in ("compiled", "not compiled"):  # a compile check: each lab's state, no score
            for h in labs:
                if cell[h] and cell[h] not in COMPILE_STATES:
                    errors.append(f"row {r}: {h} {cell[h]!r} is not one of {COMPILE_STATES}")
            if any(cell[h] for h in ("total", "max_total", *tasks)):
                errors.append(f"row {r}: a compile check has scores")
            states = [cell[h] for h in labs if cell[h]]
            if (status == "compiled") != all(s == "compiled" for s in states):
                errors.append(f"row {r}: status {status!r} while its labs say {states}")
            continue
        numeric = [*middle, *(h for h in late if h not in late_text)]
        scores = [cell["total"], cell["max_total"], *(cell[h] for h in numeric)]
        for name, value in zip(("total", "max_total", *numeric), scores, strict=True):
            if value and not _NUMBER.match(value):
                errors.append(f"row {r}: {name} {value!r} is not a number")
        if status == "missing" and (cell["total"] != "0" or any(cell[h] for h in tasks)):
            errors.append(f"row {r}: a missing submission scores 0 and has no task points")
        if status in ("broken", "not graded (no GPU)"):
            if any(cell[h] for h in ("total", "max_total", *middle, *(h for h in late if " late days" not in h))
                   if h not in late_text):
                errors.append(f"row {r}: a {status} submission has scores (no score is not a zero)")
            if not cell["notes"]:
                errors.append(f"row {r}: a {status} submission without a note saying why")
        elif status == "graded" and not (cell["total"] and cell["max_total"]):
            errors.append(f"row {r}: a graded submission without total and max_total")
    return errors


__all__ = ["validate_class_gradebook", "validate_csv_cells"]
