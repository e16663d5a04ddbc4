"""The profile (grade --profile, grader/profile/): Nsight Compute's raw pages recorded on an H200 read into
the numbers that carry each lab's lesson, the advice they give, the report's tables and roofline, and the
paths without ncu or without access to the GPU's counters. No GPU needed."""

from __future__ import annotations

import io
import json
import stat
from dataclasses import asdict
import sys
from pathlib import Path

import pytest

from grader.execute import runs
from grader.execute.runner import Runner
from grader.host.toolkit import find_ncu
from grader.model.labs import discover
from grader.model.profile import KernelProfile, LabProfile
from grader.model.progress import Progress
from grader.model.results import LabResult, Results
from grader.profile import advice, metrics, ncu
from grader.profile.stage import ptx_kernels, profile_lab
from grader.report import render_html
from grader.report.profile_text import profile_lines
from grader.report.profile_view import profile_view
from grader.report.sample import sample_results
from grader.tests.conftest import LAB_TOML, add_tests, ci_script, make_binary, spec, write_lab

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "ncu"
REPO = Path(__file__).resolve().parents[2]


def kernels(name: str) -> dict[str, metrics.KernelProfile]:
    """The fixture's kernels by short name (the first launch of each)."""
    out: dict[str, metrics.KernelProfile] = {}
    for row in ncu.parse_raw((FIXTURES / f"{name}.csv").read_text()):
        k = metrics.kernel_profile(row, "T", "yours")
        out.setdefault(advice.short_name(k.kernel), k)
    return out


def test_transpose_bank_conflicts_and_strided_stores() -> None:
    """Lab 05: the unpadded tile reads a column of shared memory, 32-way conflicts; the padded one ~1; the
    naive transpose's stores touch 32 sectors per request."""
    k = kernels("transpose")
    tiled, padded, naive = k["transpose_tiled_kernel"], k["transpose_padded_kernel"], k["transpose_naive_kernel"]
    assert tiled.metrics["shared_ld_ways"] == pytest.approx(32.2, abs=0.1)
    assert padded.metrics["shared_ld_ways"] == pytest.approx(1.06, abs=0.01)
    assert naive.metrics["st_sectors"] == pytest.approx(32.0, abs=0.1) and naive.metrics["ld_sectors"] == 4.0
    assert tiled.metrics["duration_us"] == pytest.approx(387.52) and padded.metrics["dram_pct"] == 73.59
    tiled_advice = advice.advise(tiled)
    assert tiled_advice[0].startswith("32-way bank conflicts on shared-memory loads in transpose_tiled_kernel")
    assert "[kTile][kTile + 1]" in tiled_advice[0]
    assert not any("bank conflicts" in a for a in advice.advise(padded))
    assert any("touch 32 sectors per warp request" in a for a in advice.advise(naive))
    # Against the reference (the padded kernel), the biggest difference is named.
    against = advice.advise(tiled, padded)[0]
    assert against.startswith("transpose_tiled_kernel takes 2.7x the reference's time")
    assert "wavefronts per shared load, yours 32.2 against 1.06" in against


def test_matmul_flops_fma_and_occupancy() -> None:
    """Lab 05: 2·4096³ FLOPs; the naive and tiled kernels keep the FMA pipe mostly idle, the fast one busy
    at 12.5% occupancy, capped by its registers."""
    naive = kernels("matmul-naive")["matmul_naive_kernel"]
    assert naive.metrics["flop"] == pytest.approx(2 * 4096**3, rel=0.01)
    k = kernels("matmul-fast")
    fast, tiled = k["fast::matmul_fast_kernel<1>"], k["matmul_tiled_kernel"]
    assert naive.metrics["fma_pct"] < 15 and tiled.metrics["fma_pct"] < 20 < 70 < fast.metrics["fma_pct"]
    assert fast.metrics["occupancy_max_pct"] == 12.5 and fast.limiter == "registers per thread"
    assert any("register tile" in a for a in advice.advise(tiled))
    assert any("At most 12% of the warp slots" in a and "registers per thread (" in a for a in advice.advise(fast))
    assert tiled.stalls[0][0].startswith("shared-memory instruction queue full")


