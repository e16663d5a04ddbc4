"""Run one untrusted program: its own process group, a wall-clock limit that kills the whole group,
bounded capture of stdout/stderr (a program that prints forever cannot exhaust memory or disk), and
resource limits (no core dumps, bounded file size, CPU time and processes). An optional wrapper (the
bubblewrap sandbox of grader/isolate/bwrap.py) is put in front of the command line.

With a Confinement, the program runs under the supervisor of grader/isolate/confine.py: its own PID namespace
(or a subreaper), Landlock, a host-memory limit, and a deadline it enforces itself; the supervisor's
status line says what it did. Channels are pipes the program writes to by path (/proc/self/fd/N):
its report reaches the grader through one, never through a file it could rewrite."""

from __future__ import annotations

import json
import os
import resource
import select
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
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
    address_space: int | None = None  # bytes of virtual memory (compilers only: CUDA programs reserve far more)

    def cpu_for(self, timeout_s: float) -> int:
        """The CPU limit for a run of timeout_s: a busy host thread plus CUDA's helpers, with room."""
        return self.cpu_s if self.cpu_s is not None else int(timeout_s * 2 + 30)


NO_LIMITS = Limits(core_bytes=None, file_bytes=None, cpu_s=None, nproc=None, open_files=None, address_space=None)


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
        cap(resource.RLIMIT_AS, limits.address_space)

    return apply


CONFINE_SCRIPT = Path(__file__).with_name("confine.py")
KILL_GRACE_S = 5.0  # after the supervisor's own deadline, before the grader kills the group itself
CHANNEL_LIMIT_BYTES = 64 << 20


@dataclass(frozen=True)
class Confinement:
    """How grader/isolate/confine.py supervises a run (see its docstring)."""

    workdir: Path  # the one directory the program may write
    memory_mib: float = 0.0  # host memory of the whole process tree (0: no limit)
    executable: tuple[str, ...] = ()  # files and directories programs may be started from, besides the system's
    landlock: bool = True
    namespaces: bool = True
    writable: tuple[str, ...] = ()  # other directories it may write
    private_tmp: bool = False  # an empty /tmp of its own (in a namespace), writable
    python: str = sys.executable

    def command(self, timeout_s: float, status_fd: int) -> list[str]:
        cmd = [self.python, "-I", "-S", str(CONFINE_SCRIPT), "--workdir", str(self.workdir), "--status-fd",
               str(status_fd), "--timeout", f"{timeout_s:g}", "--memory-mib", f"{self.memory_mib:g}"]
        for path in self.executable:
            cmd += ["--exec", str(path)]
        for path in self.writable:
            cmd += ["--write", str(path)]
        if self.private_tmp:
            cmd.append("--private-tmp")
        if not self.landlock:
            cmd.append("--no-landlock")
        if not self.namespaces:
            cmd.append("--no-namespaces")
        return cmd + ["--"]


class Channel:
    """A pipe the program writes by path (self.path, /proc/self/fd/N); after the run, self.data holds
    what it wrote (at most `limit` bytes; self.overflow when it wrote more)."""

    def __init__(self, limit: int = CHANNEL_LIMIT_BYTES) -> None:
        self.read_fd, self.write_fd = os.pipe()
        self.limit = limit
        self.data = b""
        self.overflow = False
        self._thread: threading.Thread | None = None

    @property
    def path(self) -> str:
        return f"/proc/self/fd/{self.write_fd}"

    def _drain(self) -> None:
        chunks, total = [], 0
        try:
            while chunk := os.read(self.read_fd, 65536):
                if total < self.limit:
                    chunks.append(chunk[: self.limit - total])
                total += len(chunk)
        except OSError:
            pass
        self.data = b"".join(chunks)
        self.overflow = total > self.limit

    def start(self) -> None:
        os.close(self.write_fd)  # the program holds the only write end now: EOF when it is done
        self._thread = threading.Thread(target=self._drain, daemon=True)
        self._thread.start()

    def finish(self, timeout: float = 2.0) -> None:
        if self._thread is not None:
            self._thread.join(timeout)
        if self._thread is None or not self._thread.is_alive():
            try:
                os.close(self.read_fd)
            except OSError:
                pass

    def abandon(self) -> None:
        for fd in (self.read_fd, self.write_fd):
            try:
                os.close(fd)
            except OSError:
                pass


