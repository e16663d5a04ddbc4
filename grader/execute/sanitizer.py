"""The compute-sanitizer stage: memcheck, racecheck, synccheck and initcheck as graded checks.

For a lab whose lab.toml has [sanitizer] tools (or tools asked for on the command line), the student
binary's correctness tests run under each tool at small sizes (CUDALAB_SMALL=1: large sizes and perf
tests skip themselves), with their own time limit, confined like every run (grader/execute/runs.py). The tool
writes its report to a pipe of its own (--log-file /proc/self/fd/N), so nothing the program prints can
pass for a finding or hide one. Each tool becomes one result, sanitizer.<tool>: passed when it found
nothing, failed (category sanitizer) with the kernel and file:line of each distinct finding (the builds
use -lineinfo), or not run with the reason (no compute-sanitizer, no GPU, time limit). [sanitizer]
points are shared by the tools that ran.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from grader.isolate import process
from grader.execute import runs
from grader.model.labs import Lab
from grader.model.results import Category, LabResult, Status, TaskScore, TestResult
from grader.model.text import truncate

TOOLS = ("memcheck", "racecheck", "synccheck", "initcheck")
ERROR_EXITCODE = 86
PRINT_LIMIT = 20
MAX_SHOWN = 5
SUITE = "sanitizer"
TASK_ID = "sanitizer"
CORRECTNESS_FILTER = "-*Perf.*"

_PREFIX = re.compile(r"^=+ ?")
_AT = re.compile(r"^\s*(?:at|by)\s+(?P<where>.+?)\s+in\s+(?P<loc>\S+:\d+)\s*$")
_AT_OLD = re.compile(r"^\s*at\s+0x[0-9a-f]+\s+in\s+(?P<loc>\S+:\d+):(?P<where>.+)$")
_RACE = re.compile(
    r"^(?P<sev>Error|Warning): Race reported between (?P<a>\w+) access at (?P<k1>.+?) in (?P<l1>\S+:\d+)\s*$"
)
_RACE_AND = re.compile(r"^\s*and (?P<b>\w+) access at (?P<k2>.+?) in (?P<l2>\S+:\d+)(?:\s*\[(?P<n>\d+) hazards?\])?")
_SUMMARY = re.compile(r"ERROR SUMMARY: (\d+) errors?")
_RACE_SUMMARY = re.compile(r"RACECHECK SUMMARY: (\d+) hazards? displayed \((\d+) errors?, (\d+) warnings?\)")
# What the tool cannot watch, e.g. racecheck on a program using dynamic parallelism: "Warning: CUDA
# Dynamic Parallelism is not supported by the selected tool". A note on what went unchecked, not a finding
# (the kernels the host launches are still checked).
_UNSUPPORTED = re.compile(r"^(?:Warning|Error): (?P<what>.+?) (?:is|are) not supported by the selected tool")
_HEADLINE = re.compile(
    r"^(Invalid|Uninitialized|Barrier error|Misaligned|Out-of-range|Malloc|Free|Leaked|Cuda|Program hit|"
    r"Warning|Error|Illegal|Hardware|Unused|Detected|Potential|Race|Fatal)",
)


def find_sanitizer() -> str | None:
    for candidate in (shutil.which("compute-sanitizer"), "/usr/local/cuda/bin/compute-sanitizer"):
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


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

    def line(self) -> str:
        where = f" in {self.kernel}" if self.kernel else ""
        at = f" at {self.location}" if self.location else ""
        times = f" ({self.count} times)" if self.count > 1 else ""
        extra = f"; {self.detail}" if self.detail else ""
        return f"{self.what}{where}{at}{times}{extra}"


def parse_log(text: str, tool: str) -> tuple[list[Finding], int | None]:
    """Distinct findings of a compute-sanitizer report (merged by what, kernel and location), and the
    number of errors its summary states (None when it has no summary)."""
    lines = [_PREFIX.sub("", ln.rstrip()) for ln in text.splitlines() if ln.startswith("=")]
    merged: dict[tuple[str, str, str], Finding] = {}
    total: int | None = None

    def add(f: Finding) -> None:
        key = (f.what, f.kernel, f.location)
        old = merged.get(key)
        merged[key] = f if old is None else Finding(f.tool, f.what, f.kernel, f.location, old.count + f.count, old.detail)

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
        if _UNSUPPORTED.match(ln):
            i += 1
            continue
        if ln and not ln.startswith(" ") and _HEADLINE.match(ln) and "SUMMARY" not in ln and "COMPUTE-SANITIZER" not in ln:
            what, kernel, loc = ln.strip().rstrip(":"), "", ""
            j = i + 1
            while j < len(lines) and lines[j].startswith(" "):
                m3 = _AT.match(lines[j]) or _AT_OLD.match(lines[j])
                if m3 and not kernel and lines[j].strip().startswith("at"):
                    kernel, loc = kernel_name(m3.group("where")), short_location(m3.group("loc"))
                j += 1
            if not what.startswith("Program hit") and not what.startswith("Saved host"):
                add(Finding(tool, what, kernel, loc))
            i = j
            continue
        i += 1
    return list(merged.values()), total


def unsupported(text: str) -> list[str]:
    """What the tool said it could not watch ("CUDA Dynamic Parallelism"), once each, in order."""
    seen: list[str] = []
    for ln in text.splitlines():
        m = _UNSUPPORTED.match(_PREFIX.sub("", ln.strip()))
        if m and m.group("what") not in seen:
            seen.append(m.group("what"))
    return seen


@dataclass
class ToolRun:
    tool: str
    result: TestResult
    findings: list[Finding]


def sanitizer_argv(sanitizer: str, tool: str, log_file: Path | str) -> list[str]:
    argv = [sanitizer, "--tool", tool, "--error-exitcode", str(ERROR_EXITCODE), "--print-limit", str(PRINT_LIMIT),
            "--log-file", str(log_file)]
    if tool == "memcheck":
        argv += ["--report-api-errors", "no"]  # tests that provoke API errors on purpose are not findings
    return argv


def run_tool(
    sanitizer: str,
    tool: str,
    binary: Path,
    timeout_s: float,
    env: Mapping[str, str] | None = None,
    policy: runs.RunPolicy | None = None,
    label: str = "student",
) -> ToolRun:
    """One tool over the binary's correctness tests at small sizes."""
    policy = policy or runs.DEFAULT_POLICY
    name = f"{SUITE}.{tool}"
    limit = policy.timeout(timeout_s)
    # The tool runs threads of its own: CPU time may well exceed wall time.
    limits = process.Limits(cpu_s=int(limit * 8 + 60), file_bytes=policy.limits.file_bytes, nproc=policy.limits.nproc)
    tool_policy = replace(policy, limits=limits)
    tool_root = str(Path(sanitizer).resolve().parent.parent)
    launched = runs.launch(Path(binary), [f"--gtest_filter={CORRECTNESS_FILTER}"], limit, env, tool_policy, small=True,
                           prefix=lambda ch: sanitizer_argv(sanitizer, tool, ch[0].path), extra_channels=1,
                           exec_roots=[tool_root])
    proc = launched.proc
    text = launched.extra[0].decode(errors="replace")
    # The tests ran to the end under the tool, and the harness saw the tool attached and small mode on.
    attempt = runs.read_launch(launched, label, verify=policy.verify)
    finished = attempt.parsed is not None
    findings, total = parse_log(text, tool)
    blind = unsupported(text)
    # The tool counts its own "not supported" warnings as errors (summary and exit code): with nothing
    # else found, they are what it could not check, not a bug of the program.
    excused = bool(blind) and not findings and (total is None or total <= len(blind))
    result = TestResult(name=name, status=Status.PASSED, kind="correctness", binary=label, duration_s=proc.duration_s,
                        properties={"sanitizer_tool": tool})
    if blind:
        result.properties["sanitizer_unsupported"] = "; ".join(blind)
        result.message = (f"compute-sanitizer {tool} could not check what uses {', '.join(blind)} (not supported "
                          "by the tool); it checked the rest")
    if not excused and (findings or proc.returncode == ERROR_EXITCODE or (total or 0) > 0):
        count = total if total is not None else sum(f.count for f in findings)
        shown = findings[:MAX_SHOWN]
        lines = [f"compute-sanitizer {tool} reported {count} error(s)" + (":" if shown else ".")]
        lines += [f"  {f.line()}" for f in shown]
        if len(findings) > MAX_SHOWN:
            lines.append(f"  ... and {len(findings) - MAX_SHOWN} more distinct finding(s)")
        result.status = Status.FAILED
        result.category = Category.SANITIZER
        result.message = truncate("\n".join(lines), 4_000)
        result.properties["sanitizer_errors"] = str(count)
        if shown:
            result.properties["sanitizer_kernel"] = shown[0].kernel
            result.properties["sanitizer_location"] = shown[0].location
        kernels = sorted({f.kernel for f in findings if f.kernel})
        if kernels:  # every kernel a finding names: each costs the task that owns it (apply_points)
            result.properties["sanitizer_kernels"] = ",".join(kernels)
    elif proc.timed_out:
        result.status = Status.NOT_RUN
        result.category = Category.TIMEOUT
        result.message = (f"not run to the end: compute-sanitizer {tool} did not finish within {limit:g} s "
                          "(an endless loop, or tests too slow under the tool)")
    elif proc.signal or not text.strip() or not finished:
        why = proc.signal_name or f"exit code {proc.returncode}"
        result.status = Status.NOT_RUN
        result.category = Category.HARNESS
        result.message = f"compute-sanitizer {tool} gave no verdict: the program ended ({why}) before the tool reported"
        if attempt.report_error and not attempt.report_missing:
            result.message += f" ({attempt.report_error})"
        tail = "\n".join(proc.output.splitlines()[-8:])
        if tail.strip():
            result.message += "\n\nLast output:\n" + tail[-1_500:]
    return ToolRun(tool, result, findings)


