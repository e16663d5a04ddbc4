"""Run one untrusted program: its own process group, a wall-clock limit that kills the whole group, and
bounded capture of stdout/stderr (a program that prints forever cannot exhaust memory or disk)."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Mapping, Sequence

HEAD_BYTES = 32_000
TAIL_BYTES = 32_000


@dataclass
class ProcessResult:
    argv: list[str]
    returncode: int | None  # None when it had to be killed for the time limit
    timed_out: bool
    duration_s: float
    stdout: str
    stderr: str

    @property
    def signal(self) -> int | None:
        """The signal that ended the process (not counting our own kill on timeout)."""
        if self.timed_out or self.returncode is None or self.returncode >= 0:
            return None
        return -self.returncode

    @property
    def signal_name(self) -> str:
        return signal_name(self.signal) if self.signal else ""

    @property
    def output(self) -> str:
        return "\n".join(part for part in (self.stdout, self.stderr) if part)


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


class _BoundedReader(threading.Thread):
    """Drains a pipe, keeping its first HEAD_BYTES and last TAIL_BYTES."""

    def __init__(self, pipe: IO[bytes]) -> None:
        super().__init__(daemon=True)
        self.pipe = pipe
        self.head = bytearray()
        self.tail: deque[bytes] = deque()
        self.tail_size = 0
        self.dropped = 0

    def run(self) -> None:
        try:
            while chunk := self.pipe.read1(65536):  # type: ignore[attr-defined]
                room = HEAD_BYTES - len(self.head)
                if room > 0:
                    self.head += chunk[:room]
                    chunk = chunk[room:]
                if chunk:
                    self.tail.append(chunk)
                    self.tail_size += len(chunk)
                    while self.tail_size - len(self.tail[0]) >= TAIL_BYTES:
                        self.tail_size -= len(self.tail[0])
                        self.dropped += len(self.tail.popleft())
        except (OSError, ValueError):
            pass

    def text(self) -> str:
        tail = b"".join(self.tail)
        if len(tail) > TAIL_BYTES:
            self.dropped += len(tail) - TAIL_BYTES
            tail = tail[-TAIL_BYTES:]
        head = self.head.decode(errors="replace")
        if self.dropped:
            head += f"\n[... {self.dropped} bytes of output left out ...]\n"
        return head + tail.decode(errors="replace")


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def run(
    argv: Sequence[str | Path],
    timeout_s: float,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> ProcessResult:
    """Run argv in a new session (its own process group); on timeout kill the whole group."""
    args = [str(a) for a in argv]
    start = time.monotonic()
    proc = subprocess.Popen(
        args,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=dict(env) if env is not None else None,
        cwd=cwd,
        start_new_session=True,
    )
    assert proc.stdout is not None and proc.stderr is not None
    readers = [_BoundedReader(proc.stdout), _BoundedReader(proc.stderr)]
    for r in readers:
        r.start()
    timed_out = False
    try:
        returncode: int | None = proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill_group(proc)
        proc.wait()
        returncode = None
    except BaseException:  # Ctrl-C: never leave the group running
        _kill_group(proc)
        proc.wait()
        raise
    # The group leader is gone; kill anything it left behind in its group, which may hold the pipes.
    _kill_group(proc)
    for r in readers:
        r.join(timeout=2.0)
    duration = time.monotonic() - start
    for r, pipe in zip(readers, (proc.stdout, proc.stderr)):
        if not r.is_alive():  # a reader still blocked holds the pipe's lock: leave it to the daemon thread
            pipe.close()
    return ProcessResult(args, returncode, timed_out, duration, readers[0].text(), readers[1].text())
