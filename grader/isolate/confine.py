"""The supervisor of one untrusted run: `python3 -m grader.confine [options] -- PROGRAM ARGS...`.

It starts PROGRAM and makes sure that, whatever PROGRAM does,
  - every process it starts dies with it: PROGRAM runs as the first child of a new PID namespace (when
    the kernel lets us make one), whose end takes every process in it down, setsid() and double forks
    included; otherwise the supervisor is a child subreaper and kills every descendant it inherits;
  - it writes files only in its private directory (--workdir) and the GPU's device files: Landlock, where
    the kernel has it, takes write access to everything else away (and TCP, and signals to processes
    outside), for PROGRAM and everything it starts, raw system calls included;
  - it stops at its deadline (--timeout) or when the processes together hold more host memory than
    --memory-mib, and the supervisor says which.

The supervisor writes one JSON line to --status-fd when it is done: {"isolation": ..., "landlock": ...,
"killed": null | "timeout" | "memory", "peak_rss_mib": ..., "status": <wait status of PROGRAM>}, and ends
as PROGRAM did (its exit code, or the same signal). PROGRAM never holds the status descriptor.
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import json
import os
import signal
import sys
import time

if __package__:
    from grader.isolate.landlock import LIBC, apply_landlock, landlock_abi, prctl  # noqa: F401 - doctor reads landlock_abi
else:  # run by its path under python -I (grader/isolate/process.py): its own folder holds landlock.py
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from landlock import LIBC, apply_landlock, landlock_abi, prctl  # type: ignore[no-redef]  # noqa: F401

CLONE_NEWNET = 0x40000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNS = 0x00020000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 1, 2, 4, 8, 32, 4096, 16384, 1 << 18
TMP_SIZE = b"8g"  # the private /tmp of a run (memory-backed: the host-memory limit counts it only as it is used)
PROC_READ_ONLY = (b"/proc/sys", b"/proc/sysrq-trigger", b"/proc/irq", b"/proc/bus", b"/proc/fs")
INIT_FAILED = 125  # init could not set the namespace up: the supervisor falls back to a subreaper
PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36

POLL_S = 0.05
MAX_POLL_S = 0.25
KILL_WAIT_S = 5.0
# Where programs and libraries may be executed from (nothing the run itself could have written).
# --- process trees ---------------------------------------------------------------------------------


def _children_map() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
            ppid = int(stat[stat.rindex(b")") + 2:].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    return children


def descendants(pid: int) -> list[int]:
    tree = _children_map()
    out, stack = [], list(tree.get(pid, []))
    while stack:
        p = stack.pop()
        out.append(p)
        stack += tree.get(p, [])
    return out


def _rss_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(b"VmRSS:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def tree_rss_mib(root: int) -> float:
    return sum(_rss_kib(p) for p in [root, *descendants(root)]) / 1024.0


def kill_all(pids: list[int]) -> None:
    for p in pids:
        try:
            os.kill(p, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


# --- the run ---------------------------------------------------------------------------------------


class _Waiter:
    """Sleeps until a timeout or the child's exit, whichever is first (a pidfd where the kernel has
    them, so a run that ends is noticed at once; plain sleeps otherwise)."""

    def __init__(self, pid: int) -> None:
        import select

        self._select = select
        try:
            self.fd: int | None = os.pidfd_open(pid)
        except (AttributeError, OSError):
            self.fd = None

    def wait(self, seconds: float) -> None:
        if self.fd is None:
            time.sleep(seconds)
            return
        try:
            self._select.select([self.fd], [], [], seconds)
        except InterruptedError:
            pass

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def _try_unshare(flags: int) -> bool:
    return LIBC.unshare(ctypes.c_int(flags)) == 0


def _exec_target(argv: list[str], workdir: str, executable: list[str], status_fd: int, landlock: bool,
                 info_w: int, writable: list[str]) -> None:
    """In the child: confine, then become PROGRAM. Never returns."""
    try:
        os.close(status_fd)
        if landlock:
            applied = apply_landlock([workdir, *writable], executable)
        else:
            applied = "off"
        os.write(info_w, applied.encode()[:200])
        os.close(info_w)
        os.execvp(argv[0], argv)
    except OSError as err:
        os.write(2, f"cudalab confine: cannot run {argv[0]}: {err.strerror}\n".encode())
        os._exit(127)
    os._exit(127)


def _mount_proc(private_tmp: bool) -> bool:
    """A mount namespace of our own with a /proc of the new PID namespace (the CUDA driver reads
    /proc/<getpid()>, which must be this process, not the host's process of that number) and, asked
    for, an empty /tmp of its own (GoogleTest writes its captured output there)."""
    if LIBC.unshare(ctypes.c_int(CLONE_NEWNS)) != 0:
        return False
    mount = LIBC.mount
    mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_void_p]
    if mount(None, b"/", None, MS_REC | MS_PRIVATE, None) != 0:  # nothing we mount reaches the host
        return False
    if mount(b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None) != 0:
        return False
    # As containers do: the kernel's own knobs stay read-only (a root run must not change sysctls).
    for path in PROC_READ_ONLY:
        if os.path.exists(path.decode()):
            if mount(path, path, None, MS_BIND | MS_REC, None) == 0:
                mount(None, path, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_REC, None)
    if private_tmp:
        return mount(b"tmpfs", b"/tmp", b"tmpfs", MS_NOSUID | MS_NODEV, b"mode=1777,size=" + TMP_SIZE) == 0
    return True


def _init(argv: list[str], workdir: str, executable: list[str], status_fd: int, landlock: bool, info_w: int,
          result_w: int, writable: list[str], private_tmp: bool) -> None:
    """PID 1 of the new namespace: run PROGRAM, reap everything, hand PROGRAM's wait status up, exit.
    The namespace ends with this process, and the kernel kills whatever is left in it."""
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if not _mount_proc(private_tmp):
        os.write(info_w, b"init: no /proc of its own (" + os.strerror(ctypes.get_errno()).encode() + b")")
        os._exit(INIT_FAILED)
    child = os.fork()
    if child == 0:
        os.close(result_w)
        _exec_target(argv, workdir, executable, status_fd, landlock, info_w, writable)
    os.close(info_w)
    os.close(status_fd)
    status = 0
    while True:
        try:
            pid, st = os.wait()
        except ChildProcessError:
            break
        except InterruptedError:
            continue
        if pid == child:
            status = st
            break
    os.write(result_w, str(status).encode())
    os._exit(0)


def supervise(argv: list[str], workdir: str, timeout_s: float, memory_mib: float, executable: list[str],
              status_fd: int, landlock: bool = True, namespaces: bool = True, writable: list[str] | None = None,
              private_tmp: bool = False) -> int:
    """Run argv confined; return the exit code to end with (negative: the signal to die of)."""
    if namespaces:
        # unshare(CLONE_NEWPID) is for the children to come: probe in a child, keep this process as it is.
        probe = os.fork()
        if probe == 0:
            ok = _try_unshare(CLONE_NEWPID | CLONE_NEWNET) or _try_unshare(CLONE_NEWPID)
            os._exit(0 if ok else 1)
        _, st = os.waitpid(probe, 0)
        namespaces = os.WIFEXITED(st) and os.WEXITSTATUS(st) == 0
    writable = list(writable or [])
    if namespaces:
        code = _supervise(argv, workdir, timeout_s, memory_mib, executable, status_fd, landlock, True, writable,
                          private_tmp)
        if code is not None:
            return code
    code = _supervise(argv, workdir, timeout_s, memory_mib, executable, status_fd, landlock, False, writable, False)
    assert code is not None
    return code


def _supervise(argv: list[str], workdir: str, timeout_s: float, memory_mib: float, executable: list[str],
               status_fd: int, landlock: bool, namespaces: bool, writable: list[str],
               private_tmp: bool) -> int | None:
    """One attempt; None when the namespace could not be set up (nothing of PROGRAM ran)."""
    isolation = "subreaper"
    if namespaces:
        if _try_unshare(CLONE_NEWPID | CLONE_NEWNET):
            isolation = "pid+net namespace"
        elif _try_unshare(CLONE_NEWPID):
            isolation = "pid namespace"
        else:
            return None
    else:
        prctl(PR_SET_CHILD_SUBREAPER, 1)
    info_r, info_w = os.pipe()
    result_r, result_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(info_r)
        os.close(result_r)
        if isolation != "subreaper":
            _init(argv, workdir, executable, status_fd, landlock, info_w, result_w, writable, private_tmp)
        os.close(result_w)
        _exec_target(argv, workdir, executable, status_fd, landlock, info_w, writable)
    os.close(info_w)
    os.close(result_w)

    stop = {"why": None}

    def on_signal(signum, _frame):  # the grader gives up on the run: take everything down
        stop["why"] = stop["why"] or "interrupted"
        kill_all([pid, *descendants(pid)])

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    deadline = time.monotonic() + timeout_s if timeout_s > 0 else None
    peak = 0.0
    wait_status = None
    poll = POLL_S
    waiter = _Waiter(pid)
    while True:
        try:
            done, st = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            done, st = pid, 0
        if done:
            wait_status = st
            break
        if deadline is not None and time.monotonic() > deadline and stop["why"] is None:
            stop["why"] = "timeout"
            kill_all([pid, *descendants(pid)])
        if memory_mib > 0:
            rss = tree_rss_mib(pid)
            peak = max(peak, rss)
            if rss > memory_mib and stop["why"] is None:
                stop["why"] = "memory"
                kill_all([pid, *descendants(pid)])
        waiter.wait(poll)
        poll = min(MAX_POLL_S, poll * 1.5)
    waiter.close()

    # In the namespace, init handed up PROGRAM's own status; without one, what we waited for is PROGRAM.
    program_status = wait_status
    text = ""
    if isolation != "subreaper":
        try:
            text = os.read(result_r, 64).decode().strip()
            program_status = int(text) if text else wait_status
        except (OSError, ValueError):
            program_status = wait_status
        if not text and os.WIFEXITED(wait_status) and os.WEXITSTATUS(wait_status) == INIT_FAILED:
            os.close(result_r)
            os.close(info_r)
            return None  # the namespace could not be made ready: try again without one
    os.close(result_r)
    left = descendants(os.getpid())
    while left:  # subreaper: everything PROGRAM started was reparented to us
        kill_all(left)
        for p in left:
            try:
                os.waitpid(p, 0)
            except ChildProcessError:
                pass
        left = descendants(os.getpid())
    try:
        applied = os.read(info_r, 256).decode(errors="replace") or "not applied"
    except OSError:
        applied = "unknown"
    os.close(info_r)
    status = {"isolation": isolation, "landlock": applied, "killed": stop["why"], "peak_rss_mib": round(peak, 1),
              "memory_mib": memory_mib, "status": program_status}
    try:
        os.write(status_fd, (json.dumps(status) + "\n").encode())
        os.close(status_fd)
    except OSError:
        pass
    assert program_status is not None
    if os.WIFSIGNALED(program_status):
        return -os.WTERMSIG(program_status)
    if stop["why"] is not None:
        return -signal.SIGKILL
    return os.WEXITSTATUS(program_status) if os.WIFEXITED(program_status) else 1


def main(args: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m grader.confine", description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", required=True, help="the one directory the program may write")
    parser.add_argument("--timeout", type=float, default=0.0, help="seconds before everything is killed (0: none)")
    parser.add_argument("--memory-mib", type=float, default=0.0, help="host memory of all its processes (0: no limit)")
    parser.add_argument("--exec", action="append", default=[], dest="executable",
                        help="a file or directory programs may be started from (besides the system's)")
    parser.add_argument("--status-fd", type=int, required=True, help="where the status line goes")
    parser.add_argument("--write", action="append", default=[], dest="writable",
                        help="another directory the program may write (besides --workdir)")
    parser.add_argument("--private-tmp", action="store_true",
                        help="in a namespace, give the program an empty /tmp of its own (and let it write there)")
    parser.add_argument("--no-landlock", action="store_true")
    parser.add_argument("--no-namespaces", action="store_true")
    parser.add_argument("argv", nargs=argparse.REMAINDER)
    ns = parser.parse_args(args)
    argv = ns.argv[1:] if ns.argv[:1] == ["--"] else ns.argv
    if not argv:
        parser.error("no program given")
    code = supervise(argv, ns.workdir, ns.timeout, ns.memory_mib, ns.executable, ns.status_fd,
                     landlock=not ns.no_landlock, namespaces=not ns.no_namespaces, writable=ns.writable,
                     private_tmp=ns.private_tmp)
    if code < 0:
        sys.stdout.flush()
        if -code not in (signal.SIGKILL, signal.SIGSTOP):
            signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
        time.sleep(1)
        return 128 - code
    return code


if __name__ == "__main__":
    sys.exit(main())
