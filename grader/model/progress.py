"""Progress lines while building and running: one line per step, on stderr, so stdout keeps only the
results. Uses rich when it is importable and stderr is a terminal; plain text otherwise (CI, pipes)."""

from __future__ import annotations

import os
import sys
import threading
from typing import TextIO


class Progress:
    def __init__(self, stream: TextIO | None = None, quiet: bool = False, color: bool | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.quiet = quiet
        tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.color = tty and "NO_COLOR" not in os.environ if color is None else color
        self._console = None
        if self.color:
            try:
                from rich.console import Console

                self._console = Console(file=self.stream, highlight=False)
            except ImportError:
                self._console = None

    def _emit(self, plain: str, markup: str) -> None:
        if self.quiet:
            return
        if self._console is not None:
            self._console.print(markup)
        else:
            self.stream.write(plain + "\n")
            self.stream.flush()

    def step(self, message: str) -> None:
        """Something starts: 'building lab03_student'."""
        self._emit(f"  .. {message}", f"  [dim]..[/] {_escape(message)}")

    def ok(self, message: str) -> None:
        self._emit(f"  ok {message}", f"  [green]ok[/] {_escape(message)}")

    def fail(self, message: str) -> None:
        self._emit(f"  !! {message}", f"  [bold red]!![/] {_escape(message)}")

    def note(self, message: str) -> None:
        self._emit(f"     {message}", f"     [yellow]{_escape(message)}[/]")

    def heading(self, message: str) -> None:
        self._emit(f"== {message}", f"[bold]== {_escape(message)}[/]")


def _escape(text: str) -> str:
    try:
        from rich.markup import escape

        return escape(text)
    except ImportError:  # pragma: no cover - only used with rich
        return text


class _Routed(Progress):
    """Progress whose lines go to _line(kind, message) instead of a stream: the kinds below."""

    def __init__(self) -> None:
        super().__init__(quiet=True, color=False)

    def _line(self, kind: str, message: str) -> None:
        raise NotImplementedError

    def step(self, message: str) -> None:
        self._line("step", message)

    def ok(self, message: str) -> None:
        self._line("ok", message)

    def fail(self, message: str) -> None:
        self._line("fail", message)

    def note(self, message: str) -> None:
        self._line("note", message)

    def heading(self, message: str) -> None:
        self._line("heading", message)


class HeldProgress(_Routed):
    """Progress lines kept to be said later, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[tuple[str, str]] = []

    def _line(self, kind: str, message: str) -> None:
        self.lines.append((kind, message))


def say(lines: list[tuple[str, str]], progress: Progress) -> None:
    """Held lines said now, each as it was said."""
    for kind, message in lines:
        getattr(progress, kind)(message)


class GatedProgress(_Routed):
    """Lines of work that runs before it is known whether they may be said (a lab file's compile beside
    the include screen, grader/grade/prepare.py): held until open(), then said, and the later ones as
    they come; after drop() none is ever said."""

    def __init__(self, progress: Progress) -> None:
        super().__init__()
        self._out = progress
        self._lock = threading.Lock()
        self._held: list[tuple[str, str]] = []
        self._state = "held"

    @property
    def dropped(self) -> bool:
        return self._state == "dropped"

    def _line(self, kind: str, message: str) -> None:
        with self._lock:
            if self._state == "held":
                self._held.append((kind, message))
            elif self._state == "open":
                getattr(self._out, kind)(message)

    def open(self) -> None:
        with self._lock:
            if self._state == "held":
                self._state = "open"
                say(self._held, self._out)
                self._held = []

    def drop(self) -> None:
        with self._lock:
            self._state, self._held = "dropped", []