@dataclass
class ProcessResult:
    argv: list[str]
    returncode: int | None  # None when it had to be killed for the time limit
    timed_out: bool
    duration_s: float
    stdout: str
    stderr: str
    confinement: dict | None = None  # the supervisor's status line, when confined
    killed_for: str | None = None  # "timeout" or "memory": the supervisor stopped it
    wrapped: bool = False  # ran under a wrapper (bubblewrap), which ends with 128 + N when its child died of N

    @property
    def out_of_memory(self) -> bool:
        return self.killed_for == "memory"

    @property
    def signal(self) -> int | None:
        """The signal that ended the process (not counting our own kill on timeout)."""
        if self.timed_out or self.returncode is None:
            return None
        if self.returncode < 0:
            return -self.returncode
        if self.wrapped and 128 < self.returncode <= 128 + 64:  # bubblewrap's init: the shell's convention
            return self.returncode - 128
        return None

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


LINE_BYTES = 4096  # on_line sees lines up to this long; a longer one is skipped


class _BoundedReader(threading.Thread):
    """Drains a pipe, keeping its first HEAD_BYTES and last TAIL_BYTES; on_line, when given, sees each
    line as it comes (from this thread; what it raises is ignored)."""

    def __init__(self, pipe: IO[bytes], on_line: Callable[[str], None] | None = None) -> None:
        super().__init__(daemon=True)
        self.pipe = pipe
        self.head = bytearray()
        self.tail: deque[bytes] = deque()
        self.tail_size = 0
        self.dropped = 0
        self.on_line = on_line
        self.partial = bytearray()
        self.skipping = False  # inside a line longer than LINE_BYTES: nothing of it until its newline

    def _lines(self, chunk: bytes) -> None:
        assert self.on_line is not None
        *done, rest = (bytes(self.partial) + chunk).split(b"\n")
        if self.skipping:
            if not done:
                return
            done, self.skipping = done[1:], False  # the end of the long line is no line of its own
        self.skipping = len(rest) > LINE_BYTES
        self.partial = bytearray(b"" if self.skipping else rest)
        for line in done:
            if len(line) <= LINE_BYTES:
                try:
                    self.on_line(line.decode(errors="replace"))
                except Exception:  # noqa: BLE001 - a watcher's bug must not lose the run's output
                    pass

    def run(self) -> None:
        try:
            while chunk := self.pipe.read1(65536):  # type: ignore[attr-defined]
                if self.on_line is not None:
                    self._lines(chunk)
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


MAX_WAIT_S = 2_000_000.0  # poll()'s timeout is an int of milliseconds


def wait_exit(proc: subprocess.Popen[bytes], timeout_s: float) -> int:
    """proc.wait(timeout_s), told of the exit at once: Popen.wait with a timeout polls, sleeping up to 50 ms
    between looks, and a grade waits on a dozen builds and runs before its first test. On Linux a pidfd
    becomes readable when the process exits. Raises subprocess.TimeoutExpired as Popen.wait does."""
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):  # not Linux 5.3+, or the process is already reaped
        return proc.wait(timeout=timeout_s)
    try:
        poller = select.poll()  # not select.select: a batch's grader may hold more than 1024 descriptors
        poller.register(fd, select.POLLIN)
        ready = poller.poll(min(max(timeout_s, 0.0), MAX_WAIT_S) * 1000)
    finally:
        os.close(fd)
    if not ready:
        if timeout_s > MAX_WAIT_S:  # poll() takes at most ~24 days in milliseconds: wait the rest as before
            return proc.wait(timeout=timeout_s - MAX_WAIT_S)
        raise subprocess.TimeoutExpired(proc.args, timeout_s)
    return proc.wait(timeout=KILL_GRACE_S)  # it has exited: the reap is immediate


