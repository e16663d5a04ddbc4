"""bubblewrap (bwrap), where installed, confines every run of a student binary: the whole tree read-only,
a private /tmp, no network, only the NVIDIA device nodes, and one writable directory for the results.
"""

from __future__ import annotations

import glob
import os
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from grader.host.toolkit import find_bwrap

PRIVATE = ("/tmp", "/dev/shm")  # empty in the sandbox: what the run needs from there is bound back


def bwrap_prefix(bwrap: str, writable: Path, keep: Sequence[Path | str] = ()) -> list[str]:
    """bubblewrap arguments: the whole file system read-only, a fresh /dev with only the NVIDIA nodes
    added, a private /tmp, new network/IPC/PID namespaces, and `writable` the one writable directory.
    keep: what the run reads (its binary's folder, the grader, the tools); those under /tmp (a checkout
    in /tmp, a CI runner's workspace) are bound back read-only over the private /tmp."""
    cmd = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev"]
    for node in sorted(glob.glob("/dev/nvidia*")):
        cmd += ["--dev-bind", node, node]
    cmd += ["--proc", "/proc"]
    for private in PRIVATE:
        cmd += ["--tmpfs", private]
    back: list[str] = []
    for path in sorted({os.path.realpath(k) for k in keep}):
        under_private = any(path.startswith(pr + "/") for pr in PRIVATE)
        if under_private and os.path.exists(path) and not any(path.startswith(b + "/") for b in back):
            back.append(path)
    for path in back:  # before the writable folder, which may lie inside one of them
        cmd += ["--ro-bind", path, path]
    cmd += [
        "--bind", str(writable), str(writable),
        "--chdir", str(writable),
        "--unshare-net", "--unshare-ipc", "--unshare-pid", "--unshare-uts",
        "--die-with-parent", "--new-session",
        "--setenv", "CUDA_CACHE_DISABLE", "1",
        "--",
    ]
    return cmd


@dataclass
class Sandbox:
    """Whether runs are sandboxed, and how: wrapper(workdir) is the command line to put in front."""

    bwrap: str | None
    reason: str = ""  # why not sandboxed, when bwrap is None

    @property
    def active(self) -> bool:
        return self.bwrap is not None

    def wrapper(self, workdir: Path, keep: Sequence[Path | str] = ()) -> list[str]:
        return bwrap_prefix(self.bwrap, workdir, keep) if self.bwrap else []


def probe_sandbox(mode: str = "auto", bwrap: str | None = None) -> Sandbox:
    """mode "off": no sandbox. "auto": bubblewrap when it is installed and starts (a trial run of
    /bin/true inside it); otherwise none, with the reason."""
    if mode == "off":
        return Sandbox(None, "the sandbox was turned off (--no-sandbox)")
    bwrap = bwrap or find_bwrap()
    if bwrap is None:
        return Sandbox(None, "bubblewrap (bwrap) is not installed, so runs are not sandboxed")
    scratch = Path(os.environ.get("TMPDIR", "/tmp"))
    try:
        import tempfile

        with tempfile.TemporaryDirectory(prefix="cudalab-bwrap-", dir=scratch) as tmp:
            proc = subprocess.run(
                [*bwrap_prefix(bwrap, Path(tmp)), "/bin/sh", "-c", "true"],
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace", timeout=30, check=False,
            )
    except (OSError, subprocess.TimeoutExpired) as err:
        return Sandbox(None, f"bubblewrap did not start ({err}), so runs are not sandboxed")
    if proc.returncode != 0:
        first = next((ln.strip() for ln in proc.stdout.splitlines() if ln.strip()), f"exit code {proc.returncode}")
        return Sandbox(None, f"bubblewrap did not start ({first[:160]}), so runs are not sandboxed")
    return Sandbox(bwrap)
