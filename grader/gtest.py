"""Run GoogleTest binaries in isolation and turn their JSON output into TestResults.

One run of a binary writes its JSON to a fresh temporary directory (a path the student's code cannot
predict). Tests the run should have reported but did not (a crash, a hang, an exit before the tests)
are re-run one per process, so the crash or the timeout is blamed on the test that caused it. A
sticky CUDA error (after an illegal address every later CUDA call in the process fails) is handled
the same way: tests that failed with a CUDA error after the first are re-run alone.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from . import process
from .results import Category, Perf, PerfSeries, Status, TestResult
from .text import MESSAGE_LIMIT, tail_lines, truncate

LIST_TIMEOUT_S = 60.0
MAX_CONSECUTIVE_TIMEOUTS = 3

# Keys of a gtest JSON test object; any other key is a property the test recorded.
_TEST_KEYS = {
    "name", "value_param", "type_param", "file", "line", "status", "result", "timestamp", "time",
    "classname", "failures", "skipped",
}
# Keys of the JSON root; any other key is a property recorded by an environment (gpu_*, ...).
_ROOT_KEYS = {"tests", "failures", "disabled", "errors", "timestamp", "time", "name", "testsuites"}

_CUDA_ERROR = re.compile(r"CUDA error cudaError\w+|cudaError[A-Z]\w*")
NO_GPU_SKIP = re.compile(r"^no CUDA device\b")
SMALL_MODE_SKIP = re.compile(r"^small mode\b")


class GtestError(Exception):
    """A binary's output could not be used (for listing tests)."""


# --- parsing --------------------------------------------------------------------------------------


@dataclass
class ParsedRun:
    tests: list[TestResult] = field(default_factory=list)
    properties: dict[str, str] = field(default_factory=dict)  # the root's: gpu_name, cuda_*_version, ...


def is_perf_suite(suite: str) -> bool:
    """Suites named ...Perf hold perf tests. 'Prefix/ReducePerf' and typed 'ReducePerf/0' count too."""
    parts = [p for p in suite.split("/") if not p.isdigit()]
    return bool(parts) and parts[-1].endswith("Perf")


def _seconds(value: Any) -> float:
    try:
        return float(str(value).rstrip("s"))
    except ValueError:
        return 0.0


def _float(props: Mapping[str, str], key: str, default: float = 0.0) -> float:
    try:
        return float(props[key])
    except (KeyError, ValueError):
        return default


def perf_from_properties(props: Mapping[str, str]) -> Perf | None:
    """The Perf a bench::Suite recorded (docs/authoring-a-lab.md), or None when it recorded nothing."""
    names = [n.strip() for n in props.get("perf_variants", "").split(",") if n.strip()]
    if not names:
        return None
    variants = [
        PerfSeries(
            name=n,
            median_ms=_float(props, f"{n}.median_ms"),
            min_ms=_float(props, f"{n}.min_ms"),
            mean_ms=_float(props, f"{n}.mean_ms"),
            noise_pct=_float(props, f"{n}.noise_pct"),
            samples=int(_float(props, f"{n}.samples")),
        )
        for n in names
    ]
    floor = _float(props, "perf_floor_ms", 0.0)
    return Perf(
        metric=props.get("perf_metric", "ms"),
        work=_float(props, "perf_work"),
        variants=variants,
        baseline=props.get("perf_baseline") or None,
        label=props.get("perf_label", ""),
        floor_ms=floor if floor > 0 else None,
    )


def categorize_failure(message: str) -> Category:
    return Category.CUDA_ERROR if _CUDA_ERROR.search(message) else Category.WRONG_ANSWER


def cuda_error_name(message: str) -> str | None:
    m = re.search(r"cudaError[A-Z]\w*", message)
    return m.group(0) if m else None


_LOCATION = re.compile(r"unknown file|(?P<file>\S.*):(?P<line>\d+)")


