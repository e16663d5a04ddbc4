"""Run GoogleTest binaries in isolation and turn their JSON output into TestResults.

One run of a binary writes its JSON to a fresh temporary directory (a path the student's code cannot
predict). Tests the run should have reported but did not (a crash, a hang, an exit before the tests)
are re-run one per process, so the crash or the timeout is blamed on the test that caused it. A
sticky CUDA error (after an illegal address every later CUDA call in the process fails) is handled
the same way: tests that failed with a CUDA error after the first are re-run alone.

A results file is believed only if it looks like GoogleTest's own (verify_report): its counts agree
with its entries and it carries the properties the harness's environment records. Each run is
confined by a RunPolicy: resource limits, an optional sandbox, and the grade's deadline. After a run
that crashed, hung or hit a CUDA error, an on_fault callback (the GPU health probe) decides whether
the next run may start.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import process
from .results import Category, Perf, PerfSeries, Status, TestResult
from .text import MESSAGE_LIMIT, tail_lines, truncate

LIST_TIMEOUT_S = 60.0
MAX_CONSECUTIVE_TIMEOUTS = 3
# A parameterized test that timed out this often is not re-run with its other parameters (its group is
# 'Suite.Test', the name up to the first '/'); the other tests still run.
GROUP_TIMEOUTS = 2
REPORT_LIMIT_BYTES = 64 << 20

# Keys of a gtest JSON test object; any other key is a property the test recorded.
_TEST_KEYS = {
    "name", "value_param", "type_param", "file", "line", "status", "result", "timestamp", "time",
    "classname", "failures", "skipped",
}
# Keys of the JSON root; any other key is a property recorded by an environment (gpu_*, ...).
_ROOT_KEYS = {"tests", "failures", "disabled", "errors", "timestamp", "time", "name", "testsuites"}

_CUDA_ERROR = re.compile(r"CUDA error cudaError\w+|cudaError[A-Z]\w*")
NO_GPU_SKIP = re.compile(r"^no CUDA device\b")
# Root properties that cudalab::CudaEnvironment always records: a results file without them was not
# written by the harness (common/include/cudalab/gtest_cuda.hpp).
HARNESS_PROPERTIES = ("gpu_name",)
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


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def verify_report(data: Any) -> None:
    """Raise GtestError unless data looks written by GoogleTest under the cudalab harness: the root's
    and each suite's test counts match their entries, the failure count matches the failed entries,
    and the environment's properties are present. A file forged by the code under test fails this."""
    if not isinstance(data, dict) or not isinstance(data.get("testsuites"), list):
        raise GtestError("not a GoogleTest JSON report (no 'testsuites' list)")
    entries = 0
    failed = 0
    for suite in data["testsuites"]:
        if not isinstance(suite, dict) or not isinstance(suite.get("testsuite", []), list):
            raise GtestError("a test suite entry is not an object")
        tests = suite.get("testsuite", [])
        if "tests" in suite and _int(suite["tests"]) != len(tests):
            raise GtestError(f"suite {suite.get('name', '?')!r} claims {suite['tests']} tests but lists {len(tests)}")
        if str(suite.get("name", "")) in ("", "NonTestSuiteFailure"):
            continue  # gtest's entry for failures outside any test: not counted in the root's figures
        entries += len(tests)
        failed += sum(1 for t in tests if isinstance(t, dict) and t.get("failures"))
    if _int(data.get("tests")) != entries:
        raise GtestError(f"the report claims {data.get('tests')!r} tests but lists {entries}")
    if _int(data.get("failures")) != failed:
        raise GtestError(f"the report claims {data.get('failures')!r} failed tests but lists {failed}")
    missing = [k for k in HARNESS_PROPERTIES if k not in data]
    if missing:
        raise GtestError(f"the report lacks the harness's properties ({', '.join(missing)})")


def load_report(path: Path, binary: str = "student", verify: bool = False) -> ParsedRun:
    """Read and parse a gtest JSON file. Raises GtestError when it is missing, truncated or corrupt
    (and, with verify, when it does not look written by the harness)."""
    try:
        if path.stat().st_size > REPORT_LIMIT_BYTES:
            raise GtestError(f"the results file is larger than {REPORT_LIMIT_BYTES >> 20} MiB")
        data = json.loads(path.read_text(errors="replace"))
    except FileNotFoundError:
        raise GtestError("the test binary wrote no results file") from None
    except (json.JSONDecodeError, OSError, RecursionError) as err:
        raise GtestError(f"the results file is unreadable ({err})") from None
    if verify:
        try:
            verify_report(data)
        except GtestError as err:
            raise GtestError(f"the results file was not written by the test harness: {err}") from None
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


@dataclass
class RunPolicy:
    """How each run of a test binary is confined.

    limits: setrlimit()s of the process. sandbox: given the run's private directory (the only one it
    may write), the command line to put in front of the binary (grader/sandbox.py: bubblewrap), or
    None. deadline: time.monotonic() after which no run starts (the grade's global cap); a run's
    timeout is cut to what is left. verify: believe only results files that pass verify_report."""

    limits: process.Limits = field(default_factory=process.Limits)
    sandbox: Callable[[Path], list[str]] | None = None
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

    def cap_message(self) -> str:
        cap = f" ({self.cap_s:g} s)" if self.cap_s else ""
        return f"the grade reached its global time limit{cap} before this test could run"


