"""Facts about the machine and the checkout: the GPU (nvidia-smi), the toolkit (nvcc), the commit, the
host. Used to pick a preset, to fill RunInfo, and by `doctor`."""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Mapping

from grader import __version__
from grader.host.toolkit import find_nvcc
from grader.model.results import RunInfo

PROBE_TIMEOUT_S = 20.0


@dataclass(frozen=True)
class GpuProbe:
    available: bool
    name: str = ""  # "NVIDIA H200"
    compute_capability: str = ""  # "9.0"
    reason: str = ""  # why not, when unavailable
    memory_mib: int = 0  # the smallest memory.total of the GPUs nvidia-smi lists (0: not known)

    @property
    def sm(self) -> str:
        return "sm_" + self.compute_capability.replace(".", "") if self.compute_capability else ""

    def brief(self) -> str:
        """One line for `make test`: what runs here."""
        if not self.available:
            return f"GPU: none ({self.reason}) — GPU tests will be skipped"
        arch = f" ({self.sm})" if self.sm else ""
        return f"GPU: {self.name}{arch}"


def _run(argv: list[str], timeout: float = PROBE_TIMEOUT_S, cwd: Path | None = None) -> tuple[int, str]:
    try:
        proc = subprocess.run(
            argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace", timeout=timeout
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        return -1, str(err)
    return proc.returncode, proc.stdout


def probe_gpu() -> GpuProbe:
    """A GPU is present when nvidia-smi lists one. One query (name, compute capability, memory) answers it
    on a current driver; `nvidia-smi -L` is asked only when that query fails (an old driver's nvidia-smi
    knows no compute_cap), for the name, or for why no GPU is listed. Each call costs a grade ~0.2 s."""
    if shutil.which("nvidia-smi") is None:
        return GpuProbe(False, reason="no NVIDIA driver")
    code, out = _run(["nvidia-smi", "--query-gpu=name,compute_cap,memory.total", "--format=csv,noheader,nounits"])
    rows = [[f.strip() for f in ln.split(",")] for ln in out.splitlines() if ln.strip()] if code == 0 else []
    if rows and len(rows[0]) >= 3 and rows[0][0] and re.fullmatch(r"\d+\.\d+", rows[0][1]):
        sizes = [int(r[2]) for r in rows if len(r) >= 3 and r[2].isdigit()]
        return GpuProbe(True, name=rows[0][0], compute_capability=rows[0][1], memory_mib=min(sizes, default=0))
    code, out = _run(["nvidia-smi", "-L"])
    if code != 0 or "GPU" not in out:
        line = next((ln.strip() for ln in out.splitlines() if ln.strip()), "no output")
        return GpuProbe(False, reason=f"nvidia-smi -L failed: {line[:160]}")
    name = out.splitlines()[0].split(":", 1)[-1].split("(UUID")[0].strip()
    return GpuProbe(True, name=name)


@dataclass(frozen=True)
class GpuDevice:
    """One GPU of the machine, as nvidia-smi lists it: index (PCI bus order), name, UUID. A batch with
    --gpus pins each test run to one device with CUDA_VISIBLE_DEVICES (its UUID where known)."""

    index: int
    name: str = ""
    uuid: str = ""
    compute_capability: str = ""

    @property
    def env(self) -> dict[str, str]:
        """What pins a process to this GPU: CUDA numbers devices in nvidia-smi's order with PCI_BUS_ID."""
        return {"CUDA_VISIBLE_DEVICES": self.uuid or str(self.index), "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}

    @property
    def label(self) -> str:
        """'GPU 2 (NVIDIA H100 80GB HBM3)'."""
        return f"GPU {self.index}" + (f" ({self.name})" if self.name else "")

    def facts(self) -> dict[str, str]:
        """What a report records of the device (RunInfo.gpu, beside the test binary's own facts)."""
        facts = {"gpu_index": str(self.index), "gpu_uuid": self.uuid}
        return {k: v for k, v in facts.items() if v}

    def probe(self, machine: GpuProbe) -> GpuProbe:
        """The machine's probe, told about this device."""
        return GpuProbe(True, name=self.name or machine.name,
                        compute_capability=self.compute_capability or machine.compute_capability,
                        memory_mib=machine.memory_mib)


def list_gpus() -> list[GpuDevice]:
    """Every GPU nvidia-smi lists (it ignores CUDA_VISIBLE_DEVICES), in its index order; [] without
    a driver or a GPU."""
    if shutil.which("nvidia-smi") is None:
        return []
    code, out = _run(["nvidia-smi", "--query-gpu=index,name,uuid,compute_cap", "--format=csv,noheader"])
    devices: list[GpuDevice] = []
    if code == 0:
        for line in out.splitlines():
            fields = [f.strip() for f in line.split(",")]
            if len(fields) >= 3 and fields[0].isdigit():
                cc = fields[3] if len(fields) >= 4 and fields[3][:1].isdigit() else ""
                devices.append(GpuDevice(int(fields[0]), fields[1], fields[2], cc))
    if devices:
        return devices
    code, out = _run(["nvidia-smi", "-L"])  # "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-...)"
    if code != 0:
        return []
    for line in out.splitlines():
        head, _, rest = line.partition(":")
        if head.startswith("GPU ") and head[4:].strip().isdigit():
            name, _, uuid = rest.partition("(UUID:")
            devices.append(GpuDevice(int(head[4:]), name.strip(), uuid.strip(" )")))
    return devices


def choose_preset(gpu: GpuProbe, override: str | None = None) -> str:
    """`default` (native architecture) with a GPU, `ci` (explicit architectures) without one."""
    if override:
        return override
    return "default" if gpu.available else "ci"


def toolkit_version() -> str:
    """The last line of `nvcc --version` ("Build cuda_13.0.r13.0/compiler...."), or ""."""
    nvcc = find_nvcc()
    if nvcc is None:
        return ""
    code, out = _run([nvcc, "--version"])
    lines = [ln.strip() for ln in out.splitlines() if ln.strip()]
    return lines[-1] if code == 0 and lines else ""


def git_commit(root: Path) -> str:
    """Short HEAD, with "+dirty" when tracked files have changes; "" outside a repository."""
    code, out = _run(["git", "rev-parse", "--short", "HEAD"], cwd=root)
    if code != 0:
        return ""
    commit = out.strip()
    code, status = _run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root)
    if code == 0 and status.strip():
        commit += "+dirty"
    return commit


def now_iso() -> str:
    return datetime.now(timezone.utc).astimezone().isoformat(timespec="seconds")


def new_run_info(root: Path, mode: str, gpu: GpuProbe, submission: str = "") -> RunInfo:
    return RunInfo(
        started=now_iso(),
        mode=mode,
        submission=submission,
        commit=git_commit(root),
        host=socket.gethostname(),
        grader_version=__version__,
        toolkit=toolkit_version(),
        gpu_available=gpu.available,
        gpu_reason=gpu.reason,
        gpu={"gpu_name": gpu.name, "gpu_compute_capability": gpu.compute_capability} if gpu.available else {},
    )


def apply_gpu_properties(info: RunInfo, properties: Mapping[str, str]) -> None:
    """Take the GPU facts a test binary recorded (its gpu_* and cuda_* root properties) as the truth."""
    facts = {k: v for k, v in properties.items() if k.startswith(("gpu_", "cuda_"))}
    if not facts:
        return
    info.gpu = facts
    if facts.get("gpu_name", "none") == "none":
        info.gpu_available = False
        info.gpu_reason = facts.get("gpu_unavailable_reason", info.gpu_reason) or info.gpu_reason
    else:
        info.gpu_available = True
        info.gpu_reason = ""