@dataclass
class Graded:
    """The binary the sanitizer stage runs: the lab's student binary (the solution's in solution mode)."""

    target: str
    bin_dir: Path
    label: str = "student"
    blocked: Any = None  # the Block that kept it from running (grader/grade/context.py), if any
    built: bool = True
    ran: bool = False


def stage(ctx: Any, lab: Lab, result: LabResult, graded: Graded | None) -> list[TestResult]:
    """The compute-sanitizer stage: each of the lab's tools over the graded binary, or why not."""
    tools = tools_for(lab, ctx.options.sanitizer_tools)
    if not tools or graded is None:
        return []
    label = graded.label
    if graded.blocked is not None or not graded.ran:
        why = graded.blocked.test_message if graded.blocked is not None else "the binary did not build"
        return not_run(tools, why, label=label)
    if not ctx.gpu.available or _saw_no_gpu(result):
        out = not_run(tools, "no GPU on this machine", Category.NO_GPU, label)
        for t in out:
            t.status = Status.SKIPPED
        return out
    tool_path = find_sanitizer()
    if tool_path is None:
        out = not_run(tools, "compute-sanitizer is not installed (it comes with the CUDA toolkit)", label=label)
        for t in out:
            t.status = Status.SKIPPED
        return out
    timeout = float(lab.sanitizer.get("timeout_s", 0) or 0) or (
        3 * ctx.options.timeout_s if ctx.options.timeout_s else lab.timeout_s)
    out = []
    # Why the remaining tools are not run: one ran out of time (the others would run the same kernels as
    # long), or, with stop_at_first_failure (the mutation gate), one found a problem (the verdict is in).
    skip: tuple[str, Category] | None = None
    for tool in tools:
        stop = ctx.stopped()
        if stop is not None:
            out += not_run([tool], stop.test_message, stop.category, label)
            continue
        if skip is not None:
            out += not_run([tool], skip[0].format(tool=tool), skip[1], label)
            continue
        ctx.progress.step(f"compute-sanitizer {tool} on {graded.target} (small sizes)")
        run = run_tool(tool_path, tool, graded.bin_dir / graded.target, timeout, env=ctx.options.env,
                       policy=ctx.policy, label=label)
        (ctx.progress.ok if run.result.status is Status.PASSED else ctx.progress.fail)(
            f"{run.result.name}: {run.result.status.value}"
            + (f" ({len(run.findings)} distinct finding(s))" if run.findings else "")
        )
        out.append(run.result)
        if run.result.category is Category.TIMEOUT:
            skip = (f"not run: compute-sanitizer {tool} did not finish in time, and {{tool}} would run the same "
                    "kernels under a tool at least as slow", Category.TIMEOUT)
        if run.result.status is not Status.PASSED:
            ctx.after_fault(f"compute-sanitizer {tool}")
            if skip is None and ctx.options.stop_at_first_failure:
                skip = (f"not run: compute-sanitizer {tool} found a problem already, which decides the "
                        "mutation gate", Category.SANITIZER)
    return out


