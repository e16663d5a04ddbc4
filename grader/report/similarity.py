"""similarity.html: the class's most similar pairs of files, per lab, side by side with the matching
code highlighted (grader/course/similarity.py computes them with copydetect).

One self-contained page (inline CSS, no script, nothing fetched), built like the other reports
(html.environment(): Jinja2 with autoescape, so student code and ids are text, never markup). The
highlighting is copydetect's matching ranges cut out of each file here, each piece escaped by the
template. It informs, it never changes a grade: the page says so.
"""

from __future__ import annotations

import bisect
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from grader.report._format import fmt_date

if TYPE_CHECKING:
    from grader.model.similarity import Pair, SimilarityReport

_CONTEXT_LINES = 4  # unmatched lines kept around each match when a long file is folded
_FOLD_AT = 400  # a file longer than this many lines shows only its matches and their context
_COMMENT_LINE = ("//", "/*", "*")  # how a line of comment alone starts (copydetect compares no comment)


def line_ranges(text: str, ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """copydetect's ranges widened to whole lines, then each line's code alone (no indentation, no blank
    line, no line of comment alone): copydetect maps its matches from the tokenized text back to the
    file only to within a few characters, so a range can start or end inside a word. Lines read as a
    reviewer reads code."""
    touched: set[int] = set()
    starts = [0] + [i + 1 for i, ch in enumerate(text) if ch == "\n"]
    for start, end in ranges:
        start, end = max(0, start), min(end, len(text))
        if end <= start:
            continue
        first = bisect.bisect_right(starts, start) - 1
        last = bisect.bisect_right(starts, end - 1) - 1
        touched.update(range(first, last + 1))
    out: list[tuple[int, int]] = []
    for n in sorted(touched):
        begin = starts[n]
        stop = starts[n + 1] - 1 if n + 1 < len(starts) else len(text)
        line = text[begin:stop]
        code = line.strip()
        if code and not code.startswith(_COMMENT_LINE):
            lead = len(line) - len(line.lstrip())
            out.append((begin + lead, begin + lead + len(code)))
    return out


def segments(text: str, ranges: list[tuple[int, int]]) -> list[dict[str, Any]]:
    """The text as pieces, each {"text", "hl"}: hl on the code of every line where the other file has
    the same code (line_ranges). Long unmatched stretches of a long file fold to '…' lines (the full
    file is the student's own report)."""
    pieces: list[dict[str, Any]] = []
    at = 0
    for start, end in line_ranges(text, ranges):
        start, end = max(start, at), min(end, len(text))
        if start > at:
            pieces.append({"text": text[at:start], "hl": False})
        if end > start:
            pieces.append({"text": text[start:end], "hl": True})
        at = max(at, end)
    if at < len(text):
        pieces.append({"text": text[at:], "hl": False})
    if text.count("\n") <= _FOLD_AT:
        return pieces
    for i, piece in enumerate(pieces):
        lines = piece["text"].split("\n")
        if piece["hl"] or len(lines) <= 2 * _CONTEXT_LINES + 2:
            continue
        head = lines[: _CONTEXT_LINES + 1] if i > 0 else []
        tail = lines[-_CONTEXT_LINES - 1 :] if i < len(pieces) - 1 else []
        piece["text"] = "\n".join([*head, f"… {len(lines) - len(head) - len(tail)} lines …", *tail])
    return pieces


def _pct(share: float) -> str:
    return f"{100 * share:.0f} %"


def _pair(p: Pair, n: int, report: SimilarityReport) -> dict[str, Any]:
    left = report.sources.get((p.lab, p.a, p.file), "")
    right = report.sources.get((p.lab, p.b, p.file), "")
    return {
        "anchor": f"pair-{p.lab[:2]}-{n}",
        "a": p.a,
        "b": p.b,
        "file": p.file,
        "pct": _pct(p.similarity),
        "width": f"{100 * p.similarity:.1f}",
        "share_a": _pct(p.share_a),
        "share_b": _pct(p.share_b),
        "overlap": p.overlap,
        "left": segments(left, p.slices_a),
        "right": segments(right, p.slices_b),
        "link_a": quote(f"{p.a}/report.html", safe="/"),
        "link_b": quote(f"{p.b}/report.html", safe="/"),
    }


def similarity_view(report: SimilarityReport, back: bool = True) -> dict[str, Any]:
    top = report.options.top
    labs = []
    for lab in report.labs:
        pairs = [_pair(p, n, report) for n, p in enumerate(lab.pairs, start=1)]
        labs.append({
            "anchor": f"lab-{lab.number:02d}",
            "number": f"{lab.number:02d}",
            "title": lab.title,
            "compared": lab.compared,
            "flagged": len(lab.pairs),
            "highest": _pct(lab.highest),
            "shown": pairs[:top],
            "more": pairs[top:],
            "skipped": lab.skipped,
        })
    opts = report.options
    return {
        "title": "cudalab similarity report",
        "generated": fmt_date(report.generated) if report.generated else "",
        "threshold": _pct(opts.threshold),
        "settings": f"copydetect winnowing, k = {opts.noise}, window {opts.window}; a flagged pair shares at "
                    f"least {opts.min_overlap} characters of tokenized code",
        "flagged": report.flagged,
        "labs": labs,
        "notes": report.notes,
        "unavailable": report.unavailable,
        "back": back,
    }


def render_similarity(report: SimilarityReport, back: bool = True) -> str:
    """The similarity page as one self-contained HTML document."""
    from grader.report.html import environment

    return environment().get_template("similarity.html.j2").render(**similarity_view(report, back))


def class_link(summary: dict[str, Any] | None) -> dict[str, Any] | None:
    """What the class summary shows of OUT/similarity.json (None: no report there)."""
    if not isinstance(summary, dict) or summary.get("unavailable"):
        return None
    labs = [lab for lab in summary.get("labs", []) if isinstance(lab, dict)]
    return {
        "href": "similarity.html",
        "flagged": int(summary.get("flagged", 0) or 0),
        "threshold": _pct(float(summary.get("threshold", 0.5) or 0.5)),
        "generated": fmt_date(str(summary.get("generated", ""))) if summary.get("generated") else "",
        "labs": [{"number": f"{int(lab.get('number', 0)):02d}", "flagged": int(lab.get("flagged", 0) or 0)}
                 for lab in labs if lab.get("flagged")],
    }


__all__ = ["class_link", "render_similarity", "segments", "similarity_view"]