DEFAULT_POLICY = RunPolicy()


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
    policy: RunPolicy | None = None,
) -> Attempt:
    """One process of the binary. Its results go to a fresh private directory under a random name
    (results-<random>.json), which the code under test cannot predict."""
    policy = policy or DEFAULT_POLICY
    workdir = Path(tempfile.mkdtemp(prefix="cudalab-gtest-"))
    try:
        out = workdir / f"results-{os.urandom(8).hex()}.json"
        argv: list[str | Path] = [binary, f"--gtest_output=json:{out}", "--gtest_color=no"]
        if gtest_filter:
            argv.append(f"--gtest_filter={gtest_filter}")
        wrapper = policy.sandbox(workdir) if policy.sandbox else []
        proc = process.run(argv, policy.timeout(timeout_s), env=test_env(env), cwd=workdir,
                           limits=policy.limits, wrapper=wrapper)
        try:
            return Attempt(proc, load_report(out, label, verify=policy.verify))
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


def _not_run(name: str, label: str, category: Category, message: str) -> TestResult:
    return TestResult(
        name=name,
        status=Status.NOT_RUN,
        kind="perf" if is_perf_suite(name.split(".", 1)[0]) else "correctness",
        binary=label,
        category=category,
        message=message,
    )


def faulted(attempt: Attempt, name: str | None = None) -> bool:
    """Whether a process ended in a way that may have left the GPU in a bad state: killed, hung,
    no usable results, or (for name, or any test) a CUDA error."""
    proc = attempt.proc
    if proc.timed_out or proc.signal or attempt.parsed is None:
        return True
    return any(t.category is Category.CUDA_ERROR for t in attempt.parsed.tests if name is None or t.name == name)


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
    policy: RunPolicy | None = None,
    on_fault: Callable[[str], str | None] | None = None,
) -> BinaryRun:
    """Run a test binary once, then re-run alone each expected test that it did not report.

    expected: the tests the binary must report (from the instructor-owned build); tests outside it are
    dropped. None: whatever the binary reports, and on a crash whatever --gtest_list_tests says.
    policy: limits, sandbox, deadline and results-file checks of every run (default: limits only).
    on_fault(what): called after a run that crashed, hung or hit a CUDA error, before the next run;
    it returns None when the next run may go ahead, or why not (the GPU no longer works): then the
    tests still to run are reported not run with that reason.
    """
    policy = policy or DEFAULT_POLICY
    notes: list[str] = []
    if policy.expired():
        names = expected if expected is not None else []
        wanted = [n for n in names if filter_matches(n, gtest_filter)]
        notes.append(f"{binary.name}: not run (the grade reached its global time limit)")
        return BinaryRun(
            tests=[_not_run(n, label, Category.TIMEOUT, policy.cap_message()) for n in wanted],
            properties={}, notes=notes,
        )
    first = run_once(binary, timeout_s, gtest_filter, env, label, policy)
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
        notes.append(f"{binary.name}: the run did not finish within {policy.timeout(timeout_s):g} s; its tests were re-run one by one")
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
    group_timeouts: dict[str, int] = {}
    unhealthy: str | None = None
    if to_rerun and on_fault is not None and faulted(first):
        unhealthy = on_fault(f"the full run of {binary.name}")
    for i, name in enumerate(to_rerun):
        stop: tuple[Category, str] | None = None
        if unhealthy:
            stop = (Category.HARNESS, unhealthy)
            notes.append(f"{binary.name}: {unhealthy}; {len(to_rerun) - i} test(s) not re-run")
        elif policy.expired():
            stop = (Category.TIMEOUT, policy.cap_message())
            notes.append(f"{binary.name}: the grade reached its global time limit; {len(to_rerun) - i} test(s) not re-run")
        elif timeouts_in_row >= max_consecutive_timeouts:
            stop = (
                Category.TIMEOUT,
                f"{max_consecutive_timeouts} tests in a row timed out, so the remaining tests of this binary were not run",
            )
            notes.append(f"{binary.name}: stopped re-running after {max_consecutive_timeouts} timeouts in a row")
        if stop is not None:
            for rest in to_rerun[i:]:
                if rest in missing:
                    results[rest] = _not_run(rest, label, *stop)
            break
        group = name.split("/", 1)[0]
        if group_timeouts.get(group, 0) >= GROUP_TIMEOUTS:
            if name in missing:
                results[name] = _not_run(
                    name, label, Category.TIMEOUT,
                    f"not re-run: {GROUP_TIMEOUTS} runs of {group} with other parameters timed out",
                )
            continue
        if on_rerun:
            on_rerun(name)
        limit = policy.timeout(timeout_s)
        attempt = run_once(binary, timeout_s, _escape_filter(name), env, label, policy)
        reran.append(name)
        if not props and attempt.parsed:
            props = dict(attempt.parsed.properties)
        alone = next((t for t in attempt.parsed.tests if t.name == name), None) if attempt.parsed else None
        if alone is not None:
            results[name] = alone
        elif attempt.proc.timed_out and limit < timeout_s:
            results[name] = _not_run(name, label, Category.TIMEOUT, policy.cap_message())
        elif name in missing or attempt.proc.signal or attempt.proc.timed_out:
            results[name] = _process_failure(name, attempt, label, limit)
        timeouts_in_row = timeouts_in_row + 1 if attempt.proc.timed_out else 0
        if attempt.proc.timed_out:
            group_timeouts[group] = group_timeouts.get(group, 0) + 1
        if on_fault is not None and i + 1 < len(to_rerun) and faulted(attempt, name):
            unhealthy = on_fault(name)

    tests = [results[n] for n in wanted if n in results]
    output = first.proc.output
    return BinaryRun(tests=tests, properties=props, reran=reran, notes=notes, output=truncate(output))


def _escape_filter(name: str) -> str:
    """A --gtest_filter that selects exactly this test (':' and '-' are filter syntax; '*' '?' globs)."""
    return "".join("?" if c in ":-*?" else c for c in name)