def test_reduce_dram_and_aos_coalescing() -> None:
    """Lab 06: the single pass keeps DRAM busy, the interleaved first pass does not; lab 03: AoS loads
    touch 32 sectors per request, SoA 4."""
    single = kernels("reduce-single")["reduce_single_pass_kernel<float>"]
    inter = kernels("reduce-interleaved")["reduce_interleaved_kernel<float>"]
    assert single.metrics["dram_pct"] > 60 > 20 > inter.metrics["dram_pct"]
    assert any(a.startswith("DRAM is 66% busy") for a in advice.advise(single))
    aos = kernels("aos-soa")
    assert aos["scale_x_aos_kernel"].metrics["ld_sectors"] == 32.0 and aos["scale_x_soa_kernel"].metrics["ld_sectors"] == 4.0


def test_peaks_are_the_gpus_at_the_profiled_clock() -> None:
    rows = ncu.parse_raw((FIXTURES / "matmul-naive.csv").read_text())
    flops, bandwidth = metrics.peaks(rows[0])
    assert 4.0e13 < flops < 7.0e13 and bandwidth == pytest.approx(4.81e12, rel=0.01)  # an H200


def test_problems_ncu_reports() -> None:
    assert ncu.problem("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU "
                       "Performance Counters on the target device 0.") == ncu.PERMISSION_HELP
    assert "NVreg_RestrictProfilingToAdminUsers=0" in ncu.PERMISSION_HELP
    assert ncu.problem("==WARNING== No kernels were profiled.").startswith("Nsight Compute saw no launch")
    assert ncu.parse_raw("no csv here") == []
    assert ncu.glob_regex(["transpose_tiled_kernel*", "*fast*"]) == r"transpose_tiled_kernel.*|.*fast.*"


def test_no_ncu_and_no_gpu_say_what_is_missing() -> None:
    runner = Runner(policy=runs.DEFAULT_POLICY, progress=Progress(stream=io.StringIO()))
    lab = LabResult(1, "01-add", "Add", 100)
    got = profile_lab(_lab(Path("/nonexistent")), lab.tests, Path("/bin/true"), None, runner, gpu_available=True,
                      find=lambda: None)
    assert got.status == "unavailable" and got.message == ncu.NOT_FOUND_HELP
    assert profile_lab(_lab(Path("/nonexistent")), [], None, None, runner, gpu_available=False).message.startswith(
        "no GPU here")
    assert find_ncu({"CUDALAB_NCU": "/nonexistent/ncu", "PATH": ""}) is None


def _lab(root: Path):
    if not (root / "labs").exists():
        write_lab(root, toml=LAB_TOML.replace('tests = ["AddCorrectness.Large/*"]',
                                              'tests = ["AddCorrectness.Large/*"]\nkernels = ["add_kernel*"]'))
    return discover(root)[0]


def _fake_ncu(tmp_path: Path, deny: bool = False, max_rows: int = 99, by_name: bool = False) -> str:
    """A stand-in for ncu: writes a recorded raw page (the reference's for a *solution* binary) into its
    --log-file, then runs the program after its options, as ncu does. Asked for exact mangled names (the
    lab code's own kernels), it leaves out the library's rows, as ncu's filter would. Each call's
    arguments are appended to calls.txt beside it. by_name: a demangled-name regex that matches some of the
    recorded kernels keeps only those (one that matches none, the fake lab's add_kernel*, gets the page)."""
    script = tmp_path / "ncu"
    yours, ref = FIXTURES / "transpose.csv", FIXTURES / "matmul-fast.csv"
    script.write_text(f"""#!{sys.executable}
import os, subprocess, sys
args = sys.argv[1:]
open({str(tmp_path / "calls.txt")!r}, "a").write(" ".join(args) + "\\n")
log = args[args.index("--log-file") + 1]
if {deny!r}:
    open(log, "w").write("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance Counters\\n")
    sys.exit(1)
program = next(i for i, a in enumerate(args) if os.path.isabs(a) and os.access(a, os.X_OK))
src = {str(ref)!r} if "solution" in args[program] else {str(yours)!r}
count = min({max_rows}, int(args[args.index("--launch-count") + 1]))
lines = open(src).read().splitlines()
header = next(i for i, ln in enumerate(lines) if ln.startswith('"ID",'))
if args[args.index("--kernel-name-base") + 1] == "mangled":
    lines = lines[:header + 2] + [ln for ln in lines[header + 2:] if "xmma" not in ln]
elif {by_name!r}:
    import csv, re
    wanted = re.compile(args[args.index("--kernel-name") + 1].removeprefix("regex:"))
    column = next(csv.reader([lines[header]])).index("Kernel Name")
    named = [ln for ln in lines[header + 2:] if wanted.search(next(csv.reader([ln]))[column])]
    lines = lines[:header + 2] + (named or lines[header + 2:])
open(log, "w").write("\\n".join(lines[:header + 2 + count]) + "\\n")  # the first `count` launches, as ncu
sys.exit(subprocess.run(args[program:]).returncode)
""")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script)


