"""The profile stage (grade --profile, make profile LAB=NN): after a lab's grade, each scored perf test
runs once more under Nsight Compute, confined like every run of the student's code, one launch per
timed kernel: the student's (the task's kernels, lab.toml), the reference's where the tree has one, and
the library's. It never changes a grade; without ncu or without access to the GPU's counters it says
what is missing and how to get it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from grader.execute import runs
from grader.execute.runner import Runner
from grader.host.toolkit import find_ncu
from grader.inspect.elf import demangle
from grader.inspect.techniques import kernel_ptx, ptx_functions, strip_ptx_comments
from grader.model.labs import Lab
from grader.model.profile import KernelProfile, LabProfile
from grader.model.results import Status, TestResult
from grader.profile import advice, metrics, ncu

MAX_TESTS = 6  # perf tests profiled per lab: each costs three short replayed runs
# The library variants' kernels, by the name the perf tests give the baseline (bench.cuh's suite.baseline).
# CUB's main kernel of each algorithm by name, not "cub::": the tests' own input changes and checks launch
# cub::...::transform_kernel first (lab 06's library column showed it on the H200), and the Init kernels
# that come before a scan or histogram sweep are not the algorithm.
LIBRARY_KERNELS = {
    "cublas": r"gemm|xmma|cutlass",
    "cub": r"DeviceReduceKernel|DeviceScanKernel|DeviceHistogramSweepKernel|DeviceRadixSort\w*Kernel|"
           r"DeviceSegmented\w*Kernel",
    "thrust": r"thrust::|cub::",
    "thrust_merge": r"DeviceMergeSort\w*Kernel",
    "thrust_sort": r"DeviceRadixSort\w*Kernel|DeviceMergeSort\w*Kernel",
}
# A library's kernel, whatever the task's globs say: lab 05's "*gemm*" (a student's own gemm kernel) also
# matches cuBLAS's sm80_xmma_gemm_..., which the test launches first to compute the expected matrix.
LIBRARY_NAME = re.compile(r"cublas|xmma|cutlass|cub::|thrust::|^(void )?sm\d+_")
RETRY_LAUNCHES = 4  # launches profiled when the first that matched was a library's


def _chosen(lab: Lab, tests: list[TestResult]) -> list[TestResult]:
    """The perf tests worth a profile: those that ran and timed the student's code, one per task (its
    first size), the scored ones first, then the steps without points (lab 06's interleaved reduction
    beside the single-pass one shows the chapter's lesson), at most MAX_TESTS."""
    timed = [t for t in tests if t.kind == "perf" and t.status is Status.PASSED and t.perf is not None
             and t.perf.impl is not None]

    def points(t: TestResult) -> float:
        goal = lab.perf_goal(t.name)
        return goal.points if goal is not None else 0.0
    out: list[TestResult] = []
    seen: set[str] = set()
    for t in sorted(timed, key=lambda t: points(t) <= 0):  # stable: test order within each
        goal = lab.perf_goal(t.name)
        owner = lab.task_for_test(t.name)
        key = (goal.task if goal is not None and goal.task else None) or (owner.id if owner else None) \
            or t.name.rpartition("/")[0] or t.name
        if key not in seen:
            seen.add(key)
            out.append(t)
    return out[:MAX_TESTS]


def _own(rows: list[dict[str, str]]) -> list[dict[str, str]]:
    """The rows of kernels that are not a library's."""
    return [r for r in rows if not LIBRARY_NAME.search(r.get("Kernel Name", "").strip())]


def ptx_kernels(ptx: str | None) -> list[str] | None:
    """The kernels (mangled names) a lab file's PTX defines; None without PTX."""
    if ptx is None:
        return None
    return [f.name for f in ptx_functions(strip_ptx_comments(ptx)).values() if f.kind == "entry"]


# A global load or store in PTX and its width: ld.global.nc.v4.f32 is 16 bytes per thread, st.global.u8 one.
_GLOBAL_ACCESS = re.compile(r"\b(ld|st)\.global((?:\.[A-Za-z0-9_:]+)+)")


def access_widths(ptx: str | None) -> dict[str, tuple[int, int]] | None:
    """Per kernel (mangled) of a lab file's PTX, the widest global load and store one thread makes, in bytes
    (4 where it makes none): a warp of coalesced accesses touches that many 32-byte sectors per request,
    4 for floats and 16 for float4s. None without PTX."""
    if ptx is None:
        return None
    out = {}
    for name in ptx_kernels(ptx) or []:
        widest = {"ld": 4, "st": 4}
        for op, suffix in _GLOBAL_ACCESS.findall(kernel_ptx(ptx, name)[0]):
            parts = suffix.split(".")
            lanes = next((int(p[1:]) for p in parts if re.fullmatch(r"v[248]", p)), 1)
            bits = next((int(p[1:]) for p in parts if re.fullmatch(r"[bfsu](8|16|32|64|128)", p)), 32)
            widest[op] = max(widest[op], lanes * bits // 8)
        out[name] = (widest["ld"], widest["st"])
    return out


def _widths_of(kernel: str, widths: Mapping[str, tuple[int, int]] | None) -> tuple[int, int] | None:
    """The access widths of the profiled kernel (ncu's demangled name) among a binary's own kernels."""
    if not widths:
        return None
    names = demangle(list(widths))

    def plain(name: str) -> str:
        # c++filt says <true> where ncu says <1>, and ncu leaves out the namespaces c++filt keeps
        # ("void matmul_fast_kernel<1>(...)" on the H200 for fast::matmul_fast_kernel<true>).
        short = re.sub(r"\bfalse\b", "0", re.sub(r"\btrue\b", "1", advice.short_name(name)))
        head, bracket, args = short.partition("<")
        return head.rsplit("::", 1)[-1] + bracket + args

    short = plain(kernel)
    return next((w for mangled, w in widths.items() if plain(names.get(mangled, mangled)) == short or mangled == kernel),
                None)


def _one(ncu_path: str, binary: Path, test: str, regex: str, runner: Runner, timeout_s: float,
         count: int = 1, base: str = "demangled") -> tuple[str, str]:
    """One confined run of binary's test under ncu, its first `count` matching launches profiled: (the raw
    CSV, what the run printed)."""
    limit, policy = runner.policy.for_tool(timeout_s)
    tool = Path(ncu_path)
    roots = sorted({str(tool.parent.parent), str(tool.resolve().parent)})
    launched = runs.launch(binary, [f"--gtest_filter={test}"], limit, runner.env, policy,
                           prefix=lambda ch: ncu.argv(ncu_path, ch[0].path, regex, count, base), extra_channels=1,
                           exec_roots=roots)
    return launched.extra[0].decode(errors="replace"), launched.proc.output


def profile_lab(lab: Lab, tests: list[TestResult], student: Path | None, reference: Path | None, runner: Runner,
                *, gpu_available: bool, timeout_s: float | None = None, find: Callable[[], str | None] = find_ncu,
                own: Mapping[str, Sequence[str] | None] | None = None,
                widths: Mapping[str, tuple[int, int]] | None = None) -> LabProfile:
    """Profile the lab's perf tests (_chosen) in the student's binary (and the reference's); see the module.
    own: per role ("yours", "reference"), the kernels that binary's lab code defines (mangled, from its
    PTX, ptx_kernels): only those are profiled as that role's, so a test that launches a library's
    kernel first (cuBLAS for lab 05's expected matrix) cannot stand in. Unknown (a compiled reference):
    the task's globs over every launch, library kernels skipped. widths: the student's kernels' global
    access widths (access_widths), so that a float4 kernel's 16 sectors per request are not "scattered"."""
    if not gpu_available:
        return LabProfile("unavailable", "no GPU here: profiles need one")
    path = find()
    if path is None:
        return LabProfile("unavailable", ncu.NOT_FOUND_HELP)
    chosen = _chosen(lab, tests)
    if student is None or not chosen:
        return LabProfile("unavailable", "no perf test with points ran to the end, so there is nothing to profile "
                                         "(fix the failing tests first)")
    out = LabProfile("ok", tool=ncu.version(path))
    timeout = (timeout_s or lab.timeout_s) * 4 + 60
    for test in chosen:
        goal = lab.perf_goal(test.name)
        task = (lab.task(goal.task) if goal is not None and goal.task else None) or lab.task_for_test(test.name)
        regex = ncu.glob_regex(task.kernels) if task is not None else ""
        # (role, binary, regex, the globs to match the lab file's own kernels with, the variant's name)
        runs_wanted = [("yours", student, regex, task.kernels, "")] if regex and task is not None else []
        for variant, globs in goal.profile_variants if goal is not None else ():
            runs_wanted.append(("variant", student, ncu.glob_regex(list(globs)), globs, variant))
        if reference is not None and regex and task is not None:
            runs_wanted.append(("reference", reference, regex, task.kernels, ""))
        library = LIBRARY_KERNELS.get(test.perf.baseline or "") if test.perf is not None else None
        if library:
            runs_wanted.append(("library", student, library, (), ""))
        mine: KernelProfile | None = None
        for role, binary, pattern, globs, variant in runs_wanted:
            known = (own or {}).get("yours" if role == "variant" else role) if role != "library" else None
            exact = ncu.own_kernels_regex(list(globs), known, demangle(known)) if known is not None else None
            if role == "variant" and exact is None:
                known = None  # a kernel the test file defines, not the lab file: matched by its globs
            if known is not None:
                if exact is None:
                    out.message += (f"{test.name} ({role}): no kernel of the lab file matches the task's names "
                                    f"({', '.join(globs)}). ")
                    continue
                text, printed = _one(path, binary, test.name, exact, runner, timeout, base="mangled")
                rows = ncu.parse_raw(text)
            else:
                text, printed = _one(path, binary, test.name, pattern, runner, timeout)
                rows = ncu.parse_raw(text)
            if known is None and role != "library" and rows and not _own(rows):
                text, printed = _one(path, binary, test.name, pattern, runner, timeout, RETRY_LAUNCHES)
                seen = ncu.parse_raw(text)
                rows = _own(seen)
                if not rows:  # say what came back, so that the next run can be told apart from this one
                    names = sorted({advice.short_name(r.get("Kernel Name", "")) for r in seen})
                    why = (f"the first {RETRY_LAUNCHES} launches that matched were library kernels "
                           f"({', '.join(names)})" if seen else
                           ncu.problem(text + "\n" + printed)
                           or "no profile came back when more launches were asked for")
                    out.message += f"{test.name} ({role}): {why}. "
                    continue
            elif known is None and role != "library":
                rows = _own(rows) or rows
            if not rows:
                why = ncu.problem(text + "\n" + printed)
                if why == ncu.PERMISSION_HELP:
                    return LabProfile("unavailable", why, tool=out.tool)
                out.message += f"{test.name} ({role}): {why or 'no profile came back'}. "
                continue
            if not out.peak_flop_per_s:
                out.peak_flop_per_s, out.peak_bytes_per_s = metrics.peaks(rows[0])
            k = metrics.kernel_profile(rows[0], test.name, role)
            k.variant = variant
            if role == "yours":  # advice is for the student's kernel only, against the reference when there is one
                if (w := _widths_of(k.kernel, widths)) is not None:
                    k.metrics["ld_access_bytes"], k.metrics["st_access_bytes"] = float(w[0]), float(w[1])
                mine, k.advice = k, advice.advise(k)
            elif role == "reference" and mine is not None:
                mine.advice = advice.advise(mine, k)
            out.kernels.append(k)
    if not out.kernels:
        out.status = "failed"
        out.message = out.message or "no kernel of the lab's tasks matched (lab.toml names each task's kernels)"
    out.message = re.sub(r"\s+", " ", out.message).strip()
    return out