def clean_failure(text: str) -> str:
    """A gtest failure starts with a 'path:line' (or 'unknown file') line: move it to the end, shortened,
    so the first line of a message says what went wrong."""
    lines = text.strip().splitlines()
    if len(lines) < 2:
        return text.strip()
    loc = _LOCATION.fullmatch(lines[0].strip())
    if loc is None:
        return text.strip()
    body = "\n".join(lines[1:]).strip()
    if loc.group("file"):
        body += f"\n(at {Path(loc.group('file')).name}:{loc.group('line')})"
    return body


def _test_result(suite: str, test: dict[str, Any], binary: str) -> TestResult | None:
    if test.get("status") == "NOTRUN":  # DISABLED_ tests: not part of what a lab reports
        return None
    name = f"{suite}.{test.get('name', '?')}"
    props = {k: str(v) for k, v in test.items() if k not in _TEST_KEYS}
    failures = [clean_failure(str(f.get("failure", ""))) for f in test.get("failures", []) if isinstance(f, dict)]
    result = str(test.get("result", "COMPLETED")).upper()
    tr = TestResult(
        name=name,
        status=Status.PASSED,
        kind="perf" if is_perf_suite(suite) else "correctness",
        binary=binary,
        duration_s=_seconds(test.get("time", 0)),
        properties=props,
        perf=perf_from_properties(props),
    )
    if failures:
        tr.status = Status.FAILED
        tr.message = truncate("\n\n".join(failures), MESSAGE_LIMIT)
        tr.category = categorize_failure(tr.message)
    elif result == "SKIPPED":
        tr.status = Status.SKIPPED
        skipped = test.get("skipped")  # newer gtest versions keep the message here
        reason = props.get("skip_reason") or (
            str(skipped[0].get("message", "")).strip() if isinstance(skipped, list) and skipped else ""
        )
        tr.message = reason or "skipped"
        if NO_GPU_SKIP.match(tr.message):
            tr.category = Category.NO_GPU
    elif result == "SUPPRESSED":
        tr.status = Status.NOT_RUN
        tr.message = "not run (suppressed by GoogleTest)"
        tr.category = Category.HARNESS
    return tr


def parse_report(data: Any, binary: str = "student") -> ParsedRun:
    """Parse gtest's JSON (already decoded). Raises GtestError when its shape is not gtest's."""
    if not isinstance(data, dict) or not isinstance(data.get("testsuites"), list):
        raise GtestError("not a GoogleTest JSON report (no 'testsuites' list)")
    run = ParsedRun(properties={k: str(v) for k, v in data.items() if k not in _ROOT_KEYS})
    for suite in data["testsuites"]:
        if not isinstance(suite, dict):
            raise GtestError("a test suite entry is not an object")
        for test in suite.get("testsuite", []):
            if not isinstance(test, dict):
                raise GtestError("a test entry is not an object")
            tr = _test_result(str(suite.get("name", "?")), test, binary)
            if tr is not None:
                run.tests.append(tr)
    return run


def load_report(path: Path, binary: str = "student") -> ParsedRun:
    """Read and parse a gtest JSON file. Raises GtestError when it is missing, truncated or corrupt."""
    try:
        data = json.loads(path.read_text(errors="replace"))
    except FileNotFoundError:
        raise GtestError("the test binary wrote no results file") from None
    except (json.JSONDecodeError, OSError) as err:
        raise GtestError(f"the results file is unreadable ({err})") from None
    return parse_report(data, binary)


def parse_test_list(text: str) -> list[str]:
    """Parse --gtest_list_tests output: 'Suite.' lines, then indented test names (with '# GetParam() = ...')."""
    names: list[str] = []
    suite = ""
    for line in text.splitlines():
        if not line.strip():
            continue
        if not line.startswith(" "):
            suite = line.split("#", 1)[0].strip()
            continue
        test = line.split("#", 1)[0].strip()
        if suite and test:
            names.append(f"{suite}{test}")
    return names


