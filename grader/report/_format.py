"""Formatting shared by every renderer: safe text, numbers, statuses, GPU facts, perf rows.

Nothing here writes files; the renderers (console, html, junit, gradescope, gradebook) all read
the same few helpers so a number or a label reads the same in every report.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from grader.model.results import Category, CheckpointScore, LabResult, Perf, PerfSeries, RunInfo, Status, TestResult
from grader.model.text import shorten

# ANSI escape sequences (colored compiler output) are dropped; other control characters,
# lone surrogates and the two non-characters are made visible as \xNN / \uNNNN, because they are
# invalid in XML and parse errors in HTML.
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")


def clean_text(value: Any) -> str:
    """Text safe to put into HTML, XML, JSON or CSV (escaping for the format is still the writer's job)."""
    s = "" if value is None else str(value)
    s = _ANSI.sub("", s).replace("\r\n", "\n").replace("\r", "\n")

    def visible(m: re.Match[str]) -> str:
        code = ord(m.group())
        return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"

    return _CONTROL.sub(visible, s)


def truncate(text: str, limit: int, note: str = "… ({n} more characters)") -> str:
    if len(text) <= limit:
        return text
    return text[:limit].rstrip() + "\n" + note.format(n=len(text) - limit)


def first_line(text: str, limit: int = 160) -> str:
    """The first non-empty line, cut between words to at most limit characters."""
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return shorten(line, limit)


def labelled(label: str, message: str) -> str:
    """'label: message', without saying the label twice when the message starts with it already."""
    if not label:
        return message
    if not message:
        return label
    if message.casefold().startswith(label.casefold()):
        return message
    return f"{label}: {message}"


# Notes on how the grader itself ran (isolation, time limit): kept for the curious, never in the way.
GRADER_INTERNALS = ("confinement:", "sandbox:", "global time limit of this grade")


def split_notes(notes: list[str]) -> tuple[list[str], list[str]]:
    """(what the student should read, the grader's own setup)."""
    setup = [n for n in notes if n.startswith(GRADER_INTERNALS)]
    return [n for n in notes if n not in setup], setup


def fmt_commit(commit: str, digits: int = 12) -> str:
    """A commit as reports show it: the hash cut to `digits`, a suffix ("+dirty") always kept."""
    text = clean_text(commit).strip()
    head, plus, rest = text.partition("+")
    return head[:digits] + (plus + rest if plus else "")


# --- statuses and categories ----------------------------------------------------------------------

STATUS_LABEL = {
    Status.PASSED: "passed",
    Status.FAILED: "failed",
    Status.SKIPPED: "skipped",
    Status.NOT_RUN: "not run",
}
STATUS_MARK = {Status.PASSED: "✓", Status.FAILED: "✗", Status.SKIPPED: "↷", Status.NOT_RUN: "○"}

CATEGORY_LABEL = {
    Category.COMPILE_ERROR: "compile error",
    Category.LINK_ERROR: "link error",
    Category.FORBIDDEN_CALL: "forbidden call",
    Category.TECHNIQUE_MISSING: "technique missing",
    Category.WRONG_ANSWER: "wrong answer",
    Category.CUDA_ERROR: "CUDA error",
    Category.CRASH: "crash",
    Category.TIMEOUT: "timeout",
    Category.SANITIZER: "sanitizer finding",
    Category.NO_GPU: "no GPU",
    Category.HARNESS: "harness problem",
}


def category_label(category: Category | None) -> str:
    return CATEGORY_LABEL.get(category, category.value) if category is not None else ""


# --- numbers ---------------------------------------------------------------------------------------


def fmt_num(value: float | None, digits: int = 3) -> str:
    """About `digits` significant digits, thousands separated: 3,012 · 812 · 45.3 · 0.927."""
    if value is None or not math.isfinite(value):
        return "–"
    if value == 0:
        return "0"
    magnitude = math.floor(math.log10(abs(value)))
    decimals = max(0, digits - 1 - magnitude)
    return f"{value:,.{decimals}f}"


def fmt_points(value: float) -> str:
    """Points as a grader shows them: 20 · 9.5 · 7.33."""
    if abs(value - round(value)) < 1e-9:
        return str(int(round(value)))
    return f"{value:.2f}".rstrip("0").rstrip(".")


def fmt_ratio(value: float | None) -> str:
    return "–" if value is None or not math.isfinite(value) else f"{value:.2f}×"


def fmt_seconds(value: float) -> str:
    if value <= 0:
        return ""
    if value < 1:
        return f"{value * 1000:.0f} ms"
    if value < 120:
        return f"{value:.1f} s"
    return f"{value / 60:.1f} min"


def percent(part: float, whole: float) -> float:
    """0..100, for bars."""
    if whole <= 0:
        return 0.0
    return max(0.0, min(100.0, 100.0 * part / whole))


def parse_time(value: str) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def fmt_date(value: str) -> str:
    when = parse_time(value)
    if when is None:
        return clean_text(value)
    text = when.strftime("%Y-%m-%d %H:%M")
    if when.utcoffset() is not None:
        offset = when.utcoffset()
        text += " UTC" if offset is not None and offset.total_seconds() == 0 else when.strftime(" %z")
    return text


def elapsed_seconds(run: RunInfo) -> float | None:
    start, end = parse_time(run.started), parse_time(run.finished)
    if start is None or end is None:
        return None
    try:
        return max(0.0, (end - start).total_seconds())
    except TypeError:  # one naive, one aware
        return None


# --- names -----------------------------------------------------------------------------------------


def lab_id(lab: LabResult) -> str:
    return f"lab{lab.number:02d}"


def split_test_name(name: str) -> tuple[str, str]:
    """'Suite.Test/param' -> ('Suite', 'Test/param'); a name without a suite -> ('', name)."""
    suite, dot, rest = name.partition(".")
    return (suite, rest) if dot and suite and rest else ("", name)


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "-", text).strip("-") or "x"


