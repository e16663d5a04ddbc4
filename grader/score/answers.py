"""The answers stage: a lab's answers.md read and its numbers checked (grader/model/answers.py says what
comes out). answers.md holds one `- qN.name: value` line per number a question asks for and free text
under each question's "Why:"; the instructor's solutions/NN-slug/answers.toml holds the values."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

from grader.model.answers import ANSWERS_FILE, REFERENCE_FILE, AnswerCheck, LabAnswers
from grader.model.labs import Lab

_LINE = re.compile(r"^\s*[-*]\s*(q\d+\.[a-z0-9_]+)\s*:[ \t]*(.*?)\s*$", re.MULTILINE)
_HEADING = re.compile(r"^##\s+(\d+)\.", re.MULTILINE)
_NUMBER = re.compile(r"^[-+]?(\d[\d,\u202f ]*(\.\d+)?|\.\d+)([eE][-+]?\d+)?")
MAX_TEXT = 4_000  # characters of one explanation kept for the report


@dataclass(frozen=True)
class Reference:
    id: str
    value: float
    tolerance: float = 0.0
    rel_tolerance: float = 0.0
    why: str = ""


def read_answers(text: str) -> dict[str, str]:
    """The `- qN.name: value` lines, in order (the first of a repeated id wins)."""
    found: dict[str, str] = {}
    for m in _LINE.finditer(text):
        found.setdefault(m.group(1), m.group(2))
    return found


def explanations(text: str) -> dict[str, str]:
    """Per question number, what the student wrote below its "Why:" (up to the next heading)."""
    out = {}
    heads = list(_HEADING.finditer(text))
    for i, h in enumerate(heads):
        body = text[h.end():heads[i + 1].start() if i + 1 < len(heads) else len(text)]
        why = re.split(r"^\s*Why:\s*", body, maxsplit=1, flags=re.MULTILINE)
        if len(why) == 2 and why[1].strip():
            out[h.group(1)] = why[1].strip()[:MAX_TEXT]
    return out


def number(text: str) -> float | None:
    """A student's number: "2048", "2,048", "62.5 %", "32-way", "0.625", "1e6" (None: not one)."""
    m = _NUMBER.match(text.strip())
    if m is None:
        return None
    try:
        return float(re.sub(r"[,\u202f ]", "", m.group(0)))
    except ValueError:
        return None


def load_reference(path: Path) -> list[Reference]:
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    return [Reference(id=str(a["id"]), value=float(a["value"]), tolerance=float(a.get("tolerance", 0.0)),
                      rel_tolerance=float(a.get("rel_tolerance", 0.0)), why=str(a.get("why", "")))
            for a in data.get("answer", [])]


def matches(ref: Reference, given: float) -> bool:
    allowed = max(ref.tolerance, abs(ref.value) * ref.rel_tolerance, 1e-9 * max(1.0, abs(ref.value)))
    return math.isfinite(given) and abs(given - ref.value) <= allowed


def check(lab: Lab, text: str | None) -> LabAnswers | None:
    """The answers stage: None when the lab has no answers file at all; else each number's verdict."""
    if text is None:
        return None
    given = read_answers(text)
    ref_path = lab.solution_dir / REFERENCE_FILE
    refs = load_reference(ref_path) if ref_path.is_file() else None
    out = LabAnswers(file=f"labs/{lab.name}/{ANSWERS_FILE}", checked=refs is not None, explanations=explanations(text))
    if refs is None:
        out.answers = [AnswerCheck(i, v, "blank" if not v else "unchecked") for i, v in given.items()]
        return out
    for ref in refs:
        value = given.get(ref.id)
        if value is None:
            out.problems.append(f"{ref.id} is not in the file (keep every `- {ref.id}:` line)")
            out.answers.append(AnswerCheck(ref.id, "", "blank"))
        elif not value:
            out.answers.append(AnswerCheck(ref.id, "", "blank"))
        elif (n := number(value)) is None:
            out.answers.append(AnswerCheck(ref.id, value[:80], "unreadable"))
        else:
            out.answers.append(AnswerCheck(ref.id, value[:80], "right" if matches(ref, n) else "wrong"))
    return out


def answers_text(path: Path) -> str | None:
    """The file's text, or None when there is none (a lab without questions, a missing file)."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    return data[:256 * 1024].decode("utf-8", errors="replace")
