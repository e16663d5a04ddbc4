"""compute-sanitizer's log read into findings: each distinct problem (merged by what, kernel and line), the
kernel and source line it names (the graded file's line for an access inside an inlined function), where
an out-of-bounds access went and who made it, and what the tool said it could not watch. Only the tool's
own lines (its log file, "=========" prefixed) count: nothing the program prints can pass for a finding.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

_PREFIX = re.compile(r"^=+ ?")
_AT = re.compile(r"^\s*(?:at|by)\s+(?P<where>.+?)\s+in\s+(?P<loc>\S+:\d+)\s*$")
_AT_OLD = re.compile(r"^\s*at\s+0x[0-9a-f]+\s+in\s+(?P<loc>\S+:\d+):(?P<where>.+)$")
# With -lineinfo, a finding in an inlined function (a __device__ helper, a libcu++ atomic) lists the
# functions it was inlined into, the kernel last: "Device Frame: kernel(...)+0x70 in file.cu:12".
_DEVICE_FRAME = re.compile(r"^\s*Device Frame:\s*(?P<where>.+?)\s+in\s+(?P<loc>\S+:\d+)\s*$")
_RACE = re.compile(
    r"^(?P<sev>Error|Warning): Race reported between (?P<a>\w+) access at (?P<k1>.+?) in (?P<l1>\S+:\d+)\s*$"
)
_RACE_AND = re.compile(r"^\s*and (?P<b>\w+) access at (?P<k2>.+?) in (?P<l2>\S+:\d+)(?:\s*\[(?P<n>\d+) hazards?\])?")
# Where an out-of-bounds access went: "by thread (3,0,0) in block (16,0,0)", then "and is 1 bytes after the
# nearest allocation at 0x... of size 16,384 bytes" (1 byte after: the first byte past the end).
_BY_THREAD = re.compile(r"^\s*by thread \((?P<thread>[\d,]+)\) in block \((?P<block>[\d,]+)\)")
_NEAREST = re.compile(r"^\s*and is (?P<n>[\d,]+) bytes? (?P<dir>after|before) the nearest allocation at "
                      r"0x[0-9a-fA-F]+ of size (?P<size>[\d,]+) bytes?")
_SUMMARY = re.compile(r"ERROR SUMMARY: (\d+) errors?")
# The tool's note that the program it watched crashed (a host fault, an abort): no finding of its own.
_TARGET_DIED = re.compile(r"^Error: process didn't terminate successfully")
_RACE_SUMMARY = re.compile(r"RACECHECK SUMMARY: (\d+) hazards? displayed \((\d+) errors?, (\d+) warnings?\)")
# What the tool cannot watch, e.g. racecheck on a program using dynamic parallelism: "Warning: CUDA
# Dynamic Parallelism is not supported by the selected tool". A note that the run checked nothing it can
# vouch for (racecheck then watches no kernel, host-launched ones included), not a finding.
_UNSUPPORTED = re.compile(r"^(?:Warning|Error): (?P<what>.+?) (?:is|are) not supported by the selected tool")
_HEADLINE = re.compile(
    r"^(Invalid|Uninitialized|Barrier error|Misaligned|Out-of-range|Malloc|Free|Leaked|Cuda|Program hit|"
    r"Warning|Error|Illegal|Hardware|Unused|Detected|Potential|Race|Fatal)",
)




def kernel_name(where: str) -> str:
    """'vector_add_kernel(const float *, float *, int)+0x90' -> 'vector_add_kernel'."""
    text = re.sub(r"\+0x[0-9a-fA-F]+$", "", where.strip())
    depth = 0
    for i in range(len(text) - 1, -1, -1):  # drop the parameter list: the last balanced (...)
        if text[i] == ")":
            depth += 1
        elif text[i] == "(":
            depth -= 1
            if depth == 0:
                text = text[:i]
                break
    text = re.sub(r"^(?:void|static|__global__)\s+", "", text.strip())
    return text or where.strip()


def short_location(loc: str) -> str:
    path, _, line = loc.rpartition(":")
    return f"{Path(path).name}:{line}" if path else loc


@dataclass(frozen=True)
class Finding:
    tool: str
    what: str  # "Invalid __global__ write of size 4 bytes", "Race: Write/Read (error)"
    kernel: str
    location: str  # file:line (basename)
    count: int = 1
    detail: str = ""
    function: str = ""  # the inlined function the access is in, when it is not the kernel itself
    access: str = ""  # where the first such access went and who made it (access_text)
    oob: str = ""  # where that access lay against its allocation (oob_kind): "just-past-end", ...

    @property
    def charged(self) -> str:
        """What the finding costs (score/penalties.py): 'function>kernel' for an access inside an inlined
        function (a task that owns the function pays, else the kernel's task), else the kernel."""
        return f"{self.function}>{self.kernel}" if self.function else self.kernel

    def line(self) -> str:
        where = f" in {self.kernel}" if self.kernel else ""
        at = f" at {self.location}" if self.location else ""
        times = f" ({self.count} times)" if self.count > 1 else ""
        extra = "".join(f"; {part}" for part in (self.detail, self.access) if part)
        return f"{self.what}{where}{at}{times}{extra}"


# "just-past-end": at most this far past its allocation's end, as far as one block of 1024 threads can run
# past n with 16-byte vectors: threads a guard should have stopped.
NEAR_END_BYTES = 16 * 1024


def oob_kind(nearest: re.Match[str] | None) -> str:
    """Where an out-of-bounds access lay against the nearest allocation: "just-past-end" (within
    NEAR_END_BYTES of its end), "far-past-end", "before-start", or "" when the tool named none."""
    if nearest is None:
        return ""
    if nearest.group("dir") == "before":
        return "before-start"
    past = int(nearest.group("n").replace(",", "")) - 1  # "1 bytes after": the first byte past the end
    return "just-past-end" if past < NEAR_END_BYTES else "far-past-end"


def access_text(thread: str, block: str, nearest: re.Match[str] | None) -> str:
    """The first access of a finding in words: 'the first at byte 16,384 of a 16,384-byte allocation, by
    thread (0,0,0) of block (16,0,0)'. The tool counts "1 bytes after" for the first byte past the end;
    the byte offset from the allocation's start is what a student can hold against their index."""
    parts = []
    if nearest is not None:
        n, size = int(nearest.group("n").replace(",", "")), int(nearest.group("size").replace(",", ""))
        if nearest.group("dir") == "after":
            parts.append(f"the first at byte {size + n - 1:,} of a {size:,}-byte allocation")
        else:
            parts.append(f"the first {n:,} byte{'s' if n != 1 else ''} before a {size:,}-byte allocation")
    if thread and block:
        parts.append(f"by thread ({thread}) of block ({block})")
    return ", ".join(parts)


def parse_log(text: str, tool: str, own_files: Sequence[str] = ()) -> tuple[list[Finding], int | None]:
    """Distinct findings of a compute-sanitizer report (merged by what, kernel and location), and the
    number of errors its summary states (None when it has no summary). A finding inside an inlined
    function is the kernel's (the last device frame) at the first frame in one of own_files (the graded
    file's names), where the student can act on it, with the inlined function as its detail."""
    lines = [_PREFIX.sub("", ln.rstrip()) for ln in text.splitlines() if ln.startswith("=")]
    merged: dict[tuple[str, str, str], Finding] = {}
    total: int | None = None

    def add(f: Finding) -> None:
        key = (f.what, f.kernel, f.location)
        old = merged.get(key)
        merged[key] = f if old is None else replace(old, count=old.count + f.count)

    i = 0
    while i < len(lines):
        ln = lines[i]
        m = _SUMMARY.search(ln)
        if m:
            total = max(total or 0, int(m.group(1)))
            i += 1
            continue
        m = _RACE_SUMMARY.search(ln)
        if m:
            total = max(total or 0, int(m.group(2)) + int(m.group(3)))
            i += 1
            continue
        m = _RACE.match(ln)
        if m:
            l2, n = "", 1
            if i + 1 < len(lines):
                m2 = _RACE_AND.match(lines[i + 1])
                if m2:
                    l2, n = m2.group("l2"), int(m2.group("n") or 1)
                    i += 1
            sev = m.group("sev").lower()
            what = f"Shared-memory race ({sev}) between a {m.group('a').lower()} at {short_location(m.group('l1'))}"
            what += f" and a {m2.group('b').lower()} at {short_location(l2)}" if l2 else ""
            add(Finding(tool, what, kernel_name(m.group("k1")), "", 1, f"{n} hazards" if n > 1 else ""))
            i += 1
            continue
        if _UNSUPPORTED.match(ln) or _TARGET_DIED.match(ln):
            i += 1
            continue
        if ln and not ln.startswith(" ") and _HEADLINE.match(ln) and "SUMMARY" not in ln and "COMPUTE-SANITIZER" not in ln:
            what = ln.strip().rstrip(":")
            frames: list[tuple[str, str]] = []  # (function, file:line), innermost first
            host = False
            thread = block = ""
            nearest: re.Match[str] | None = None
            j = i + 1
            while j < len(lines) and lines[j].startswith(" "):
                host = host or lines[j].strip().startswith(("Saved host backtrace", "Host Frame"))
                by = None if host else _BY_THREAD.match(lines[j])
                if by:
                    thread, block = by.group("thread"), by.group("block")
                nearest = nearest or (None if host else _NEAREST.match(lines[j]))
                m3 = _AT.match(lines[j]) or _AT_OLD.match(lines[j])
                if m3 and not frames and lines[j].strip().startswith("at"):
                    frames.append((kernel_name(m3.group("where")), short_location(m3.group("loc"))))
                m4 = None if host or not frames else _DEVICE_FRAME.match(lines[j])
                if m4:
                    frames.append((kernel_name(m4.group("where")), short_location(m4.group("loc"))))
                j += 1
            if not what.startswith("Program hit") and not what.startswith("Saved host"):
                found = _finding(tool, what, frames, own_files)
                if found.kernel:
                    found = replace(found, access=access_text(thread, block, nearest), oob=oob_kind(nearest))
                add(found)
            i = j
            continue
        i += 1
    return list(merged.values()), total


def _finding(tool: str, what: str, frames: list[tuple[str, str]], own_files: Sequence[str]) -> Finding:
    if not frames:
        return Finding(tool, what, "", "")
    kernel = frames[-1][0]
    mine = [f for f in frames if f[1].rpartition(":")[0] in own_files]
    location = (mine[0] if mine else frames[0])[1]
    inside = frames[0][0] if frames[0][0] != kernel else ""
    return Finding(tool, what, kernel, location, detail=f"inside {inside} (inlined)" if inside else "", function=inside)


def unsupported(text: str) -> list[str]:
    """What the tool said it could not watch ("CUDA Dynamic Parallelism"), once each, in order."""
    seen: list[str] = []
    for ln in text.splitlines():
        m = _UNSUPPORTED.match(_PREFIX.sub("", ln.strip()))
        if m and m.group("what") not in seen:
            seen.append(m.group("what"))
    return seen


def target_died(text: str) -> bool:
    """Whether the tool says the program it watched crashed (a host fault, an abort)."""
    return any(_TARGET_DIED.match(_PREFIX.sub("", ln)) for ln in text.splitlines())