def _saw_no_gpu(result: LabResult) -> bool:
    """Every test of the lab skipped for lack of a GPU: the binary saw none."""
    gpu_tests = [t for t in result.tests if t.category is Category.NO_GPU]
    return bool(gpu_tests) and len(gpu_tests) == len([t for t in result.tests if not t.name.startswith(f"{SUITE}.")])


def tools_for(lab: Lab, override: list[str] | None = None) -> list[str]:
    """The tools to run: the command line's, else lab.toml's [sanitizer] tools (none when absent)."""
    wanted = override if override is not None else list(lab.sanitizer.get("tools", []))
    return [t for t in wanted if t in TOOLS]


def not_run(tools: list[str], reason: str, category: Category = Category.HARNESS, label: str = "student") -> list[TestResult]:
    return [
        TestResult(name=f"{SUITE}.{t}", status=Status.NOT_RUN, kind="correctness", binary=label, category=category,
                   message=reason)
        for t in tools
    ]


def apply_points(lab: Lab, result: LabResult, tests: list[TestResult]) -> None:
    """After score_lab: a finding in a kernel a task owns ([[task]] kernels) costs that task [sanitizer]
    cost (default 1: every point) of its correctness points; [sanitizer] points, if any, are a task of
    their own, shared by the tools that ran."""
    charge_findings(lab, result, tests)
    points = float(lab.sanitizer.get("points", 0) or 0)
    if points <= 0 or not tests:
        return
    ran = [t for t in tests if t.status in (Status.PASSED, Status.FAILED)]
    passed = sum(t.status is Status.PASSED for t in ran)
    earned = round(points * passed / len(tests), 4) if tests else 0.0
    task = TaskScore(id=TASK_ID, title="compute-sanitizer: " + ", ".join(t.name.split(".", 1)[1] for t in tests),
                     points=points, earned=earned, tests_passed=passed, tests_total=len(tests))
    if len(ran) < len(tests):
        task.notes.append(f"{len(tests) - len(ran)} sanitizer tool(s) did not run")
    for t in tests:
        t.task = TASK_ID
    result.tasks.append(task)
    result.max_score = round(result.max_score + points, 4)
    result.score = round(result.score + earned, 4)