def test_the_stage_runs_ncu_on_yours_and_the_reference(tmp_path: Path) -> None:
    """The profile stage end to end, confined like every run: ncu in front of the student's binary and of the
    reference's, one perf test with points, the student's kernel compared with the reference's."""
    lab = _lab(tmp_path / "tree")
    student = make_binary(tmp_path / "bin" / "lab01_student", spec(add_tests()))
    reference = make_binary(tmp_path / "bin" / "lab01_solution", spec(add_tests()))
    tests = _graded_tests(lab)
    runner = Runner(policy=runs.DEFAULT_POLICY, progress=Progress(stream=io.StringIO()))
    got = profile_lab(lab, tests, student, reference, runner, gpu_available=True, find=lambda: _fake_ncu(tmp_path))
    assert got.status == "ok", got.message
    assert [k.role for k in got.kernels] == ["yours", "reference"]
    assert advice.short_name(got.kernels[0].kernel) == "transpose_padded_kernel"
    # The reference's first matching launch is cuBLAS's (the test's expected matrix): the stage profiles more
    # launches and takes the first of the lab's own kernels, never a library's.
    assert advice.short_name(got.kernels[1].kernel) == "fast::matmul_fast_kernel<1>"
    assert got.peak_bytes_per_s == pytest.approx(4.81e12, rel=0.01)
    assert any(a.startswith("DRAM is 74% busy") for a in got.kernels[0].advice)
    (tmp_path / "denied").mkdir()
    denying = _fake_ncu(tmp_path / "denied", deny=True)
    denied = profile_lab(lab, tests, student, reference, runner, gpu_available=True, find=lambda: denying)
    assert denied.status == "unavailable" and denied.message == ncu.PERMISSION_HELP


def test_a_retry_that_finds_only_library_kernels_names_them(tmp_path: Path) -> None:
    """When more launches still bring only cuBLAS's kernel (or nothing), the message says which, not a guess."""
    lab = _lab(tmp_path / "tree")
    student = make_binary(tmp_path / "bin" / "lab01_student", spec(add_tests()))
    reference = make_binary(tmp_path / "bin" / "lab01_solution", spec(add_tests()))
    runner = Runner(policy=runs.DEFAULT_POLICY, progress=Progress(stream=io.StringIO()))
    got = profile_lab(lab, _graded_tests(lab), student, reference, runner, gpu_available=True,
                      find=lambda: _fake_ncu(tmp_path, max_rows=1))
    assert [k.role for k in got.kernels] == ["yours"]
    assert "AddPerf.Fast/16777216 (reference): the first 4 launches that matched were library kernels (sm80_xmma_gemm" \
        in got.message, got.message


# The kernels of lab 05's reference, as its PTX names them (.entry), and as c++filt demangles them.
LAB05_KERNELS = {
    "_Z23transpose_padded_kernelPKfPfii": "transpose_padded_kernel(float const*, float*, int, int)",
    "_Z19matmul_tiled_kernelPKfS0_Pfiii": "matmul_tiled_kernel(float const*, float const*, float*, int, int, int)",
    "_ZN4fast18matmul_fast_kernelILb1EEEvPKfS2_Pfiii":
        "void fast::matmul_fast_kernel<true>(float const*, float const*, float*, int, int, int)",
    "_ZN4fast18matmul_fast_kernelILb0EEEvPKfS2_Pfiii":
        "void fast::matmul_fast_kernel<false>(float const*, float const*, float*, int, int, int)",
}


