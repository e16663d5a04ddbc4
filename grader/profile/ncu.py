"""Nsight Compute (ncu), as the profile stage uses it: where it is, the command line, and its raw CSV page
read into one dict per profiled kernel. The numbers are ncu's own; nothing here counts anything.
"""

from __future__ import annotations

import csv
import fnmatch
import io
import re
import subprocess
from collections.abc import Sequence


# The sections whose metrics grader/profile/metrics.py reads (`ncu --list-sections` names them); fewer
# than --set full, so each kernel replays fewer times.
SECTIONS = ("LaunchStats", "Occupancy", "SpeedOfLight", "SpeedOfLight_RooflineChart", "ComputeWorkloadAnalysis",
            "MemoryWorkloadAnalysis_Tables", "WarpStateStats")
# What ncu prints when the driver keeps the GPU's counters to administrators.
NO_PERMISSION = re.compile(r"ERR_NVGPUCTRPERM|does not have permission to access NVIDIA GPU Performance Counters")
PERMISSION_HELP = (
    "Nsight Compute may not read this GPU's performance counters (ERR_NVGPUCTRPERM): the driver keeps them to "
    "administrators. An administrator can allow them for every user with the driver option "
    "NVreg_RestrictProfilingToAdminUsers=0 (a file in /etc/modprobe.d/, then reload the driver or reboot); "
    "see https://developer.nvidia.com/ERR_NVGPUCTRPERM. The grade itself is not affected.")
NOT_FOUND_HELP = (
    "Nsight Compute (ncu) was not found: it ships with the CUDA toolkit (bin/ncu) and as its own package "
    "(nsight-compute). Put it on the PATH or set CUDALAB_NCU=/path/to/ncu. The grade itself is not affected.")


def version(ncu: str) -> str:
    try:
        out = subprocess.run([ncu, "--version"], capture_output=True, text=True, timeout=60, check=False).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return next((ln.strip() for ln in out.splitlines() if ln.strip().startswith("Version")), "")


def glob_regex(globs: Sequence[str]) -> str:
    """Kernel globs (lab.toml's task kernels) as one ncu regex: matched anywhere in the demangled name."""
    parts = [re.escape(g).replace(r"\*", ".*").replace(r"\?", ".") for g in globs if g.strip("*?")]
    return "|".join(parts)


def argv(ncu: str, log_file: str, kernel_regex: str, count: int = 1, base: str = "demangled") -> list[str]:
    """ncu in front of a test binary: the first `count` launches whose name (base: "demangled", or
    "mangled" for exact names) matches, the lab's sections, the raw page as CSV into log_file. Clocks
    stay locked to base (ncu's default), so times are slower than the perf tests' and compare only with
    each other."""
    out = [ncu, "--csv", "--page", "raw", "--log-file", log_file, "--kernel-name-base", base,
           "--kernel-name", f"regex:{kernel_regex}", "--launch-count", str(count)]
    for section in SECTIONS:
        out += ["--section", section]
    return out


def number(text: str) -> float | None:
    """An ncu value ("1,027,200", "73.59", "n/a") as a float."""
    text = text.strip().replace(",", "")
    try:
        return float(text)
    except ValueError:
        return None


def parse_raw(text: str) -> list[dict[str, str]]:
    """The raw page's kernels: one dict per row after the header ("ID", ...) and the units row. Lines
    before the header (the program's own output, ==PROF== notes) are skipped."""
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith('"ID",')), None)
    if start is None:
        return []
    rows = list(csv.reader(io.StringIO("\n".join(lines[start:]))))
    if len(rows) < 2:
        return []
    header = rows[0]
    return [dict(zip(header, r, strict=False)) for r in rows[2:] if len(r) == len(header)]


def problem(text: str) -> str | None:
    """Why ncu profiled nothing, in the student's words, from what it printed (None: nothing known)."""
    if NO_PERMISSION.search(text):
        return PERMISSION_HELP
    if "No kernels were profiled" in text:
        return "Nsight Compute saw no launch of the kernel it was asked for (did the test run and call it?)"
    m = re.search(r"==ERROR== (.+)", text)
    return f"Nsight Compute failed: {m.group(1).strip()}" if m else None


def own_kernels_regex(globs: Sequence[str], mangled: Sequence[str], names: dict[str, str]) -> str | None:
    """An exact ncu regex (for --kernel-name-base mangled) over the kernels the lab's code itself defines
    (their mangled names, from its PTX) that the task's globs name; names: mangled -> demangled. A
    library's kernel can never match it. None when no kernel of the code fits the globs."""
    def fits(m: str) -> bool:
        full = names.get(m, m)
        base = re.sub(r"<[^<>]*>", "", re.sub(r"<[^<>]*>", "", full.split("(", 1)[0]))  # two levels of <...>
        base = base.rsplit(" ", 1)[-1].rsplit("::", 1)[-1]
        return any(fnmatch.fnmatchcase(full, g) or fnmatch.fnmatchcase(base, g)
                   or fnmatch.fnmatchcase(m, "*" + g.lstrip("*")) for g in globs if g.strip("*?"))
    chosen = [m for m in dict.fromkeys(mangled) if fits(m)]
    return "^(" + "|".join(re.escape(m) for m in chosen) + ")$" if chosen else None
