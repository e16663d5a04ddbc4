"""GoogleTest's JSON report, read into TestResults (running the binaries is grader/execute/runs.py).

A report is believed only if it looks like GoogleTest's own (verify_report): its counts agree with its
entries, it carries the properties the harness's environment records, and (check_expected) the run it
describes is the run the grader started: the nonce it was given, the small mode and the sanitizer it
asked for.
"""

from __future__ import annotations

import fnmatch
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grader.model.results import Category, Perf, PerfSeries, Status, TestResult, is_perf_suite
from grader.model.text import MESSAGE_LIMIT, truncate

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
# A test this GPU cannot hold at all (CUDALAB_SKIP_UNLESS_GPU_MEMORY): left out of the grade, and said.
GPU_TOO_SMALL_SKIP = re.compile(r"^GPU too small\b")


class GtestError(Exception):
    """A binary's output could not be used (for listing tests)."""


# --- parsing --------------------------------------------------------------------------------------


@dataclass
class ParsedRun:
    tests: list[TestResult] = field(default_factory=list)
    properties: dict[str, str] = field(default_factory=dict)  # the root's: gpu_name, cuda_*_version, ...


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
            tail_ms=_float(props, f"{n}.tail_ms"),
            calls=int(_float(props, f"{n}.calls")),
            verified=int(_float(props, f"{n}.verified", -1.0)),
        )
        for n in names
    ]
    floor = _float(props, "perf_floor_ms", 0.0)
    physical = _float(props, "perf_physical_floor_ms", 0.0)
    return Perf(
        metric=props.get("perf_metric", "ms"),
        work=_float(props, "perf_work"),
        variants=variants,
        baseline=props.get("perf_baseline") or None,
        label=props.get("perf_label", ""),
        floor_ms=floor if floor > 0 else None,
        physical_floor_ms=physical if physical > 0 else None,
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


@dataclass(frozen=True)
class Expected:
    """What the grader asked of one run; a report that says otherwise was not written by that run."""

    nonce: str
    small_mode: bool = False
    sanitizer: bool = False

    def problems(self, data: dict[str, Any]) -> list[str]:
        said = {k: str(data.get(k, "")) for k in ("run_nonce", "small_mode", "sanitizer_attached")}
        out = []
        if said["run_nonce"] != self.nonce:
            out.append("it does not carry this run's nonce")
        if said["small_mode"] != ("true" if self.small_mode else "false"):
            out.append(f"it ran with small_mode={said['small_mode'] or '?'}, but the grader asked for "
                       f"{'true' if self.small_mode else 'false'}")
        if said["sanitizer_attached"] != ("true" if self.sanitizer else "false"):
            out.append(f"compute-sanitizer {'was not' if self.sanitizer else 'was'} attached, "
                       f"but the grader {'ran it under' if self.sanitizer else 'did not ask for'} the tool")
        return out


def decode_report(text: str, binary: str = "student", verify: bool = False, expected: Expected | None = None) -> ParsedRun:
    """Parse a report's text. Raises GtestError when it is truncated or corrupt (and, with verify, when it
    does not look written by the harness, or by the run `expected` describes)."""
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as err:
        raise GtestError(f"the results are unreadable ({err})") from None
    if verify:
        try:
            verify_report(data)
            if expected is not None:
                problems = expected.problems(data)
                if problems:
                    raise GtestError("; ".join(problems))
        except GtestError as err:
            raise GtestError(f"the results were not written by the test harness for this run: {err}") from None
    return parse_report(data, binary)


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
