"""Run GoogleTest binaries in isolation and turn their reports into TestResults.

Each process of a binary runs confined (grader/isolate/confine.py through grader/isolate/process.py: its own PID
namespace or a subreaper, Landlock, a host-memory limit, a deadline) in a private directory, with an
environment the grader builds from scratch. Its report reaches the grader through a pipe it opens by
path (/proc/self/fd/N), never a file it or anything it starts could rewrite later, and is believed only
when GoogleTest's counts agree and it echoes this run's nonce, small mode and sanitizer flag
(grader/execute/gtest.py). Tests the run should have reported but did not (a crash, a hang, an exit before the
tests) are re-run one per process, so the crash or the timeout is blamed on the test that caused it.
A sticky CUDA error (after an illegal address every later CUDA call in the process fails) is handled
the same way: tests that failed with a CUDA error after the first are re-run alone. After a run that
crashed, hung or hit a CUDA error, an on_fault callback (the GPU health probe) decides whether the
next run may start.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from grader.execute.policy import (  # noqa: F401 - runs.RunPolicy etc. are read from here too
    DEFAULT_HOST_MEMORY_MIB,
    DEFAULT_POLICY,
    INHERITED_ENV,
    ConfineSettings,
    RunPolicy,
    test_env,
)
from grader.isolate import process
from grader.execute.gtest import (
    Expected,
    GtestError,
    ParsedRun,
    decode_report,
    filter_matches,
    is_perf_suite,
    parse_test_list,
)
from grader.model.results import Category, Status, TestResult
from grader.model.text import tail_lines, truncate

LIST_TIMEOUT_S = 60.0
MAX_CONSECUTIVE_TIMEOUTS = 3
# A parameterized test that timed out this often is not re-run with its other parameters (its group is
# 'Suite.Test', the name up to the first '/'); the other tests still run.
GROUP_TIMEOUTS = 2


def library_dirs(binary: Path | str) -> list[Path]:
    """Where the binary's own shared libraries live (its RUNPATH): a sandboxed run must see them too.
    Read once per build of the binary; without binutils, the build's lib/ beside its bin/."""
    path = Path(binary).resolve()
    try:
        stamp = path.stat().st_mtime_ns
    except OSError:
        return []
    return list(_library_dirs(str(path), stamp))


@functools.lru_cache(maxsize=256)
def _library_dirs(path: str, stamp: int) -> tuple[Path, ...]:
    from grader.inspect.elf import ElfError, library_paths

    try:
        return tuple(library_paths(Path(path)))
    except ElfError:
        return (Path(path).parent.parent / "lib",)


def list_tests(binary: Path, timeout_s: float = LIST_TIMEOUT_S, env: Mapping[str, str] | None = None) -> list[str]:
    """--gtest_list_tests of a binary the instructor built (the reference, or the student's: listing runs
    no code of the student's file, which may have no static initializers)."""
    res = process.run([binary, "--gtest_list_tests"], timeout_s, env=test_env(env))
    if res.timed_out:
        raise GtestError(f"{binary.name} --gtest_list_tests did not finish in {timeout_s:g} s")
    if res.returncode != 0:
        why = res.signal_name or f"exit code {res.returncode}"
        raise GtestError(f"{binary.name} --gtest_list_tests failed ({why}): {tail_lines(res.output, 5)}")
    return parse_test_list(res.stdout)


@dataclass
class Launch:
    """One confined process: what it did, its report's text, and the other channels it wrote."""

    proc: process.ProcessResult
    report: bytes
    report_overflow: bool
    expected: Expected
    extra: list[bytes] = field(default_factory=list)


def launch(
    binary: Path,
    args: Sequence[str],
    timeout_s: float,
    env: Mapping[str, str] | None = None,
    policy: RunPolicy | None = None,
    *,
    small: bool = False,
    prefix: Callable[[list[process.Channel]], list[str]] | None = None,
    extra_channels: int = 0,
    exec_roots: Sequence[str] = (),
    on_line: Callable[[str], None] | None = None,
) -> Launch:
    """Run binary (after prefix, e.g. compute-sanitizer) in a private directory, its report through a
    pipe: --gtest_output=json:/proc/self/fd/N. prefix(channels) builds the command line in front of the
    binary from the extra channels it asked for (a sanitizer's log)."""
    policy = policy or DEFAULT_POLICY
    nonce = os.urandom(12).hex()
    expected = Expected(nonce, small_mode=small, sanitizer=prefix is not None)
    run_dir = policy.confine.run_dir if policy.confine is not None else None
    if run_dir:
        Path(run_dir).mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="cudalab-run-", dir=run_dir))
    report = process.Channel()
    extras = [process.Channel() for _ in range(extra_channels)]
    try:
        argv: list[str] = [*(prefix(extras) if prefix else []), str(Path(binary).resolve()),
                           f"--gtest_output=json:{report.path}", "--gtest_color=no", *args]
        grader_env = {"CUDALAB_RUN_NONCE": nonce, **({"CUDALAB_SMALL": "1"} if small else {})}
        # What the sandbox must keep visible: the binary, the tools and the grader (confine.py, Python).
        keep = [Path(binary).resolve().parent, *library_dirs(binary), *exec_roots, Path(__file__).resolve().parents[1],
                sys.prefix, sys.base_prefix]
        wrapper = policy.sandbox(workdir, keep) if policy.sandbox else []
        confine = policy.confine.for_run(workdir, binary, exec_roots) if policy.confine is not None else None
        proc = process.run(argv, policy.timeout(timeout_s), env=test_env({**(env or {}), **grader_env}, workdir),
                           cwd=workdir, limits=policy.limits, wrapper=wrapper, confine=confine,
                           channels=[report, *extras], on_line=on_line)
        return Launch(proc, report.data, report.overflow, expected, [c.data for c in extras])
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


