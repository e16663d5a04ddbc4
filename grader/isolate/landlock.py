"""Landlock for the run supervisor (grader/isolate/confine.py): read anywhere, write only in the run's own
folder and the device files, execute only from the system's and the tools' folders, no TCP, no signals
to processes outside. Like confine.py it imports nothing of the grader: the supervisor runs by its path."""

from __future__ import annotations

import ctypes
import ctypes.util
import glob
import os

PR_SET_NO_NEW_PRIVS = 38
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


EXEC_ROOTS = ("/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/opt", "/etc/alternatives")
DEVICE_FILES = ("/dev/nvidia*", "/dev/nvidia-caps/*", "/dev/dri/*", "/dev/null", "/dev/zero", "/dev/full",
                "/dev/tty")

LIBC = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
LIBC.syscall.restype = ctypes.c_long


def syscall(number: int, *args) -> int:
    return int(LIBC.syscall(ctypes.c_long(number), *args))


def prctl(option: int, arg: int) -> int:
    return int(LIBC.prctl(ctypes.c_int(option), ctypes.c_ulong(arg), ctypes.c_ulong(0), ctypes.c_ulong(0),
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
    abi = syscall(SYS_LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(LANDLOCK_CREATE_RULESET_VERSION))
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
            syscall(SYS_LANDLOCK_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(LANDLOCK_RULE_PATH_BENEATH),
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
    ruleset = syscall(SYS_LANDLOCK_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(sizes.get(abi, 24)),
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
        if prctl(PR_SET_NO_NEW_PRIVS, 1) != 0:
            return f"unavailable (no_new_privs: {os.strerror(ctypes.get_errno())})"
        if syscall(SYS_LANDLOCK_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0)) != 0:
            return f"unavailable (restrict_self: {os.strerror(ctypes.get_errno())})"
    finally:
        os.close(ruleset)
    return f"abi {abi}"
