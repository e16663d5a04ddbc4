"""Run one untrusted program: its own process group, a wall-clock limit that kills the whole group,
bounded capture of stdout/stderr (a program that prints forever cannot exhaust memory or disk), and
resource limits (no core dumps, bounded file size, CPU time and processes). An optional wrapper (the
bubblewrap sandbox of grader/sandbox.py) is put in front of the command line."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

HEAD_BYTES = 32_000
TAIL_BYTES = 32_000

MIB = 1 << 20


@dataclass(frozen=True)
class Limits:
    """Resource limits applied in the child before it starts (setrlimit). None leaves one as it is.

    nproc counts every process and thread of the user (CUDA starts a few threads), and root ignores
    it, so it is a margin above what the user runs already (user_threads()), not a small number."""

    core_bytes: int | None = 0  # no core dumps
    file_bytes: int | None = 256 * MIB  # largest file the program may write
    cpu_s: int | None = None  # CPU seconds (all threads); None: derived from the wall-clock limit
    nproc: int | None = None  # processes + threads of the user; None: no limit
    open_files: int | None = 4096

    def cpu_for(self, timeout_s: float) -> int:
        """The CPU limit for a run of timeout_s: a busy host thread plus CUDA's helpers, with room."""
        return self.cpu_s if self.cpu_s is not None else int(timeout_s * 2 + 30)


NO_LIMITS = Limits(core_bytes=None, file_bytes=None, cpu_s=None, nproc=None, open_files=None)


def user_threads(uid: int | None = None) -> int:
    """How many threads (tasks) the user runs now: what RLIMIT_NPROC counts."""
    uid = os.getuid() if uid is None else uid
    total = 0
    try:
        entries = os.listdir("/proc")
    except OSError:
        return 0
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status", "rb") as f:
                fields = dict(
                    line.split(b":", 1) for line in f.read().splitlines() if b":" in line
                )
            if int(fields.get(b"Uid", b"-1").split()[0]) == uid:
                total += int(fields.get(b"Threads", b"1").strip() or 1)
        except (OSError, ValueError, IndexError):
            continue
    return total


def nproc_margin(extra: int = 512) -> int | None:
    """An RLIMIT_NPROC that leaves the program `extra` new processes and threads (None for root)."""
    if os.getuid() == 0:
        return None
    return user_threads() + extra


def _preexec(limits: Limits, timeout_s: float):
    cpu = limits.cpu_for(timeout_s)

    def apply() -> None:  # runs in the child between fork and exec: keep it to system calls
        def cap(which: int, value: int | None) -> None:
            if value is None:
                return
            _, hard = resource.getrlimit(which)
            if hard != resource.RLIM_INFINITY:
                value = min(value, hard)
            try:
                resource.setrlimit(which, (value, hard))
            except (ValueError, OSError):
                pass

        cap(resource.RLIMIT_CORE, limits.core_bytes)
        cap(resource.RLIMIT_FSIZE, limits.file_bytes)
        cap(resource.RLIMIT_CPU, cpu)
        cap(resource.RLIMIT_NPROC, limits.nproc)
        cap(resource.RLIMIT_NOFILE, limits.open_files)

    return apply


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
    limits: Limits | None = None,
    wrapper: Sequence[str] = (),
) -> ProcessResult:
    """Run argv in a new session (its own process group); on timeout kill the whole group.

    limits: setrlimit() in the child (default: Limits(), no core dumps and bounded files and CPU).
    wrapper: a command line put in front of argv (a sandbox); ProcessResult.argv is argv alone."""
    args = [str(a) for a in argv]
    limits = Limits() if limits is None else limits
    start = time.monotonic()
    proc = subprocess.Popen(
        [*wrapper, *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=dict(env) if env is not None else None,
        cwd=cwd,
        start_new_session=True,
        # setrlimit must run in the child; no thread of ours is running yet at this point.
        preexec_fn=None if limits == NO_LIMITS else _preexec(limits, timeout_s),  # noqa: PLW1509
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