# --- GPU -------------------------------------------------------------------------------------------

_GPU_KEYS: dict[str, tuple[str, ...]] = {
    "name": ("gpu_name", "name"),
    "cc": ("gpu_compute_capability", "compute_capability", "cc"),
    "sms": ("gpu_sm_count", "sm_count", "sms"),
    "clock": ("gpu_sm_clock_mhz", "sm_clock_mhz", "clock_mhz"),
    "memory": ("gpu_memory_mib", "memory_mib"),
    "dram": ("gpu_dram_peak_gbps", "dram_peak_gbps"),
    "l2": ("gpu_l2_bytes", "l2_bytes"),
    "driver": ("cuda_driver_version", "gpu_driver_version", "driver_version", "driver"),
    "runtime": ("cuda_runtime_version", "gpu_runtime_version", "runtime_version", "runtime"),
}


def _cuda_version(value: str) -> str:
    """cudaRuntimeGetVersion's 13000 -> '13.0'; anything already dotted is kept."""
    if value.isdigit() and len(value) >= 4:
        v = int(value)
        return f"{v // 1000}.{(v % 1000) // 10}"
    return value


def gpu_facts(run: RunInfo) -> list[tuple[str, str]]:
    """(label, value) pairs for the GPU line, in a fixed order; only what is known."""
    g = {k: clean_text(v) for k, v in run.gpu.items()}

    def get(key: str) -> str:
        return next((g[k] for k in _GPU_KEYS[key] if g.get(k) not in (None, "")), "")

    facts: list[tuple[str, str]] = []
    name = get("name")
    if name and name != "none":
        facts.append(("GPU", name))
    if index := g.get("gpu_index"):  # a batch on several GPUs (--gpus): which one ran this grade
        facts.append(("GPU index", index + (f" ({g['gpu_uuid']})" if g.get("gpu_uuid") else "")))
    if cc := get("cc"):
        facts.append(("compute capability", cc + (f" (sm_{cc.replace('.', '')})" if "." in cc else "")))
    if sms := get("sms"):
        facts.append(("SMs", sms))
    if clock := get("clock"):
        facts.append(("SM clock", f"{clock} MHz"))
    if mem := get("memory"):
        facts.append(("memory", f"{fmt_num(int(mem) / 1024, 3)} GiB" if mem.isdigit() else mem))
    if dram := get("dram"):
        facts.append(("DRAM peak", f"{dram} GB/s"))
    if driver := get("driver"):
        facts.append(("driver (CUDA)", _cuda_version(driver)))
    if runtime := get("runtime"):
        facts.append(("runtime", _cuda_version(runtime)))
    return facts


def gpu_name(run: RunInfo) -> str:
    facts = dict(gpu_facts(run))
    return facts.get("GPU", "")