def charge_findings(lab: Lab, result: LabResult, tests: list[TestResult]) -> None:
    """Take from each task whose kernel a tool found an error in its share of [sanitizer] cost."""
    cost = min(1.0, max(0.0, float(lab.sanitizer.get("cost", 1.0))))
    charged: dict[str, list[str]] = {}  # task id -> "memcheck in kernel_name"
    for t in tests:
        if t.status is not Status.FAILED:
            continue
        for kernel in filter(None, t.properties.get("sanitizer_kernels", "").split(",")):
            task = lab.task_for_kernel(kernel)
            if task is not None:
                charged.setdefault(task.id, []).append(f"{t.name.split('.', 1)[1]} in {kernel}")
                t.task = t.task or task.id
    for score in result.tasks:
        found = charged.get(score.id)
        if not found or cost <= 0:
            continue
        spec = lab.task(score.id)
        taken = round(min(score.earned, cost * (spec.points if spec else score.points)), 4)
        score.earned = round(score.earned - taken, 4)
        result.score = round(max(0.0, result.score - taken), 4)
        score.notes.append(f"compute-sanitizer found an error ({'; '.join(sorted(set(found)))}): "
                           f"{taken:g} point(s) taken, since a race or an out-of-bounds access is a bug "
                           "even when the answer came out right")
