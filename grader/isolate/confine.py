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
import glob
import json
import os
import signal
import sys
import time

CLONE_NEWNET = 0x40000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNS = 0x00020000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 1, 2, 4, 8, 32, 4096, 16384, 1 << 18
TMP_SIZE = b"8g"  # the private /tmp of a run (memory-backed: the host-memory limit counts it only as it is used)
PROC_READ_ONLY = (b"/proc/sys", b"/proc/sysrq-trigger", b"/proc/irq", b"/proc/bus", b"/proc/fs")
INIT_FAILED = 125  # init could not set the namespace up: the supervisor falls back to a subreaper
PR_SET_PDEATHSIG = 1
PR_SET_NO_NEW_PRIVS = 38
PR_SET_CHILD_SUBREAPER = 36

SYS_LANDLOCK_CREATE_RULESET = 444
SYS_LANDLOCK_ADD_RULE = 445
SYS_LANDLOCK_RESTRICT_SELF = 446
LANDLOCK_CREATE_RULESET_VERSION = 1
LANDLOCK_RULE_PATH_BENEATH = 1

FS_EXECUTE = 1 << 0
FS_WRITE_FILE = 1 << 1
FS_READ_FILE = 1 << 2
FS_READ_DIR = 1 << 3
FS_REMOVE_DIR = 1 << 4
FS_REMOVE_FILE = 1 << 5
FS_MAKE_CHAR = 1 << 6
FS_MAKE_DIR = 1 << 7
FS_MAKE_REG = 1 << 8
FS_MAKE_SOCK = 1 << 9
FS_MAKE_FIFO = 1 << 10
FS_MAKE_BLOCK = 1 << 11
FS_MAKE_SYM = 1 << 12
FS_REFER = 1 << 13  # ABI 2
FS_TRUNCATE = 1 << 14  # ABI 3
NET_BIND_TCP = 1 << 0  # ABI 4
NET_CONNECT_TCP = 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0  # ABI 6
SCOPE_SIGNAL = 1 << 1

POLL_S = 0.05
MAX_POLL_S = 0.25
KILL_WAIT_S = 5.0
# Where programs and libraries may be executed from (nothing the run itself could have written).
EXEC_ROOTS = ("/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/opt", "/etc/alternatives")
DEVICE_FILES = ("/dev/nvidia*", "/dev/nvidia-caps/*", "/dev/dri/*", "/dev/null", "/dev/zero", "/dev/full",
                "/dev/tty")

_libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def _syscall(number: int, *args) -> int:
    return int(_libc.syscall(ctypes.c_long(number), *args))


def _prctl(option: int, arg: int) -> int:
    return int(_libc.prctl(ctypes.c_int(option), ctypes.c_ulong(arg), ctypes.c_ulong(0), ctypes.c_ulong(0),
                           ctypes.c_ulong(0)))


# --- Landlock --------------------------------------------------------------------------------------


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def landlock_abi() -> int:
    """The kernel's Landlock ABI version (0: none)."""
    abi = _syscall(SYS_LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(LANDLOCK_CREATE_RULESET_VERSION))
    return max(abi, 0)


def _fs_rights(abi: int) -> int:
    rights = (FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | FS_READ_DIR | FS_REMOVE_DIR | FS_REMOVE_FILE | FS_MAKE_CHAR
              | FS_MAKE_DIR | FS_MAKE_REG | FS_MAKE_SOCK | FS_MAKE_FIFO | FS_MAKE_BLOCK | FS_MAKE_SYM)
    if abi >= 2:
        rights |= FS_REFER
    if abi >= 3:
        rights |= FS_TRUNCATE
    return rights


def _add_rule(ruleset: int, path: str, access: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return  # a path that does not exist here needs no rule
    try:
        is_dir = os.path.isdir(path)
        file_rights = FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | FS_TRUNCATE
        attr = _PathBeneath(access if is_dir else access & file_rights, fd)
        if attr.allowed_access:
            _syscall(SYS_LANDLOCK_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(LANDLOCK_RULE_PATH_BENEATH),
                     ctypes.byref(attr), ctypes.c_uint32(0))
    finally:
        os.close(fd)


def apply_landlock(writable: list[str], executable: list[str], scope: bool = True, net: bool = True) -> str:
    """Restrict this process (and what it starts) to: read anywhere, write only under `writable` and the
    device files, execute only under EXEC_ROOTS and `executable`, no TCP, no signals outside. Returns
    what was applied, for the status line."""
    abi = landlock_abi()
    if abi < 1:
        return "unavailable"
    fs = _fs_rights(abi)
    sizes = {1: 8, 2: 8, 3: 8, 4: 16, 5: 16}
    attr = _RulesetAttr(fs, NET_BIND_TCP | NET_CONNECT_TCP if abi >= 4 and net else 0,
                        SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if abi >= 6 and scope else 0)
    ruleset = _syscall(SYS_LANDLOCK_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(sizes.get(abi, 24)),
                       ctypes.c_uint32(0))
    if ruleset < 0:
        return f"unavailable (create_ruleset: {os.strerror(ctypes.get_errno())})"
    try:
        read = FS_READ_FILE | FS_READ_DIR
        _add_rule(ruleset, "/", read)
        for root in [*EXEC_ROOTS, *executable]:
            _add_rule(ruleset, root, read | FS_EXECUTE)
        device_rights = FS_READ_FILE | FS_WRITE_FILE | (FS_TRUNCATE if abi >= 3 else 0)
        for pattern in DEVICE_FILES:
            for path in glob.glob(pattern):
                _add_rule(ruleset, path, device_rights)
        everything = fs & ~FS_EXECUTE
        for path in [*writable, "/dev/shm"]:
            _add_rule(ruleset, path, everything)
        # The CUDA driver writes to /proc (its threads' entries) and fails to start without it. In a PID
        # namespace /proc shows only the run's own processes and its system entries are read-only
        # (_harden_proc); outside one, Landlock keeps ptrace (and so /proc/<pid>/mem) within the run.
        _add_rule(ruleset, "/proc", device_rights)
        if _prctl(PR_SET_NO_NEW_PRIVS, 1) != 0:
            return f"unavailable (no_new_privs: {os.strerror(ctypes.get_errno())})"
        if _syscall(SYS_LANDLOCK_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0)) != 0:
            return f"unavailable (restrict_self: {os.strerror(ctypes.get_errno())})"
    finally:
        os.close(ruleset)
    return f"abi {abi}"


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
    return _libc.unshare(ctypes.c_int(flags)) == 0


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
    if _libc.unshare(ctypes.c_int(CLONE_NEWNS)) != 0:
        return False
    mount = _libc.mount
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
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
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
        _prctl(PR_SET_CHILD_SUBREAPER, 1)
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
              "status": program_status}
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
