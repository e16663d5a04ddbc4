"""The compute-sanitizer stage: memcheck, racecheck, synccheck and initcheck as graded checks.

For a lab whose lab.toml has [sanitizer] tools (or tools asked for on the command line), the student
binary's correctness tests run under each tool at small sizes (CUDALAB_SMALL=1: large sizes and perf
tests skip themselves), with their own time limit, confined like every run (grader/execute/runs.py). The tool
writes its report to a pipe of its own (--log-file /proc/self/fd/N), so nothing the program prints can
pass for a finding or hide one. Each tool becomes one result, sanitizer.<tool>: passed when it found
nothing, failed (category sanitizer) with the kernel and file:line of each distinct finding (the builds
use -lineinfo), or not run with the reason (no compute-sanitizer, no GPU, time limit). [sanitizer]
points are shared by the tools that ran (grader/score/penalties.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

from grader.execute import runs
from grader.execute.lab_run import Graded
from grader.execute.policy import TOOL_HOST_MEMORY_MIB
from grader.execute.runner import Runner
from grader.execute.sanitizer_log import Finding, parse_log, target_died, unsupported
from grader.host.toolkit import find_sanitizer
from grader.model.labs import Lab
from grader.model.results import Category, Status, TestResult
from grader.model.text import truncate

TOOLS = ("memcheck", "racecheck", "synccheck", "initcheck")
ERROR_EXITCODE = 86
PRINT_LIMIT = 20
MAX_SHOWN = 5
SUITE = "sanitizer"
TASK_ID = "sanitizer"
CORRECTNESS_FILTER = "-*Perf.*"
FILTERED_TOOLS = ("racecheck", "synccheck")  # limited to the graded file's own kernels (kernels_to_check)
STOPPED = "sanitizer_stopped"  # a result property: "memory" when the run was stopped for its host memory


@dataclass
class ToolRun:
    tool: str
    result: TestResult
    findings: list[Finding]


def sanitizer_argv(sanitizer: str, tool: str, log_file: Path | str, kernels: Sequence[str] = ()) -> list[str]:
    """kernels: the only kernels the tool checks (mangled, exact), all when empty."""
    argv = [sanitizer, "--tool", tool, "--error-exitcode", str(ERROR_EXITCODE), "--print-limit", str(PRINT_LIMIT),
            "--log-file", str(log_file)]
    if tool == "memcheck":
        argv += ["--report-api-errors", "no"]  # tests that provoke API errors on purpose are not findings
    for name in kernels:  # each filter adds kernels: a kernel is checked when it matches any of them
        argv += ["--kernel-name", f"kne={name}"]
    return argv


def kernels_to_check(tool: str, own_kernels: Sequence[str] | None) -> tuple[str, ...]:
    """The kernels a tool is limited to: for racecheck and synccheck, the graded file's own (the kernels its
    PTX defines, template instances of CUB or Thrust it launches included). The tests' kernels, the libraries
    they compute expected answers with (cuBLAS, CUB, Thrust) and the shared-memory scribble cannot race in
    the student's code, and analysing them was most of lab 11's racecheck (41.4 s of BlockSort and Partition
    tests on the H200, 1.4 s when limited to the lab file's kernels). Empty (every kernel checked) for the
    other tools, and when the file's kernels are unknown (no PTX kept) or it defines none."""
    if tool not in FILTERED_TOOLS or not own_kernels:
        return ()
    return tuple(dict.fromkeys(own_kernels))


def test_filter(lab: Lab, tool: str) -> str:
    """The gtest filter of one tool's run: every correctness test, less those lab.toml's [sanitizer] skip
    leaves out for this tool (lab 05: the tiled kernel's largest shapes under racecheck)."""
    skip = lab.sanitizer.get("skip", {}) if isinstance(lab.sanitizer, dict) else {}
    globs = skip.get(tool, []) if isinstance(skip, dict) else []
    return ":".join([CORRECTNESS_FILTER, *(g for g in globs if isinstance(g, str))])


def run_tool(
    sanitizer: str,
    tool: str,
    binary: Path,
    timeout_s: float,
    env: Mapping[str, str] | None = None,
    policy: runs.RunPolicy | None = None,
    label: str = "student",
    gtest_filter: str = CORRECTNESS_FILTER,
    kernels: Sequence[str] = (),
    own_files: Sequence[str] = (),
) -> ToolRun:
    """One tool over the binary's correctness tests at small sizes (gtest_filter: test_filter's), checking
    only `kernels` when given (kernels_to_check's)."""
    policy = policy or runs.DEFAULT_POLICY
    name = f"{SUITE}.{tool}"
    limit, tool_policy = policy.for_tool(timeout_s)
    tool_root = str(Path(sanitizer).resolve().parent.parent)
    launched = runs.launch(Path(binary), [f"--gtest_filter={gtest_filter}"], limit, env, tool_policy, small=True,
                           prefix=lambda ch: sanitizer_argv(sanitizer, tool, ch[0].path, kernels), extra_channels=1,
                           exec_roots=[tool_root])
    proc = launched.proc
    text = launched.extra[0].decode(errors="replace")
    # The tests ran to the end under the tool, and the harness saw the tool attached and small mode on.
    attempt = runs.read_launch(launched, label, verify=policy.verify)
    finished = attempt.parsed is not None
    findings, total = parse_log(text, tool, own_files)
    blind = unsupported(text)
    # The tool counts its own "not supported" warnings as errors (summary and exit code): with nothing
    # else found, they are what it could not check, not a bug of the program.
    excused = bool(blind) and not findings and (total is None or total <= len(blind))
    result = TestResult(name=name, status=Status.PASSED, kind="correctness", binary=label, duration_s=proc.duration_s,
                        properties={"sanitizer_tool": tool})
    if kernels:
        result.properties["sanitizer_kernels_checked"] = str(len(kernels))
    if blind:
        result.properties["sanitizer_unsupported"] = "; ".join(blind)
        # Probed on an H200 (bench/probes/racecheck.sh): racecheck in a program with dynamic parallelism
        # watches no kernel at all, host-launched ones included, so its silence proves nothing.
        result.message = (f"compute-sanitizer {tool} could not check this program: it uses {', '.join(blind)}, "
                          "which the tool does not support, so finding nothing proves nothing")
    # The program crashed under the tool and the tool found nothing: no verdict (the crash is the tests'
    # to report, with their own run's hint), and nothing to put above the failures that explain it.
    died = not findings and not total and target_died(text)
    if died:
        why = f" ({proc.signal_name})" if proc.signal_name else ""
        result.status = Status.NOT_RUN
        result.category = Category.CRASH
        result.message = (f"compute-sanitizer {tool} gave no verdict: the program crashed under the tool{why} before "
                          "its tests ended, and the tool found nothing before that; the tests that crash say where")
    elif not excused and (findings or proc.returncode == ERROR_EXITCODE or (total or 0) > 0):
        report_findings(result, tool, findings, total)
    elif proc.timed_out:
        result.status = Status.NOT_RUN
        result.category = Category.TIMEOUT
        result.message = (f"not run to the end: compute-sanitizer {tool} did not finish within {limit:g} s "
                          "(an endless loop, or tests too slow under the tool)")
    elif proc.out_of_memory:
        mib = (proc.confinement or {}).get("peak_rss_mib", 0)
        allowed = (proc.confinement or {}).get("memory_mib")
        may = f"the {allowed:g} MiB it may hold under the tool" if allowed else "it may hold under the tool"
        result.status = Status.NOT_RUN
        result.category = Category.HARNESS
        result.properties[STOPPED] = "memory"
        result.message = (f"compute-sanitizer {tool} gave no verdict: the run held more host memory ({mib:g} MiB) than "
                          f"{may} (the lab's limit and {TOOL_HOST_MEMORY_MIB:g} MiB for the tool), and was stopped")
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


def report_findings(result: TestResult, tool: str, findings: list[Finding], total: int | None) -> None:
    """result made the failure these findings are: the count, the first MAX_SHOWN findings in words, and
    for the report, hints and scoring the first one's kernel, line and where its access went
    (sanitizer_oob: an "oob:" signature for the hints), and every kernel a finding charges."""
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
        if shown[0].oob:
            result.properties["sanitizer_oob"] = shown[0].oob
    kernels = sorted({f.charged for f in findings if f.kernel})
    if kernels:  # every kernel a finding names costs the task that owns it (Finding.charged)
        result.properties["sanitizer_kernels"] = ",".join(kernels)


def suites_of(binary: Path, env: Mapping[str, str] | None, gtest_filter: str) -> list[str]:
    """The binary's test suites with a test the tool's filter keeps, in its order ([] when it cannot list
    them). Listed from the binary, not taken from the lab's results: beside the run the stage starts before
    there are any."""
    try:
        names = runs.list_tests(binary, env=env)
    except Exception:  # noqa: BLE001 - no parts to run: the whole run's verdict stands
        return []
    return list(dict.fromkeys(n.split(".", 1)[0] for n in names if runs.filter_matches(n, gtest_filter)))


def in_parts(tool: str, whole: ToolRun, suites: list[str], gtest_filter: str,
             run_of: Callable[[str], ToolRun]) -> ToolRun:
    """A tool run stopped for its host memory, again one test suite at a time. With a race in every block
    racecheck outgrew each limit it was given over lab 03's small tests (4.2 GiB, then 8.4 GiB: the
    adversarial race case on an H200); its memory grows with what it saw in the process, so a suite alone
    holds a part of it (the same case, in 8 parts: caught, 56 s on an H200). Findings of every part count; a part stopped again leaves
    the tool without a verdict, as the whole run had been."""
    if len(suites) < 2:
        return whole
    parts = [run_of(f"{suite}.*{gtest_filter}") for suite in suites]  # gtest_filter is all negative: "-..."
    result = TestResult(name=whole.result.name, status=Status.PASSED, kind="correctness", binary=whole.result.binary,
                        duration_s=whole.result.duration_s + sum(p.result.duration_s or 0.0 for p in parts),
                        properties={k: v for k, v in whole.result.properties.items() if k != STOPPED})
    result.properties["sanitizer_parts"] = str(len(parts))
    how = (f"run one test suite at a time ({len(parts)} runs): the whole run held more host memory than allowed "
           "under the tool")
    merged: dict[tuple[str, str, str], Finding] = {}
    for f in (f for p in parts for f in p.findings):
        key = (f.what, f.kernel, f.location)
        merged[key] = replace(merged[key], count=merged[key].count + f.count) if key in merged else f
    failed = [p for p in parts if p.result.category is Category.SANITIZER]
    stopped = [suite for suite, p in zip(suites, parts) if p.result.status is Status.NOT_RUN]
    if failed or merged:
        totals = [p.result.properties.get("sanitizer_errors") for p in failed]
        total = sum(int(t) for t in totals if t and t.isdigit()) or None
        report_findings(result, tool, list(merged.values()), total)
        result.message += f"\n({how})"
    elif stopped:
        result.status = Status.NOT_RUN
        result.category = Category.HARNESS
        result.properties[STOPPED] = "memory"
        result.message = (f"{whole.result.message}; then {how}, and found nothing, but no verdict on "
                          f"{', '.join(stopped)}: {parts[suites.index(stopped[0])].result.message}")
    else:
        result.message = f"nothing found, {how}"
    return ToolRun(tool, result, list(merged.values()))


def sanitize(lab: Lab, graded: Graded | None, runner: Runner, *, tools: list[str], timeout_s: float,
             gpu_available: bool, tests: list[TestResult], stop_at_first_failure: bool = False,
             own_kernels: Sequence[str] | None = None) -> list[TestResult]:
    """The sanitize stage: each of the lab's tools over the graded binary, or why not. tests: the lab's
    tests so far (a binary that saw no GPU is not sanitized); own_kernels: the kernels the graded file
    defines (mangled, from its PTX; None when unknown), to which racecheck and synccheck are limited."""
    if not tools or graded is None:
        return []
    label = graded.label
    if graded.blocked is not None or not graded.ran:
        why = graded.blocked.test_message if graded.blocked is not None else "the binary did not build"
        return not_run(tools, why, label=label)
    if not gpu_available or saw_no_gpu(tests):
        return skipped(tools, "no GPU on this machine", Category.NO_GPU, label)
    tool_path = find_sanitizer()
    if tool_path is None:
        return skipped(tools, "compute-sanitizer is not installed (it comes with the CUDA toolkit)", Category.HARNESS,
                       label)
    def one(tool: str) -> TestResult:
        def run_of(gtest_filter: str) -> ToolRun:
            return run_tool(tool_path, tool, graded.path, timeout_s, env=runner.env, policy=runner.policy, label=label,
                            gtest_filter=gtest_filter, kernels=kernels_to_check(tool, own_kernels),
                            own_files=[Path(f).name for f in lab.student_files])

        whole = test_filter(lab, tool)
        run = run_of(whole)
        if run.result.properties.get(STOPPED) == "memory":
            run = in_parts(tool, run, suites_of(graded.path, runner.env, whole), whole, run_of)
        (runner.progress.ok if run.result.status is Status.PASSED else runner.progress.fail)(
            f"{run.result.name}: {run.result.status.value}"
            + (f" ({len(run.findings)} distinct finding(s))" if run.findings else "")
        )
        left_out = whole.removeprefix(CORRECTNESS_FILTER).strip(":")
        if left_out:
            run.result.properties["sanitizer_left_out"] = left_out.replace(":", ", ")
            if run.result.status is Status.PASSED:
                note = f"tests not run under {tool} (the lab leaves them out): {left_out.replace(':', ', ')}"
                run.result.message = f"{run.result.message}\n{note}" if run.result.message else note
        return run.result

    if not stop_at_first_failure and len(tools) > 1:
        return _side_by_side(tools, one, runner, graded.target, label)
    out = []
    # Why the remaining tools are not run: one ran out of time (the others would run the same kernels as
    # long), or, with stop_at_first_failure (the mutation gate), one found a problem (the verdict is in).
    skip: tuple[str, Category] | None = None
    for tool in tools:
        stop = runner.stopped()
        if stop is not None:
            out += not_run([tool], stop.test_message, stop.category, label)
            continue
        if skip is not None:
            out += not_run([tool], skip[0].format(tool=tool), skip[1], label)
            continue
        runner.progress.step(f"compute-sanitizer {tool} on {graded.target} (small sizes)")
        result = one(tool)
        out.append(result)
        if result.category is Category.TIMEOUT:
            skip = (f"not run: compute-sanitizer {tool} did not finish in time, and {{tool}} would run the same "
                    "kernels under a tool at least as slow", Category.TIMEOUT)
        if result.status is not Status.PASSED:
            runner.check_health(f"compute-sanitizer {tool}")
            if skip is None and stop_at_first_failure:
                skip = (f"not run: compute-sanitizer {tool} found a problem already, which decides the "
                        "mutation gate", Category.SANITIZER)
    return out


def _side_by_side(tools: list[str], one: Callable[[str], TestResult], runner: Runner, target: str,
                  label: str) -> list[TestResult]:
    """A student's grade runs every tool, so they run at once, each in its own confined process: the
    stage takes as long as its slowest tool (racecheck, mostly) rather than the sum. At small sizes the
    three together hold well under a GiB of device memory. The results keep the lab's order of tools; a
    tool that failed is followed by one health check of the GPU (a fault may have left it unusable)."""
    stop = runner.stopped()
    if stop is not None:
        return not_run(tools, stop.test_message, stop.category, label)
    runner.progress.step(f"compute-sanitizer {', '.join(tools)} on {target}, side by side (small sizes)")
    with ThreadPoolExecutor(max_workers=len(tools)) as pool:
        results = list(pool.map(one, tools))
    failed = [r for r in results if r.status is not Status.PASSED]
    if failed:
        runner.check_health(f"compute-sanitizer {failed[0].name.removeprefix(f'{SUITE}.')}")
    return results


def timeout_for(lab: Lab, timeout_s: float | None) -> float:
    """A tool's time limit: lab.toml's [sanitizer] timeout_s, else three times the run timeout asked for,
    else the lab's own run timeout."""
    return float(lab.sanitizer.get("timeout_s", 0) or 0) or (3 * timeout_s if timeout_s else lab.timeout_s)


def skipped(tools: list[str], reason: str, category: Category, label: str) -> list[TestResult]:
    out = not_run(tools, reason, category, label)
    for t in out:
        t.status = Status.SKIPPED
    return out


def saw_no_gpu(tests: list[TestResult]) -> bool:
    """Every test of the lab skipped for lack of a GPU: the binary saw none."""
    gpu_tests = [t for t in tests if t.category is Category.NO_GPU]
    return bool(gpu_tests) and len(gpu_tests) == len([t for t in tests if not t.name.startswith(f"{SUITE}.")])


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
