"""Small text helpers: bounded output, first lines."""

from __future__ import annotations

LOG_LIMIT = 64_000  # compiler logs and test output kept per target / per process (characters)
MESSAGE_LIMIT = 8_000  # one test's message


def truncate(text: str, limit: int = LOG_LIMIT) -> str:
    """Keep the head and the tail of text, at most about limit characters, with a note between."""
    if len(text) <= limit:
        return text
    head = limit * 2 // 3
    tail = limit - head
    dropped = len(text) - head - tail
    return f"{text[:head]}\n[... {dropped} characters left out ...]\n{text[-tail:]}"


def first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def tail_lines(text: str, lines: int = 20, limit: int = 2_000) -> str:
    """The last few non-empty lines of output, for a crash message."""
    kept = [line for line in text.splitlines() if line.strip()][-lines:]
    out = "\n".join(kept)
    return out[-limit:] if len(out) > limit else out