def test_own_kernels_by_exact_name() -> None:
    """Lab 05's fast task names its kernels *fast*, *gemm*, *register*: of the file's own kernels that is
    both fast::matmul_fast_kernel instances, and no library kernel can match the exact names."""
    mangled = list(LAB05_KERNELS)
    fast = ncu.own_kernels_regex(["*fast*", "*gemm*", "*register*"], mangled, LAB05_KERNELS)
    assert fast == "^(_ZN4fast18matmul_fast_kernelILb1EEEvPKfS2_Pfiii|_ZN4fast18matmul_fast_kernelILb0EEEvPKfS2_Pfiii)$"
    assert ncu.own_kernels_regex(["matmul_tiled_kernel*"], mangled, LAB05_KERNELS) == \
        "^(_Z19matmul_tiled_kernelPKfS0_Pfiii)$"
    assert ncu.own_kernels_regex(["matmul_fast_kernel*"], mangled, LAB05_KERNELS).count("fast") == 4  # base name
    assert ncu.own_kernels_regex(["reduce_kernel*"], mangled, LAB05_KERNELS) is None
    # Without c++filt the mangled names still carry the identifier.
    assert "transpose_padded" in ncu.own_kernels_regex(["transpose_padded_kernel*"], mangled, {})
    ptx = "//\n.visible .entry _Z19matmul_tiled_kernelPKfS0_Pfiii(\n.param .u64 p\n)\n{\nret;\n}\n" \
          ".func _Z4helpv()\n{\nret;\n}\n"
    assert ptx_kernels(ptx) == ["_Z19matmul_tiled_kernelPKfS0_Pfiii"] and ptx_kernels(None) is None


def test_the_stage_profiles_the_lab_codes_own_kernels_first_launch(tmp_path: Path) -> None:
    """Given the kernels each binary defines, ncu filters on their exact mangled names, one launch: the
    reference's first matching launch is its own fast kernel, not cuBLAS's, with no second run."""
    lab = _lab(tmp_path / "tree")
    student = make_binary(tmp_path / "bin" / "lab01_student", spec(add_tests()))
    reference = make_binary(tmp_path / "bin" / "lab01_solution", spec(add_tests()))
    runner = Runner(policy=runs.DEFAULT_POLICY, progress=Progress(stream=io.StringIO()))
    own = {"yours": ["_Z10add_kernelPKfS0_Pfi"], "reference": ["_Z10add_kernelPKfS0_Pfi", "_Z5otherv"]}
    got = profile_lab(lab, _graded_tests(lab), student, reference, runner, gpu_available=True,
                      find=lambda: _fake_ncu(tmp_path), own=own)
    assert [(k.role, advice.short_name(k.kernel)) for k in got.kernels] == [
        ("yours", "transpose_padded_kernel"), ("reference", "fast::matmul_fast_kernel<1>")]
    calls = [c for c in (tmp_path / "calls.txt").read_text().splitlines() if c != "--version"]
    assert len(calls) == 2 and all("--kernel-name-base mangled" in c and "--launch-count 1" in c for c in calls)
    assert "regex:^(_Z10add_kernelPKfS0_Pfi)$" in calls[1]
    none = profile_lab(lab, _graded_tests(lab), student, reference, runner, gpu_available=True,
                       find=lambda: _fake_ncu(tmp_path), own={"yours": ["_Z5otherv"], "reference": None})
    assert "(yours): no kernel of the lab file matches the task's names (add_kernel*)" in none.message
    assert [k.role for k in none.kernels] == ["reference"]  # unknown: the globs, library kernels skipped


def _graded_tests(lab):
    from grader.execute.gtest import perf_from_properties
    from grader.model.results import Status, TestResult
    from grader.tests.conftest import perf_properties

    perf = perf_from_properties(perf_properties(1.0))
    return [TestResult("AddPerf.Fast/16777216", Status.PASSED, kind="perf", perf=perf, task="large")]


def test_the_report_shows_tables_roofline_and_advice() -> None:
    profile = LabProfile("ok", tool="Version 2025.3.1.0")
    rows = ncu.parse_raw((FIXTURES / "matmul-fast.csv").read_text())
    profile.peak_flop_per_s, profile.peak_bytes_per_s = metrics.peaks(rows[0])
    for row, role in zip(rows[1:3], ("yours", "reference"), strict=True):
        profile.kernels.append(metrics.kernel_profile(row, "MatmulPerf.Fast/4096", role))
    profile.kernels.append(metrics.kernel_profile(rows[0], "MatmulPerf.Fast/4096", "library"))
    profile.kernels[0].advice = advice.advise(profile.kernels[0])
    view = profile_view(profile)
    assert view["roofline"] is not None and 'class="pt pt-yours"' in str(view["roofline"])
    assert [c["role"] for c in view["tests"][0]["columns"]] == ["yours", "reference", "library"]
    results = sample_results()
    lab = results.labs[0]
    lab.profile = profile
    html = render_html(results)
    assert "Why it is as fast as it is (Nsight Compute)" in html and "Roofline" in html
    assert "FMA pipe busy" in html and "registers per thread" in html
    again = Results.from_dict(results.to_dict())
    assert again.labs[0].profile == profile  # results.json round-trips the profile
    lines = profile_lines(lab)
    assert lines[0].strip().startswith(f"{lab.number:02d}  profile MatmulPerf.Fast/4096 fast::matmul_fast_kernel<1>:")
    unavailable = LabResult(5, "05-tiled-matmul", "M", 100, profile=LabProfile("unavailable", ncu.NOT_FOUND_HELP))
    assert profile_lines(unavailable) == [f"  05  profile: {ncu.NOT_FOUND_HELP}"]
    assert "No profile: Nsight Compute (ncu) was not found" in render_html(Results(results.run, [unavailable]))