def _stop(proc: subprocess.Popen[bytes], confined: bool) -> None:
    """Take the run down: a confined run's supervisor first (it kills what escaped the group), then the group."""
    if confined:
        try:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=KILL_GRACE_S)
        except (subprocess.TimeoutExpired, ProcessLookupError):
            pass
    _kill_group(proc)
    proc.wait()


def run(
    argv: Sequence[str | Path],
    timeout_s: float,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    limits: Limits | None = None,
    wrapper: Sequence[str] = (),
    confine: Confinement | None = None,
    channels: Sequence[Channel] = (),
    on_line: Callable[[str], None] | None = None,
) -> ProcessResult:
    """Run argv in a new session (its own process group); on timeout kill the whole group.

    limits: setrlimit() in the child (default: Limits(), no core dumps and bounded files and CPU).
    wrapper: a command line put in front of argv (a sandbox); ProcessResult.argv is argv alone.
    confine: run under grader/isolate/confine.py, which enforces timeout_s itself (the grader only steps in
    KILL_GRACE_S later). channels: pipes the program may write by path; read while it runs. on_line: sees
    each line of stdout as it comes (progress only: what the program prints proves nothing)."""
    args = [str(a) for a in argv]
    limits = Limits() if limits is None else limits
    start = time.monotonic()
    status_r = status_w = -1
    prefix: list[str] = []
    if confine is not None:
        status_r, status_w = os.pipe()
        prefix = confine.command(timeout_s, status_w)
    pass_fds = tuple(c.write_fd for c in channels) + ((status_w,) if confine is not None else ())
    try:
        proc = subprocess.Popen(
            [*wrapper, *prefix, *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=dict(env) if env is not None else None,
            cwd=cwd,
            start_new_session=True,
            pass_fds=pass_fds,
            # setrlimit must run in the child, before exec; it only makes system calls.
            preexec_fn=None if limits == NO_LIMITS else _preexec(limits, timeout_s),  # noqa: PLW1509
        )
    except BaseException:
        for c in channels:
            c.abandon()
        if confine is not None:
            os.close(status_r)
            os.close(status_w)
        raise
    for c in channels:
        c.start()
    status = Channel(limit=64 << 10) if confine is not None else None
    if status is not None:
        status.read_fd, status.write_fd = status_r, status_w
        status.start()
    assert proc.stdout is not None and proc.stderr is not None
    readers = [_BoundedReader(proc.stdout, on_line), _BoundedReader(proc.stderr)]
    for r in readers:
        r.start()
    timed_out = False
    try:
        returncode: int | None = wait_exit(proc, timeout_s + (KILL_GRACE_S if confine is not None else 0))
    except subprocess.TimeoutExpired:
        timed_out = True
        _stop(proc, confine is not None)
        returncode = None
    except BaseException:  # Ctrl-C: never leave the group running
        _stop(proc, confine is not None)
        raise
    # The group leader is gone; kill anything it left behind in its group, which may hold the pipes.
    _kill_group(proc)
    for r in readers:
        r.join(timeout=2.0)
    for c in channels:
        c.finish()
    duration = time.monotonic() - start
    for r, pipe in zip(readers, (proc.stdout, proc.stderr)):
        if not r.is_alive():  # a reader still blocked holds the pipe's lock: leave it to the daemon thread
            pipe.close()
    confinement: dict | None = None
    killed_for: str | None = "timeout" if timed_out else None
    if status is not None:
        status.finish()
        try:
            confinement = json.loads(status.data.decode(errors="replace").strip().splitlines()[-1])
        except (ValueError, IndexError):
            confinement = None
        if confinement and confinement.get("killed") in ("timeout", "memory"):
            killed_for = confinement["killed"]
            timed_out = killed_for == "timeout"
            returncode = None if timed_out else returncode
    return ProcessResult(args, returncode, timed_out, duration, readers[0].text(), readers[1].text(),
                         confinement, killed_for, wrapped=bool(wrapper))
