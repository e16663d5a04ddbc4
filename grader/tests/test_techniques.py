"""Reading what a lab file compiles to: nm symbols, forbidden symbols, per-kernel PTX, techniques and the
points they withhold. The last tests compile every reference solution with nvcc (skipped without it)."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from grader.cmake import find_nvcc
from grader.labs import Technique, discover
from grader.results import Category, LabResult, Status, TaskScore
from grader.scoring import score_lab
from grader.techniques import (
    CompileDb,
    Inspector,
    Symbol,
    TechniqueOutcome,
    apply_techniques,
    check_technique,
    forbidden_hits,
    kernel_ptx,
    parse_nm,
    ptx_functions,
    to_object_command,
    to_ptx_command,
)

ROOT = Path(__file__).resolve().parents[2]
LABS = {lab.name: lab for lab in discover(ROOT)}

NM = """
0000000000000000 V DW.ref.__gxx_personality_v0
                 U atexit
                 U cudaMalloc
                 U exit
                 w __gmon_start__
0000000000000a20 T vector_add(float const*, float const*, float*, int)
0000000000000000 W thrust::THRUST_300000_SM_900_NS::detail::foo()
0000000000000010 T main
student.o:
"""

PTX = """
.version 9.0
.target sm_90
.extern .func (.param .b32 func_retval0) vprintf(.param .b64 vprintf_param_0, .param .b64 vprintf_param_1);
.func (.param .b32 func_retval0) _Z6helperPf(.param .b64 _Z6helperPf_param_0)
{
    .reg .b32 %r<3>;
    ld.shared.f32 %f1, [%r1];
    ret;
}
.visible .entry _Z12tiled_kernelPf(.param .u64 _Z12tiled_kernelPf_param_0)
{
    .shared .align 4 .b8 _ZZ12tiled_kernelPfE4tile[1024];
    st.shared.f32 [%r1], %f1;
    { // callseq 0
    call.uni (retval0), _Z6helperPf, (param0);
    } // callseq 0
    bar.sync 0;
    ret;
}
.visible .entry _Z12naive_kernelPf(.param .u64 _Z12naive_kernelPf_param_0)
{
    ld.global.f32 %f1, [%rd1];
    ret;
}
"""


def test_parse_nm() -> None:
    syms = parse_nm(NM)
    by = {s.name: s for s in syms}
    assert by["exit"].undefined and by["__gmon_start__"].undefined and not by["main"].undefined
    assert "student.o:" not in by and len(syms) == 8


def test_forbidden_hits_global_and_per_lab() -> None:
    hits = forbidden_hits(parse_nm(NM), LABS["03-vector-add"])
    text = "\n".join(hits)
    assert "exit: ends the process" in text and "main: the test harness" in text
    assert "thrust::" in text and "this lab forbids *thrust*" in text
    assert "atexit" not in text and "cudaMalloc" not in text  # nvcc's own registration code uses atexit
    assert forbidden_hits([Symbol("fork@GLIBC_2.2.5", "U")])[0].startswith("fork:")
    assert forbidden_hits([Symbol("std::basic_ofstream<char, std::char_traits<char> >::open(char const*)", "U")]) == [
        "std::basic_ofstream<>::open(char const*): opens, creates or changes files"]
    assert forbidden_hits([Symbol("testing::Test::RecordProperty(std::string const&, int)", "U")])
    assert forbidden_hits([Symbol("my::exit()", "T"), Symbol("exit_code", "T"), Symbol("cube_sum", "T")]) == []


def test_ptx_functions_and_kernel_bodies() -> None:
    funcs = ptx_functions(PTX)
    assert set(funcs) == {"_Z6helperPf", "_Z12tiled_kernelPf", "_Z12naive_kernelPf"}  # vprintf is a declaration
    text, kernels = kernel_ptx(PTX, "tiled_kernel")
    assert kernels == ["_Z12tiled_kernelPf"]
    assert "st.shared" in text and "ld.shared" in text  # the helper it calls counts
    text, _ = kernel_ptx(PTX, "naive_kernel")
    assert "shared" not in text
    assert kernel_ptx(PTX, "missing_kernel") == ("", [])


def test_check_technique_kinds() -> None:
    syms = parse_nm(NM)
    t = Technique(task="t", kind="symbol", pattern="cudaMalloc", message="m")
    assert check_technique(t, syms, None, None).found
    t = Technique(task="t", kind="symbol", pattern="vector_add", message="m")  # defined, not called
    assert not check_technique(t, syms, None, None).found
    t = Technique(task="t", kind="ptx", pattern=r"ld\.shared", message="m", kernel="tiled_kernel")
    assert check_technique(t, None, PTX, None).found
    t = Technique(task="t", kind="ptx", pattern=r"ld\.shared", message="m", kernel="naive_kernel")
    out = check_technique(t, None, PTX, None)
    assert not out.found and "PTX of naive_kernel" in out.message
    t = Technique(task="t", kind="ptx", pattern=r"bar\.sync", message="m", kernel="nope_kernel")
    assert "no kernel named like nope_kernel" in check_technique(t, None, PTX, None).message
    t = Technique(task="t", kind="ptx", pattern="vprintf", message="m")
    assert check_technique(t, None, PTX, None).found
    t = Technique(task="t", kind="source", pattern=r"__syncthreads\(\)", message="m")
    assert not check_technique(t, None, None, "// __syncthreads()\nint x;").found
    assert check_technique(t, None, None, "__syncthreads();").found


def test_command_rewrites() -> None:
    cmd = ["/usr/local/cuda/bin/nvcc", "-forward-unknown-to-host-compiler", "-I/x", "-O3",
           "--generate-code=arch=compute_90,code=[compute_90,sm_90]", "-lineinfo", "-std=c++17", "-rdc=true",
           "-x", "cu", "-c", "/src/a.cu", "-o", "labs/a.o", "-MD", "-MT", "labs/a.o", "-MF", "a.o.d"]
    ptx = to_ptx_command(cmd, Path("/tmp/a.ptx"))
    assert ptx[-4:] == ["-arch=compute_90", "-ptx", "-o", "/tmp/a.ptx"]
    assert "-c" not in ptx and "labs/a.o" not in ptx and "-rdc=true" in ptx and "/src/a.cu" in ptx
    assert not any(a.startswith("--generate-code") for a in ptx) and "-MD" not in ptx
    obj = to_object_command(cmd, Path("/tmp/a.o"))
    assert obj[-2:] == ["-o", "/tmp/a.o"] and "labs/a.o" not in obj and "-c" in obj


def test_compile_db_finds_the_targets_entry(tmp_path: Path) -> None:
    src = tmp_path / "vector_add.cu"
    src.write_text("")
    entries = [
        {"directory": str(tmp_path), "file": str(src), "command": f"nvcc -c {src} -o labs/CMakeFiles/lab03_student.dir/x.o"},
        {"directory": str(tmp_path), "file": str(src), "command": f"nvcc -c {src} -o labs/CMakeFiles/lab03_hidden_student.dir/x.o"},
    ]
    (tmp_path / "compile_commands.json").write_text(json.dumps(entries))
    db = CompileDb.load(tmp_path)
    entry = db.entry(src, "lab03_hidden_student")
    assert entry is entries[1] or entry == entries[1]
    assert db.object_of(entry) == tmp_path / "labs/CMakeFiles/lab03_hidden_student.dir/x.o"
    assert db.entry(src, "lab05_student") is None and CompileDb.load(tmp_path / "none") is None


def _lab_result(points: dict[str, float]) -> LabResult:
    result = LabResult(number=1, name="01-x", title="x", max_score=sum(points.values()))
    result.tasks = [TaskScore(id=k, title=k, points=v, earned=v) for k, v in points.items()]
    result.score = sum(points.values())
    return result


def test_missing_technique_withholds_the_tasks_points() -> None:
    lab = LABS["03-vector-add"]
    result = _lab_result({"host-flow": 20, "pinned": 10})
    result.tasks[1].perf_points, result.tasks[1].perf_earned = 5, 4
    result.score += 4
    t_whole = Technique(task="pinned", kind="symbol", pattern="cudaMallocHost", message="pinned via cudaMallocHost")
    t_part = Technique(task="host-flow", kind="symbol", pattern="cudaFree", message="frees", points=5)
    outcomes = [TechniqueOutcome(t_whole, False, "the undefined symbols"), TechniqueOutcome(t_part, False, "the symbols"),
                TechniqueOutcome(Technique(task="host-flow", kind="symbol", pattern="x", message="found"), True, "s")]
    withheld = apply_techniques(lab, result, outcomes)
    tasks = {t.id: t for t in result.tasks}
    assert withheld == 5 + 14
    assert tasks["pinned"].earned == 0 and tasks["pinned"].perf_earned == 0
    assert tasks["host-flow"].earned == 15 and result.score == 34 - 19
    assert any("technique missing: pinned via cudaMallocHost" in n for n in tasks["pinned"].notes)
    entries = [t for t in result.tests if t.category is Category.TECHNIQUE_MISSING]
    assert [t.name for t in entries] == ["Techniques.pinned", "Techniques.host-flow"]
    assert all(t.status is Status.FAILED and t.task for t in entries)
    assert "Expected /cudaMallocHost/ in the undefined symbols" in entries[0].message


def test_rescoring_ignores_technique_entries() -> None:
    """score_lab never counts a Techniques.* entry as one of a task's tests."""
    lab = LABS["03-vector-add"]
    result = LabResult(number=3, name=lab.name, title=lab.title, max_score=lab.total_points)
    apply_techniques(lab, result, [TechniqueOutcome(lab.techniques[0], False, "s")])
    score_lab(lab, result)
    assert all(t.tests_total == 0 for t in result.tasks)