def filter_matches(name: str, gtest_filter: str | None) -> bool:
    """GoogleTest's --gtest_filter semantics: 'POS1:POS2-NEG1:NEG2', globs with * and ?."""
    if not gtest_filter:
        return True
    positive, _, negative = gtest_filter.partition("-")
    pos = [p for p in positive.split(":") if p] or ["*"]
    neg = [n for n in negative.split(":") if n]
    return any(fnmatch.fnmatchcase(name, p) for p in pos) and not any(fnmatch.fnmatchcase(name, n) for n in neg)


# --- running --------------------------------------------------------------------------------------


def test_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for a test binary: ours, minus GTEST_* settings that would change what runs."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GTEST_")}
    env.update(extra or {})
    return env


def list_tests(binary: Path, timeout_s: float = LIST_TIMEOUT_S, env: Mapping[str, str] | None = None) -> list[str]:
    res = process.run([binary, "--gtest_list_tests"], timeout_s, env=test_env(env))
    if res.timed_out:
        raise GtestError(f"{binary.name} --gtest_list_tests did not finish in {timeout_s:g} s")
    if res.returncode != 0:
        why = res.signal_name or f"exit code {res.returncode}"
        raise GtestError(f"{binary.name} --gtest_list_tests failed ({why}): {tail_lines(res.output, 5)}")
    return parse_test_list(res.stdout)


@dataclass
class Attempt:
    """One process: what it did and what it reported."""

    proc: process.ProcessResult
    parsed: ParsedRun | None
    report_error: str = ""
    report_missing: bool = False  # no results file at all (as opposed to an unreadable one)


def run_once(
    binary: Path,
    timeout_s: float,
    gtest_filter: str | None = None,
    env: Mapping[str, str] | None = None,
    label: str = "student",
) -> Attempt:
    workdir = Path(tempfile.mkdtemp(prefix="cudalab-gtest-"))
    try:
        out = workdir / "results.json"
        argv: list[str | Path] = [binary, f"--gtest_output=json:{out}", "--gtest_color=no"]
        if gtest_filter:
            argv.append(f"--gtest_filter={gtest_filter}")
        proc = process.run(argv, timeout_s, env=test_env(env), cwd=workdir)
        try:
            return Attempt(proc, load_report(out, label))
        except GtestError as err:
            return Attempt(proc, None, str(err), report_missing=not out.exists())
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _process_failure(name: str, attempt: Attempt, binary: str, timeout_s: float) -> TestResult:
    """A TestResult for a test whose own process ended without reporting it."""
    proc = attempt.proc
    tr = TestResult(name=name, status=Status.FAILED, binary=binary, duration_s=proc.duration_s)
    tr.kind = "perf" if is_perf_suite(name.split(".", 1)[0]) else "correctness"
    if proc.timed_out:
        tr.category = Category.TIMEOUT
        tr.message = f"the test did not finish within {timeout_s:g} s and was stopped"
    elif proc.signal:
        tr.category = Category.CRASH
        tr.message = f"the test process was killed by {proc.signal_name}"
    elif attempt.parsed is None and not attempt.report_missing:
        tr.category = Category.HARNESS
        tr.message = f"{attempt.report_error} (exit code {proc.returncode})"
    elif attempt.parsed is None and proc.returncode != 0:
        tr.category = Category.CRASH
        tr.message = f"the test process exited with code {proc.returncode} before reporting"
    elif attempt.parsed is None:
        tr.category = Category.HARNESS
        tr.message = "the test process exited normally (code 0) without writing its results"
    else:
        tr.status = Status.NOT_RUN
        tr.category = Category.HARNESS
        tr.message = "the test binary did not run this test when asked for it alone"
    output = tail_lines(proc.output)
    if output:
        tr.message += "\n\nLast output:\n" + output
    return tr


@dataclass
class BinaryRun:
    """Everything one test binary reported, after isolation re-runs."""

    tests: list[TestResult]
    properties: dict[str, str]  # root properties (gpu_*) of the first report that had them
    reran: list[str] = field(default_factory=list)  # tests that were re-run alone
    notes: list[str] = field(default_factory=list)  # what happened to the binary as a whole
    output: str = ""  # the main run's output (bounded)


