"""Small text helpers: bounded output, first lines. Text is cut between words, never inside one (a word
longer than half the room is the exception: a path, a mangled name), and a cut shows as an ellipsis."""

from __future__ import annotations

import re

LOG_LIMIT = 64_000  # compiler logs and test output kept per target / per process (characters)
MESSAGE_LIMIT = 8_000  # one test's message
ELLIPSIS = "…"
_SPACE = re.compile(r"\s")


def word_end(text: str, limit: int) -> int:
    """Where to cut text so that at most limit characters stay and no word is split: after the last word
    that fits, or at limit itself when that would give up more than half of it (one very long word)."""
    if len(text) <= limit:
        return len(text)
    if limit <= 0:
        return 0
    if _SPACE.match(text[limit]):
        return limit  # the cut falls between words already
    space = max(text.rfind(ch, 0, limit) for ch in " \n\t")
    return space if space > 0 and space >= limit - limit // 2 else limit


def word_start(text: str, limit: int) -> int:
    """Where to start the last at most limit characters of text without splitting a word (the mirror of
    word_end)."""
    if len(text) <= limit:
        return 0
    if limit <= 0:
        return len(text)
    start = len(text) - limit
    if _SPACE.match(text[start - 1]):
        return start
    found = _SPACE.search(text, start, start + limit // 2 + 1)
    return found.end() if found else start


def shorten(text: str, limit: int) -> str:
    """text, or its start cut between words to at most limit characters, ellipsis included."""
    if len(text) <= limit:
        return text
    keep = max(0, limit - len(ELLIPSIS))
    return text[: word_end(text, keep)].rstrip() + ELLIPSIS


def truncate(text: str, limit: int = LOG_LIMIT) -> str:
    """Keep the head and the tail of text, at most about limit characters, cut between words, with a note
    between them that says how much was left out."""
    if len(text) <= limit:
        return text
    head_end = word_end(text, limit * 2 // 3)
    tail_start = max(head_end, word_start(text, limit - limit * 2 // 3))
    head, tail = text[:head_end].rstrip(), text[tail_start:].lstrip()
    dropped = len(text) - len(head) - len(tail)
    return f"{head}{ELLIPSIS}\n[... {dropped} characters left out ...]\n{ELLIPSIS}{tail}"


def first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def tail_lines(text: str, lines: int = 20, limit: int = 2_000) -> str:
    """The last few non-empty lines of output, for a crash message."""
    kept = [line for line in text.splitlines() if line.strip()][-lines:]
    out = "\n".join(kept)
    return out[word_start(out, limit):] if len(out) > limit else out


def amount(n: float, unit: str) -> str:
    """'1 day', '2.5 days': a number and its unit, plural unless it is one."""
    return f"{n:g} {unit}{'' if n == 1 else 's'}"