# --- every reference solution compiles to what its lab.toml declares -----------------------------------

NEEDS_NVCC = pytest.mark.skipif(find_nvcc() is None, reason="nvcc is not installed: the solutions cannot be compiled")


@pytest.fixture(scope="module")
def compiled() -> dict[str, tuple[list, str | None]]:
    """Each solution's symbols and (when its lab checks PTX) its PTX, compiled two at a time."""
    inspector = Inspector(ROOT)

    def one(lab):
        src = lab.solution_dir / lab.student_files[0]
        if not src.is_file():
            return lab.name, None
        syms = inspector.symbols(lab, src, f"{lab.target_prefix}_solution", None)
        ptx = inspector.ptx(lab, src, f"{lab.target_prefix}_solution", None) if any(
            t.kind == "ptx" for t in lab.techniques) else None
        return lab.name, (syms, ptx)

    with ThreadPoolExecutor(max_workers=2) as pool:
        return {name: value for name, value in pool.map(one, LABS.values()) if value is not None}


@NEEDS_NVCC
def test_solutions_use_every_declared_technique(compiled) -> None:
    missing = []
    for name, (syms, ptx) in compiled.items():
        lab = LABS[name]
        text = (lab.solution_dir / lab.student_files[0]).read_text()
        for t in lab.techniques:
            outcome = check_technique(t, syms, ptx, text)
            if not outcome.found:
                missing.append(f"{name}: {outcome.message}")
    assert not missing, "\n".join(missing)


@NEEDS_NVCC
def test_solutions_use_nothing_forbidden(compiled) -> None:
    hits = {name: forbidden_hits(syms, LABS[name]) for name, (syms, _) in compiled.items()}
    assert not any(hits.values()), hits