@dataclass
class Attempt:
    """One process: what it did and what it reported."""

    proc: process.ProcessResult
    parsed: ParsedRun | None
    report_error: str = ""
    report_missing: bool = False  # no report at all (as opposed to an unreadable one)


def read_launch(run: Launch, label: str, verify: bool) -> Attempt:
    if run.report_overflow:
        return Attempt(run.proc, None, "the report is larger than the grader reads")
    if not run.report.strip():
        return Attempt(run.proc, None, "the test binary wrote no results", report_missing=True)
    try:
        return Attempt(run.proc, decode_report(run.report.decode(errors="replace"), label, verify, run.expected))
    except GtestError as err:
        return Attempt(run.proc, None, str(err))


def run_once(
    binary: Path,
    timeout_s: float,
    gtest_filter: str | None = None,
    env: Mapping[str, str] | None = None,
    label: str = "student",
    policy: RunPolicy | None = None,
    small: bool = False,
    extra_args: list[str] | None = None,
    on_line: Callable[[str], None] | None = None,
) -> Attempt:
    """One process of the binary, confined as policy says; its report read and checked."""
    policy = policy or DEFAULT_POLICY
    args = ([f"--gtest_filter={gtest_filter}"] if gtest_filter else []) + list(extra_args or [])
    return read_launch(launch(binary, args, timeout_s, env, policy, small=small, on_line=on_line), label,
                       policy.verify)


# GoogleTest's line for a test that failed, as it comes ("[  FAILED  ] ScanCorrectness.Exclusive/4097 (3 ms)").
_FAILED_LINE = re.compile(r"^\[  FAILED  \] ([A-Za-z_][\w]*\.[\w]+(?:/[\w.]+)?)")


def failure_watcher(names: Sequence[str] | None, on_failure: Callable[[str], None]) -> Callable[[str], None]:
    """A line watcher for run_once: calls on_failure(name) once for each test of names (all when None)
    that the running binary says failed. Progress only: the verdict is the report's."""
    known = set(names) if names is not None else None
    seen: set[str] = set()

    def watch(line: str) -> None:
        m = _FAILED_LINE.match(line)
        if m and m.group(1) not in seen and (known is None or m.group(1) in known):
            seen.add(m.group(1))
            on_failure(m.group(1))
    return watch


def _process_failure(name: str, attempt: Attempt, binary: str, timeout_s: float) -> TestResult:
    """A TestResult for a test whose own process ended without reporting it."""
    proc = attempt.proc
    tr = TestResult(name=name, status=Status.FAILED, binary=binary, duration_s=proc.duration_s)
    tr.kind = "perf" if is_perf_suite(name.split(".", 1)[0]) else "correctness"
    if proc.out_of_memory:
        tr.category = Category.CRASH
        mib = (proc.confinement or {}).get("peak_rss_mib", 0)
        limit = (proc.confinement or {}).get("memory_mib")
        allowed = f"the {limit:g} MiB this lab allows a run" if limit else "a run may use"
        tr.message = (f"the test was stopped: its processes held more host memory ({mib:g} MiB) than {allowed} "
                      "(a leak, or an allocation sized wrong?)")
    elif proc.timed_out:
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
    confinement: dict | None = None  # the supervisor's status line of the main run

    @property
    def peak_rss_mib(self) -> float | None:
        """The most host memory the main run's processes held (the supervisor's count; None unconfined)."""
        peak = (self.confinement or {}).get("peak_rss_mib")
        return float(peak) if isinstance(peak, (int, float)) else None


def merged(passes: list[BinaryRun]) -> BinaryRun:
    """One binary's runs under several filters (its correctness tests, then its perf tests) as one run."""
    if len(passes) == 1:
        return passes[0]
    return BinaryRun(
        tests=[t for p in passes for t in p.tests],
        properties=next((p.properties for p in passes if p.properties), {}),
        reran=[n for p in passes for n in p.reran],
        notes=[n for p in passes for n in p.notes],
        output="\n".join(p.output for p in passes if p.output),
        confinement=max((p.confinement for p in passes if p.confinement),
                        key=lambda c: c.get("peak_rss_mib") or 0, default=None),  # the run that held the most
    )