# --- ci/profile_summary.py: gpu-check's profile stage read back ------------------------------------------


def _profiled(tmp_path: Path, profile: LabProfile | None) -> Path:
    from grader.model.results import LabResult
    from grader.report.sample import sample_results

    results = sample_results()
    results.labs = [LabResult(5, "05-tiled-matmul", "Tiled matmul", 100, profile=profile)]
    results.save(tmp_path / "profile" / "05" / "results.json")
    return tmp_path / "profile"


def test_profile_summary_fails_when_a_test_has_no_kernel_of_the_lab_file(tmp_path: Path) -> None:
    """The H200 run of grade 05 --solution --profile (0.5.0's stage): MatmulPerf.Fast had only cuBLAS."""
    summary = ci_script("profile_summary")
    recorded = LabProfile.from_dict(json.loads((FIXTURES / "profile-05-h200.json").read_text()))
    lines, ok = summary.summarize(_profiled(tmp_path, recorded))
    text = "\n".join(lines)
    assert not ok and "NO KERNEL OF THE LAB FILE profiled in MatmulPerf.Fast/4096" in text
    assert "matmul_tiled_kernel" in text and "transpose_padded_kernel" in text
    recorded.message = ""
    recorded.kernels.append(KernelProfile("MatmulPerf.Fast/4096", "yours", "fast::matmul_fast_kernel<1>(...)"))
    assert summary.summarize(_profiled(tmp_path / "fixed", recorded))[1]
    # No access to the counters is said, not failed; no profile in a lab's results is a failure.
    lines, ok = summary.summarize(_profiled(tmp_path / "denied", LabProfile("unavailable", ncu.PERMISSION_HELP)))
    assert ok and "ERR_NVGPUCTRPERM" in "\n".join(lines)
    assert not summary.summarize(_profiled(tmp_path / "none", None))[1]
    assert not summary.summarize(tmp_path / "empty")[1]


def test_the_profiled_tests_are_one_per_task_scored_first() -> None:
    """Lab 06: the single-pass reduction (scored) and the interleaved one (no points) side by side is the
    chapter's lesson (DRAM throughput), so steps without points are profiled too, after the scored ones."""
    from grader.execute.gtest import perf_from_properties
    from grader.model.results import Status, TestResult
    from grader.profile.stage import _chosen
    from grader.tests.conftest import perf_properties

    lab = next(lab for lab in discover(REPO) if lab.name == "06-reduce")
    perf = perf_from_properties(perf_properties(1.0))
    names = [f"ReducePerf.{step}/{n}" for step in ("Interleaved", "Sequential", "FirstAdd", "Shuffle", "SinglePass")
             for n in (16777216, 268435456)]
    tests = [TestResult(n, Status.PASSED, kind="perf", perf=perf) for n in names]
    chosen = [t.name for t in _chosen(lab, tests)]
    assert chosen[:3] == ["ReducePerf.FirstAdd/268435456", "ReducePerf.Shuffle/268435456",
                          "ReducePerf.SinglePass/16777216"]
    assert set(chosen[3:]) == {"ReducePerf.Interleaved/16777216", "ReducePerf.Sequential/16777216"}
    failed = [TestResult(n, Status.FAILED, kind="perf", perf=perf) for n in names]
    assert _chosen(lab, failed) == []


