"""Techniques: per-kernel PTX with comments stripped, calls from reachable code, and the points a missing
technique withholds. Every reference solution's own techniques are checked against its compiled object
in test_objcheck.py."""

from __future__ import annotations

from pathlib import Path

from grader.inspect.elf import Instruction, ObjectFile, Relocation, Section, Symbol
from grader.model.labs import Technique, discover
from grader.model.results import Category, LabResult, Status, TaskScore
from grader.score.penalties import apply_techniques
from grader.score.scoring import score_lab
from grader.inspect.techniques import (
    TechniqueOutcome,
    called_names,
    check_technique,
    kernel_ptx,
    ptx_functions,
    strip_ptx_comments,
)

ROOT = Path(__file__).resolve().parents[2]
LABS = {lab.name: lab for lab in discover(ROOT)}

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
.func (.param .b32 func_retval0) _Z6unusedPf(.param .b64 _Z6unusedPf_param_0)
{
    shfl.sync.down.b32 %r1, %r2, 1, 31, -1;
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
    // begin inline asm
    // shfl.sync.down.b32 st.shared
    // end inline asm
    /* vote.sync.ballot */
    ld.global.f32 %f1, [%rd1];
    ret;
}
"""


def test_ptx_functions_and_kernel_bodies() -> None:
    funcs = ptx_functions(PTX)
    assert set(funcs) == {"_Z6helperPf", "_Z6unusedPf", "_Z12tiled_kernelPf", "_Z12naive_kernelPf"}  # vprintf: declared
    text, kernels = kernel_ptx(PTX, "tiled_kernel")
    assert kernels == ["_Z12tiled_kernelPf"]
    assert "st.shared" in text and "ld.shared" in text  # the helper it calls counts
    assert "shfl" not in text  # a device function nobody calls does not
    text, _ = kernel_ptx(PTX, "naive_kernel")
    assert "shared" not in text and "shfl" not in text and "vote" not in text  # comments prove nothing
    assert kernel_ptx(PTX, "missing_kernel") == ("", [])


def test_ptx_comments_are_stripped_lines_kept() -> None:
    assert strip_ptx_comments("a // b\nc /* d\ne */ f") == "a \nc \n f"


def test_check_ptx_technique() -> None:
    t = Technique(task="t", kind="ptx", pattern=r"ld\.shared", message="m", kernel="tiled_kernel")
    assert check_technique(t, None, PTX).found
    t = Technique(task="t", kind="ptx", pattern=r"shfl\.sync", message="m", kernel="naive_kernel")
    out = check_technique(t, None, PTX)
    assert not out.found and "PTX of naive_kernel" in out.message
    t = Technique(task="t", kind="ptx", pattern=r"bar\.sync", message="m", kernel="nope_kernel")
    assert "no kernel named like nope_kernel" in check_technique(t, None, PTX).message


def _object() -> ObjectFile:
    """A hand-made object: vector_add_host (the contract) calls a static helper that calls cudaMallocHost;
    a static function nothing calls would call cudaHostAlloc; a table holds &cudaHostRegister."""
    text = Section(1, ".text", "PROGBITS", "AX", 0x100)
    table = Section(2, ".data.rel.ro", "PROGBITS", "WA", 8)
    symbols = [
        Symbol("_Z15vector_add_hostv", "GLOBAL", "FUNC", "DEFAULT", ".text", 0x00, 0x20),
        Symbol("_ZL6helperv", "LOCAL", "FUNC", "DEFAULT", ".text", 0x20, 0x20),
        Symbol("_ZL4deadv", "LOCAL", "FUNC", "DEFAULT", ".text", 0x40, 0x20),
        Symbol("_ZL5table", "LOCAL", "OBJECT", "DEFAULT", ".data.rel.ro", 0, 8),
        Symbol("cudaMallocHost", "GLOBAL", "NOTYPE", "DEFAULT", "UND", 0, 0),
        Symbol("cudaHostAlloc", "GLOBAL", "NOTYPE", "DEFAULT", "UND", 0, 0),
        Symbol("cudaHostRegister", "GLOBAL", "NOTYPE", "DEFAULT", "UND", 0, 0),
    ]
    instructions = [
        Instruction(".text", 0x00, "call", "25 <_ZL6helperv+0x5>", 0x20),
        Instruction(".text", 0x05, "ret", ""),
        Instruction(".text", 0x20, "call", "25 <x>", 0x25),
        Instruction(".text", 0x25, "ret", ""),
        Instruction(".text", 0x40, "call", "45 <x>", 0x45),
        Instruction(".text", 0x45, "ret", ""),
    ]
    relocations = [
        Relocation(".text", 0x21, "R_X86_64_PLT32", "cudaMallocHost", -4),
        Relocation(".text", 0x41, "R_X86_64_PLT32", "cudaHostAlloc", -4),
        Relocation(".data.rel.ro", 0, "R_X86_64_64", "cudaHostRegister", 0),
    ]
    return ObjectFile(Path("x.o"), [text, table], symbols, relocations, instructions)


def test_symbol_technique_counts_only_calls_from_reachable_code() -> None:
    calls = called_names(_object(), {"_Z15vector_add_hostv"})
    assert "cudaMallocHost" in calls
    assert "cudaHostAlloc" not in calls  # only dead code calls it
    assert "cudaHostRegister" not in calls  # only a table holds its address
    t = Technique(task="t", kind="symbol", pattern="cudaMallocHost|cudaHostAlloc|cudaHostRegister", message="m")
    assert check_technique(t, calls, None).found
    t = Technique(task="t", kind="symbol", pattern="cudaMalloc", message="m")  # matches whole names only
    assert not check_technique(t, calls, None).found
    assert called_names(_object(), set()) == set()  # nothing is reachable without the contract


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
    assert any("pinned via cudaMallocHost" in n and "withheld" in n for n in tasks["pinned"].notes)
    entries = [t for t in result.tests if t.category is Category.TECHNIQUE_MISSING]
    assert [t.name for t in entries] == ["Techniques.pinned", "Techniques.host-flow"]
    assert all(t.status is Status.FAILED and t.task for t in entries)
    assert "Expected /cudaMallocHost/ in the undefined symbols" in entries[0].message
    assert not entries[0].message.startswith("technique missing")  # the category says that already


def test_rescoring_ignores_technique_entries() -> None:
    """score_lab never counts a Techniques.* entry as one of a task's tests."""
    lab = LABS["03-vector-add"]
    result = LabResult(number=3, name=lab.name, title=lab.title, max_score=lab.total_points)
    apply_techniques(lab, result, [TechniqueOutcome(lab.techniques[0], False, "s")])
    score_lab(lab, result)
    assert all(t.tests_total == 0 for t in result.tasks)
