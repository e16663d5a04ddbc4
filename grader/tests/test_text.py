"""grader/model/text.py: bounded text is cut between words, with an ellipsis."""

from __future__ import annotations

import pytest

from grader.model.text import ELLIPSIS, shorten, tail_lines, truncate, word_end, word_start

MESSAGE = "the shuffle reduction uses __shfl_down_sync (the task's points withheld)"


def test_shorten_cuts_between_words() -> None:
    short = shorten(MESSAGE, 50)
    assert short == "the shuffle reduction uses __shfl_down_sync (the…"
    assert len(short) <= 50 and MESSAGE.startswith(short[:-1])


@pytest.mark.parametrize("limit", range(12, len(MESSAGE) + 1))
def test_shorten_never_ends_inside_a_word(limit: int) -> None:
    short = shorten(MESSAGE, limit)
    assert len(short) <= limit
    if short != MESSAGE:
        kept = short.removesuffix(ELLIPSIS)
        assert short.endswith(ELLIPSIS) and MESSAGE[len(kept)] == " "  # the next character starts a new word


def test_one_long_word_is_cut_where_it_must() -> None:
    word = "x" * 100
    assert shorten(word, 10) == "x" * 9 + ELLIPSIS
    assert word_end("ab " + word, 50) == 50  # going back to the space would give up most of the room


def test_short_text_is_left_alone() -> None:
    assert shorten("fits", 10) == "fits" and truncate("fits", 10) == "fits"
    assert word_end("fits", 10) == 4 and word_start("fits", 10) == 0


def test_truncate_keeps_head_and_tail_whole_words() -> None:
    words = " ".join(f"word{i:04d}" for i in range(2000))
    out = truncate(words, 1000)
    head, note, tail = out.split("\n")
    assert head.endswith(ELLIPSIS) and tail.startswith(ELLIPSIS)
    assert head[:-1].split()[-1] in words.split() and tail[1:].split()[0] in words.split()
    assert head.startswith("word0000") and tail.endswith("word1999")
    dropped = int(note.split()[1])
    assert dropped == len(words) - len(head[:-1]) - len(tail[1:])
    assert len(head) + len(tail) <= 1000 + 2


def test_tail_lines_starts_at_a_word() -> None:
    text = "\n".join(f"line {i} of the crash output" for i in range(200))
    tail = tail_lines(text, lines=200, limit=100)
    assert len(tail) <= 100 and text.endswith(tail) and text[len(text) - len(tail) - 1] in " \n"