def gpu_device(run: RunInfo) -> str:
    """'GPU 2 (NVIDIA H100)' for a grade pinned to one GPU of several (batch --gpus); else ''."""
    index = clean_text(run.gpu.get("gpu_index", ""))
    if not index:
        return ""
    name = gpu_name(run)
    return f"GPU {index}" + (f" ({name})" if name else "")


def gpu_line(run: RunInfo) -> str:
    """One line: 'NVIDIA H100 · sm_90 · 132 SMs · 1980 MHz · driver 13.0 · runtime 13.0', or why none."""
    if not run.gpu_available:
        reason = clean_text(run.gpu_reason) or "no CUDA device"
        return f"none ({reason}); tests that need a GPU could not run"
    facts = dict(gpu_facts(run))
    parts = [facts.get("GPU", "unknown GPU")]
    if cc := run.gpu.get("gpu_compute_capability") or run.gpu.get("compute_capability"):
        parts.append(f"sm_{clean_text(cc).replace('.', '')}")
    if "SMs" in facts:
        parts.append(f"{facts['SMs']} SMs")
    if "SM clock" in facts:
        parts.append(facts["SM clock"])
    if "driver (CUDA)" in facts:
        parts.append(f"driver {facts['driver (CUDA)']}")
    if "runtime" in facts:
        parts.append(f"runtime {facts['runtime']}")
    return " · ".join(parts)


# --- perf ------------------------------------------------------------------------------------------


def lower_is_better(perf: Perf) -> bool:
    return perf.metric == "ms" or perf.work <= 0


def unit(perf: Perf) -> str:
    return "ms" if lower_is_better(perf) else perf.metric


def floor_value(perf: Perf) -> float | None:
    """The floor in the chart's unit: a rate ceiling (work / floor time), or the time for 'ms'."""
    if perf.floor_ms is None or perf.floor_ms <= 0:
        return None
    return perf.rate(PerfSeries("floor", perf.floor_ms))


@dataclass
class PerfRow:
    label: str  # what the chart's row says
    kind: str  # "impl", "reference", "baseline", "variant"
    series: PerfSeries
    value: float | None  # in the chart's unit


def perf_rows(perf: Perf, mode: str = "student") -> list[PerfRow]:
    """The rows of one perf test's chart: the impl, the reference, the baseline library, the rest."""
    rows: list[PerfRow] = []
    impl = perf.impl
    if impl is not None:
        rows.append(
            PerfRow("you (impl)" if mode != "solution" else "impl (solution)", "impl", impl, perf.rate(impl))
        )
    if perf.reference is not None and mode != "solution":
        rows.append(PerfRow("reference", "reference", perf.reference, perf.rate(perf.reference)))
    base = perf.series(perf.baseline) if perf.baseline else None
    if base is not None:
        rows.append(PerfRow(f"{base.name} (library)", "baseline", base, perf.rate(base)))
    for v in perf.variants:
        if v is impl or v is base:
            continue
        rows.append(PerfRow(v.name, "variant", v, perf.rate(v)))
    return rows


def perf_summary(perf: Perf) -> str:
    """'3,012 GB/s · 0.97× reference · 1.01× thrust' — for one-line places (console, JUnit, Gradescope)."""
    parts = []
    value = perf.rate(perf.impl)
    if value is not None:
        parts.append(f"{fmt_num(value)} {unit(perf)}")
    if (r := perf.ratio_to_reference) is not None:
        parts.append(f"{fmt_ratio(r)} reference")
    if (r := perf.ratio_to_baseline) is not None:
        parts.append(f"{fmt_ratio(r)} {perf.baseline}")
    return " · ".join(parts)


def is_perf(test: TestResult) -> bool:
    return test.kind == "perf" or test.perf is not None


STEP_MARKS = {"passed": "✓", "failed": "✗", "not run": "–"}


def step_parts(step: CheckpointScore) -> tuple[str, str]:
    """A task's step as the console and the HTML say it: its mark and title ("✗ two levels"), and its counts
    unless it passed ("0/3", "1/3, the rest not run", "none ran")."""
    head = f"{STEP_MARKS[step.state]} {step.title}"
    if step.ok:
        return head, ""
    if not step.total:
        return head, "none ran"
    return head, f"{step.passed}/{step.total}" + (", the rest not run" if step.state == "not run" else "")


def step_text(step: CheckpointScore) -> str:
    head, counts = step_parts(step)
    return f"{head} ({counts})" if counts else head
