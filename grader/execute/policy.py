"""How a test binary runs: the environment it gets and the policy of a grade's runs (limits, bubblewrap,
the confine.py supervisor's settings, the global deadline)."""

from __future__ import annotations

import fnmatch
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from grader.isolate import process

DEFAULT_HOST_MEMORY_MIB = 32768.0
# What a run under compute-sanitizer may hold beyond the lab's own limit: the tool's memory is not the
# program's (racecheck held 4,170 MiB over lab 03's small tests on an H200, whose runs peak at 183 MiB).
TOOL_HOST_MEMORY_MIB = 4096.0

# What a test binary keeps of the grader's environment; everything else (GTEST_*, CUDALAB_*,
# LD_PRELOAD, CUDA_INJECTION64_PATH, ...) is the grader's to set or leave out.
INHERITED_ENV = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "LC_*", "TZ", "TERM", "LD_LIBRARY_PATH",
                 "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "CUDA_HOME", "CUDA_PATH", "CUDA_MODULE_LOADING",
                 "NVIDIA_*", "NCCL_*")


def test_env(extra: Mapping[str, str] | None = None, workdir: Path | None = None) -> dict[str, str]:
    """The environment of a test binary: the few variables it needs from ours, then the grader's own."""
    env = {k: v for k, v in os.environ.items() if any(fnmatch.fnmatchcase(k, p) for p in INHERITED_ENV)}
    env["CUDA_CACHE_DISABLE"] = "1"
    if workdir is not None:
        env["TMPDIR"] = str(workdir)
        env["TEST_TMPDIR"] = str(workdir) + os.sep  # GoogleTest's temporary files (CaptureStdout)
    env.update(extra or {})
    return env


@dataclass(frozen=True)
class ConfineSettings:
    """How runs are confined (grader/isolate/confine.py): the host memory of a run's processes together, the
    places programs may be started from besides the system's, Landlock and namespaces."""

    memory_mib: float = DEFAULT_HOST_MEMORY_MIB
    executable: tuple[str, ...] = ()
    landlock: bool = True
    namespaces: bool = True
    run_dir: str | None = None  # where the runs' private directories are made (None: the system's temp)
    private_tmp: bool = False  # an empty /tmp per run (run_dir must then lie outside /tmp)

    def for_run(self, workdir: Path, binary: Path, extra: Sequence[str] = ()) -> process.Confinement:
        roots = (*self.executable, str(Path(binary).resolve().parent), *extra)
        # /tmp: GoogleTest's captured output goes there; private to the run where it can have its own.
        return process.Confinement(workdir, self.memory_mib, tuple(dict.fromkeys(roots)), self.landlock,
                                   self.namespaces, writable=("/tmp",), private_tmp=self.private_tmp)


@dataclass
class RunPolicy:
    """How each run of a test binary is confined.

    limits: setrlimit()s of the process. sandbox: given the run's private directory (the only one it
    may write) and the paths it reads, the command line to put in front of the binary
    (grader/isolate/bwrap.py: bubblewrap), or None. confine: the supervisor's settings (None: run
    directly). deadline: time.monotonic() after which no run starts (the grade's global cap); a run's
    timeout is cut to what is left. verify: believe only reports that pass verify_report and echo what
    this run asked for."""

    limits: process.Limits = field(default_factory=process.Limits)
    sandbox: Callable[[Path, Sequence[Path | str]], list[str]] | None = None
    confine: ConfineSettings | None = None
    deadline: float | None = None
    verify: bool = True
    cap_s: float | None = None  # the global cap, for messages

    def remaining(self) -> float | None:
        return None if self.deadline is None else self.deadline - time.monotonic()

    def expired(self) -> bool:
        left = self.remaining()
        return left is not None and left <= 0

    def timeout(self, timeout_s: float) -> float:
        left = self.remaining()
        return timeout_s if left is None else max(0.1, min(timeout_s, left))

    def for_tool(self, timeout_s: float) -> tuple[float, RunPolicy]:
        """(the wall limit, this policy) for a run under a tool in front of the binary (compute-sanitizer,
        ncu): the tool runs threads of its own, so CPU time may well exceed wall time, and holds host
        memory of its own (TOOL_HOST_MEMORY_MIB more than the lab allows the program)."""
        limit = self.timeout(timeout_s)
        limits = process.Limits(cpu_s=int(limit * 8 + 60), file_bytes=self.limits.file_bytes, nproc=self.limits.nproc)
        confine = self.confine
        if confine is not None and confine.memory_mib:
            confine = replace(confine, memory_mib=confine.memory_mib + TOOL_HOST_MEMORY_MIB)
        return limit, replace(self, limits=limits, confine=confine)

    def cap_message(self) -> str:
        cap = f" ({self.cap_s:g} s)" if self.cap_s else ""
        return f"the grade reached its global time limit{cap} before this test could run"


DEFAULT_POLICY = RunPolicy()