def run_binary(
    binary: Path,
    expected: list[str] | None,
    timeout_s: float,
    *,
    label: str = "student",
    gtest_filter: str | None = None,
    env: Mapping[str, str] | None = None,
    max_consecutive_timeouts: int = MAX_CONSECUTIVE_TIMEOUTS,
    on_rerun: Callable[[str], None] | None = None,
) -> BinaryRun:
    """Run a test binary once, then re-run alone each expected test that it did not report.

    expected: the tests the binary must report (from the instructor-owned build); tests outside it are
    dropped. None: whatever the binary reports, and on a crash whatever --gtest_list_tests says.
    """
    first = run_once(binary, timeout_s, gtest_filter, env, label)
    notes: list[str] = []
    props = dict(first.parsed.properties) if first.parsed else {}
    reported: dict[str, TestResult] = {t.name: t for t in first.parsed.tests} if first.parsed else {}

    if expected is None:
        if first.parsed is not None:
            expected = list(reported)
        else:
            try:
                expected = list_tests(binary, env=env)
            except GtestError as err:
                notes.append(f"{binary.name}: no results and no test list: {err}")
                expected = []
    wanted = [n for n in expected if filter_matches(n, gtest_filter)]
    wanted_set = set(wanted)
    dropped = [n for n in reported if n not in wanted_set]
    if dropped:
        notes.append(
            f"{binary.name}: ignored {len(dropped)} test(s) that the instructor's build does not have: "
            + ", ".join(dropped[:5])
            + (" ..." if len(dropped) > 5 else "")
        )
    if first.proc.timed_out:
        notes.append(f"{binary.name}: the run did not finish within {timeout_s:g} s; its tests were re-run one by one")
    elif first.parsed is None:
        why = first.proc.signal_name or first.report_error or f"exit code {first.proc.returncode}"
        notes.append(f"{binary.name}: the run ended without usable results ({why}); its tests were re-run one by one")

    missing = [n for n in wanted if n not in reported]
    # Sticky CUDA errors: every CUDA-error failure after the first may be collateral damage.
    cuda_failures = [n for n in wanted if n in reported and reported[n].category is Category.CUDA_ERROR]
    rerun_set = set(missing) | set(cuda_failures[1:])
    to_rerun = [n for n in wanted if n in rerun_set]

    results = dict(reported)
    reran: list[str] = []
    timeouts_in_row = 0
    for i, name in enumerate(to_rerun):
        if timeouts_in_row >= max_consecutive_timeouts:
            for rest in to_rerun[i:]:
                if rest in missing:
                    results[rest] = TestResult(
                        name=rest,
                        status=Status.NOT_RUN,
                        kind="perf" if is_perf_suite(rest.split(".", 1)[0]) else "correctness",
                        binary=label,
                        category=Category.TIMEOUT,
                        message=(
                            f"{max_consecutive_timeouts} tests in a row timed out, "
                            "so the remaining tests of this binary were not run"
                        ),
                    )
            notes.append(f"{binary.name}: stopped re-running after {max_consecutive_timeouts} timeouts in a row")
            break
        if on_rerun:
            on_rerun(name)
        attempt = run_once(binary, timeout_s, _escape_filter(name), env, label)
        reran.append(name)
        if not props and attempt.parsed:
            props = dict(attempt.parsed.properties)
        alone = next((t for t in attempt.parsed.tests if t.name == name), None) if attempt.parsed else None
        if alone is not None:
            results[name] = alone
        elif name in missing or attempt.proc.signal or attempt.proc.timed_out:
            results[name] = _process_failure(name, attempt, label, timeout_s)
        timeouts_in_row = timeouts_in_row + 1 if attempt.proc.timed_out else 0

    tests = [results[n] for n in wanted if n in results]
    output = first.proc.output
    return BinaryRun(tests=tests, properties=props, reran=reran, notes=notes, output=truncate(output))


def _escape_filter(name: str) -> str:
    """A --gtest_filter that selects exactly this test (':' and '-' are filter syntax; '*' '?' globs)."""
    return "".join("?" if c in ":-*?" else c for c in name)