def test_the_roofline_draws_each_kernel_once_and_no_label_over_another() -> None:
    """The H200 report of lab 05 drew cuBLAS's kernel three times (once per perf test), its three labels over
    each other and over the fast kernel's, which sits beside it."""
    import re

    from grader.report.profile_view import roofline

    rows = ncu.parse_raw((FIXTURES / "matmul-fast.csv").read_text())
    profile = LabProfile("ok")
    profile.peak_flop_per_s, profile.peak_bytes_per_s = metrics.peaks(rows[0])
    profile.kernels.append(metrics.kernel_profile(rows[1], "MatmulPerf.Fast/4096", "yours"))
    for test in ("MatmulPerf.Naive/4096", "MatmulPerf.Tiled/4096", "MatmulPerf.Fast/4096"):
        profile.kernels.append(metrics.kernel_profile(rows[0], test, "library"))
    svg = str(roofline(profile))
    assert svg.count('class="pt pt-library"') == 1 and svg.count('class="pt pt-yours"') == 1
    labels = [(float(a), float(b), t) for a, b, t in re.findall(r'<text x="([\d.]+)" y="([\d.]+)"[^>]*pt-label[^>]*>([^<]*)<', svg)]
    assert len(labels) == 2
    (x1, y1, t1), (x2, y2, t2) = labels
    overlap_x = x1 < x2 + len(t2) * 6 and x2 < x1 + len(t1) * 6
    assert not (overlap_x and abs(y1 - y2) < 13), labels
    assert all(x + len(t) * 6 <= 560 for x, _, t in labels)  # inside the chart


def test_other_variants_of_a_test_are_profiled_beside_yours(tmp_path: Path) -> None:
    """Issue 26's unpadded-vs-padded transpose: a [[perf]] entry's profile_variants names other variants the
    test times (the earlier steps, a test kernel), and the stage profiles each in the student's binary."""
    root = tmp_path / "tree"
    write_lab(root, toml=LAB_TOML.replace('tests = ["AddCorrectness.Large/*"]',
                                          'tests = ["AddCorrectness.Large/*"]\nkernels = ["add_kernel*"]')
              .replace('zero_at = 0.5\n', 'zero_at = 0.5\nprofile_variants = { tiled = ["transpose_tiled_kernel*"] }\n'))
    lab = discover(root)[0]
    assert lab.perf[0].profile_variants == (("tiled", ("transpose_tiled_kernel*",)),)
    student = make_binary(tmp_path / "bin" / "lab01_student", spec(add_tests()))
    runner = Runner(policy=runs.DEFAULT_POLICY, progress=Progress(stream=io.StringIO()))
    got = profile_lab(lab, _graded_tests(lab), student, None, runner, gpu_available=True,
                      find=lambda: _fake_ncu(tmp_path, by_name=True))
    assert [(k.role, k.variant, advice.short_name(k.kernel)) for k in got.kernels] == [
        ("yours", "", "transpose_padded_kernel"), ("variant", "tiled", "transpose_tiled_kernel")]
    assert got.kernels[0].advice and not got.kernels[1].advice  # advice is for yours only
    view = profile_view(got)
    assert [c["role"] for c in view["tests"][0]["columns"]] == ["yours", "tiled"] and view["variants"]
    ways = next(r for r in view["tests"][0]["rows"] if r["label"].startswith("shared loads"))["cells"]
    assert ways == ["1.06×", "32.23×"]  # the lesson: padding removes the 32-way conflicts
    again = LabProfile.from_dict(json.loads(json.dumps(asdict(got))))
    assert again.kernels[1].variant == "tiled"
    with pytest.raises(Exception, match="profile_variants must map each variant"):
        write_lab(tmp_path / "bad", toml=LAB_TOML.replace('zero_at = 0.5\n', 'zero_at = 0.5\nprofile_variants = ["x"]\n'))
        discover(tmp_path / "bad")


def test_labs_03_and_05_profile_the_comparisons_the_chapters_teach() -> None:
    """Lab 05's padded transpose beside its unpadded and naive steps; lab 03's SoA scale beside the AoS one."""
    labs = {lab.name: lab for lab in discover(REPO)}
    padded = labs["05-tiled-matmul"].perf_goal("TransposePerf.Padded/8192")
    assert padded is not None and dict(padded.profile_variants) == {
        "tiled": ("transpose_tiled_kernel*",), "naive": ("transpose_naive_kernel*",)}
    soa = labs["03-vector-add"].perf_goal("VectorAddExtrasPerf.AosVersusSoa")
    assert soa is not None and dict(soa.profile_variants) == {"aos": ("scale_x_aos_kernel*",)}