def not_run_test(name: str, label: str, category: Category, message: str) -> TestResult:
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
    small: bool = False,
    stop_at_first_failure: bool = False,
    on_failure: Callable[[str], None] | None = None,
) -> BinaryRun:
    """Run a test binary once, then re-run alone each expected test that it did not report.

    stop_at_first_failure (the mutation gate, where one lost point decides): the run stops at its first
    failing test (--gtest_fail_fast), and once a test failed or the run crashed or hung, the tests it did
    not report are not re-run but reported not run.

    expected: the tests the binary must report (from the instructor-owned build); tests outside it are
    dropped. None: whatever the binary reports, and on a crash whatever --gtest_list_tests says.
    policy: limits, sandbox, deadline and results-file checks of every run (default: limits only).
    on_fault(what): called after a run that crashed, hung or hit a CUDA error, before the next run;
    it returns None when the next run may go ahead, or why not (the GPU no longer works): then the
    tests still to run are reported not run with that reason.
    on_failure(name): a test failed, said as the binary prints it, before the run ends (progress only).
    """
    policy = policy or DEFAULT_POLICY
    notes: list[str] = []
    if policy.expired():
        names = expected if expected is not None else []
        wanted = [n for n in names if filter_matches(n, gtest_filter)]
        notes.append(f"{binary.name}: not run (the grade reached its global time limit)")
        return BinaryRun(
            tests=[not_run_test(n, label, Category.TIMEOUT, policy.cap_message()) for n in wanted],
            properties={}, notes=notes,
        )
    watch = failure_watcher(expected, on_failure) if on_failure is not None else None
    first = run_once(binary, timeout_s, gtest_filter, env, label, policy, small,
                     extra_args=["--gtest_fail_fast"] if stop_at_first_failure else None, on_line=watch)
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
    missing = [n for n in wanted if n not in reported]
    # The mutation gate: one failure decides, so nothing is re-run alone (and no note says it was).
    if stop_at_first_failure and (first.parsed is None or first.proc.timed_out or any(
            t.status is Status.FAILED for t in reported.values())):
        why = ("not run: the run stopped at the first failure (--gtest_fail_fast), which decides the "
               "mutation gate")
        if first.proc.timed_out:
            why = "not run: the run did not finish in time, which decides the mutation gate"
        elif first.parsed is None:
            ended = first.proc.signal_name or first.report_error or f"exit code {first.proc.returncode}"
            why = f"not run: the run ended without results ({ended}), which decides the mutation gate"
        results = {**reported, **{n: not_run_test(n, label, Category.HARNESS, why) for n in missing}}
        return BinaryRun(tests=[results[n] for n in wanted if n in results], properties=props, notes=notes,
                         output=truncate(first.proc.output), confinement=first.proc.confinement)
    if first.proc.out_of_memory:
        notes.append(f"{binary.name}: the run was stopped for using too much host memory; its tests were re-run one by one")
    elif first.proc.timed_out:
        notes.append(f"{binary.name}: the run did not finish within {policy.timeout(timeout_s):g} s; its tests were re-run one by one")
    elif first.parsed is None:
        why = first.proc.signal_name or first.report_error or f"exit code {first.proc.returncode}"
        notes.append(f"{binary.name}: the run ended without usable results ({why}); its tests were re-run one by one")

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
                    results[rest] = not_run_test(rest, label, *stop)
            break
        group = name.split("/", 1)[0]
        if group_timeouts.get(group, 0) >= GROUP_TIMEOUTS:
            if name in missing:
                results[name] = not_run_test(
                    name, label, Category.TIMEOUT,
                    f"not re-run: {GROUP_TIMEOUTS} runs of {group} with other parameters timed out",
                )
            continue
        if on_rerun:
            on_rerun(name)
        limit = policy.timeout(timeout_s)
        attempt = run_once(binary, timeout_s, _escape_filter(name), env, label, policy, small)
        reran.append(name)
        if not props and attempt.parsed:
            props = dict(attempt.parsed.properties)
        alone = next((t for t in attempt.parsed.tests if t.name == name), None) if attempt.parsed else None
        if alone is not None:
            results[name] = alone
        elif attempt.proc.timed_out and limit < timeout_s:
            results[name] = not_run_test(name, label, Category.TIMEOUT, policy.cap_message())
        elif name in missing or attempt.proc.signal or attempt.proc.timed_out:
            results[name] = _process_failure(name, attempt, label, limit)
        timeouts_in_row = timeouts_in_row + 1 if attempt.proc.timed_out else 0
        if attempt.proc.timed_out:
            group_timeouts[group] = group_timeouts.get(group, 0) + 1
        if on_fault is not None and i + 1 < len(to_rerun) and faulted(attempt, name):
            unhealthy = on_fault(name)

    tests = [results[n] for n in wanted if n in results]
    output = first.proc.output
    return BinaryRun(tests=tests, properties=props, reran=reran, notes=notes, output=truncate(output),
                     confinement=first.proc.confinement)


def _escape_filter(name: str) -> str:
    """A --gtest_filter that selects exactly this test (':' and '-' are filter syntax; '*' '?' globs)."""
    return "".join("?" if c in ":-*?" else c for c in name)
