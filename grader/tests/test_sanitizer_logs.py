"""compute-sanitizer's reports parsed into findings (grader/execute/sanitizer.py parse_log): logs recorded
on an H200 with compute-sanitizer 2025.3, older formats, and findings inside inlined functions."""

from __future__ import annotations

from pathlib import Path

import pytest

from grader.execute import sanitizer_log
from grader.model.results import Category, LabResult
from grader.model.results import TestResult as TResult
from grader.score import hints
from grader.score.hints import hint_for
from grader.tests.gtest_failures import sanitizer_result

LOGS = Path(__file__).resolve().parent / "adversarial" / "sanitizer_logs"


def test_memcheck_log() -> None:
    findings, total = sanitizer_log.parse_log((LOGS / "memcheck_oob.log").read_text(), "memcheck")
    assert total == 256
    assert len(findings) == 1
    f = findings[0]
    assert f.what == "Invalid __global__ write of size 4 bytes" and f.kernel == "oob_kernel" and f.location == "probe.cu:4"
    assert f.count == 2 and "oob_kernel at probe.cu:4 (2 times)" in f.line()
    # Where the first access went, in bytes from the allocation's start (the tool's "1 bytes after" is
    # the first byte past the end), and who made it.
    assert f.access == "the first at byte 16,384 of a 16,384-byte allocation, by thread (0,0,0) of block (16,0,0)"


def _oob(after_or_before: str, n: str, size: str) -> str:
    return (LOGS / "memcheck_oob.log").read_text().replace(
        "is 1 bytes after the nearest allocation at 0x7f2440804000 of size 16,384 bytes",
        f"is {n} bytes {after_or_before} the nearest allocation at 0x7f2440804000 of size {size} bytes", 1)


def _hinted(log: str) -> TResult:
    """The memcheck result the stage makes of this log, given its hint as the score stage does."""
    result = sanitizer_result("memcheck", log)
    lab = LabResult(number=3, name="03-x", title="x", max_score=100, tests=[result])
    hints.annotate(lab)
    return result


@pytest.mark.parametrize("log, access, oob, advice, causes", [
    # The last block's threads one element past n: the guard.
    (_oob("after", "1", "16,384"), "the first at byte 16,384 of a 16,384-byte", "just-past-end", "just past the end",
     {"out-of-bounds", "guard"}),
    (_oob("after", "16,384", "4,000"), "the first at byte 20,383 of a 4,000-byte", "just-past-end",
     "just past the end", {"out-of-bounds", "guard"}),
    # Further than one block can run past n: an index scaled wrong, not a guard.
    (_oob("after", "16,385", "4,000"), "the first at byte 20,384 of a 4,000-byte", "far-past-end", "far past the end",
     {"out-of-bounds", "bad-argument"}),
    (_oob("after", "1,048,577", "16,384"), "the first at byte 1,064,960 of a 16,384-byte", "far-past-end",
     "a guard will not fix", {"out-of-bounds", "bad-argument"}),
    # Before the start: a negative index.
    (_oob("before", "4", "16,384"), "the first 4 bytes before a 16,384-byte", "before-start", "before the start",
     {"out-of-bounds"}),
])
def test_where_an_out_of_bounds_access_went_picks_the_advice(log: str, access: str, oob: str, advice: str,
                                                              causes: set[str]) -> None:
    """Issue 25: every memcheck finding got "add a bounds guard ... and check every index", whatever the
    bug. How far past its allocation the first access went tells a guard (the last block's threads just
    past n) from an index scaled wrong (far past), and a negative index (before the start). The finding
    says it in words and records it (sanitizer_oob), and the hints read the record, not the words."""
    from grader.score.hints import load_hints

    findings, _ = sanitizer_log.parse_log(log, "memcheck")
    assert access in findings[0].line() and findings[0].oob == oob
    result = _hinted(log)
    assert result.properties["sanitizer_oob"] == oob
    hint = next(h for h in load_hints() if h.fits(Category.SANITIZER, result.message, {f"oob:{oob}"}))
    assert advice in hint.text and set(hint.causes) == causes
    assert result.hint == hint.text


def test_a_finding_without_the_allocation_keeps_the_general_advice() -> None:
    """A log without the allocation line (an older tool, a __shared__ access) says nothing of where the
    access went, and the advice stays the general one (a guard and every index)."""
    log = _oob("after", "1", "16,384").replace(
        "=========     and is 1 bytes after the nearest allocation at 0x7f2440804000 of size 16,384 bytes\n", "")
    findings, _ = sanitizer_log.parse_log(log, "memcheck")
    assert findings[0].access == "by thread (0,0,0) of block (16,0,0)" and findings[0].oob == ""
    result = _hinted(log)
    assert "sanitizer_oob" not in result.properties
    assert "add a bounds guard (if (i < n)) and check every index" in result.hint


# A write inside an inlined libcu++ atomic (lab 07's look-back publishing a status word past its scratch,
# the H200 gate's dlb-scratch-cleared-once), in the format of compute-sanitizer's inlined device frames.
INLINED = """========= COMPUTE-SANITIZER
========= Invalid __global__ write of size 8 bytes
=========     at void cuda::std::__4::__cuda_atomic_store<unsigned long>(volatile unsigned long *, unsigned long)+0x50 in /usr/local/cuda/include/cuda/std/__atomic/functions/cuda_ptx_generated.h:1009
=========     by thread (0,0,0) in block (3,0,0)
=========     Access to 0x7f0c4d000410 is out of bounds
=========     and is 10 bytes after the nearest allocation at 0x7f0c4d000000 of size 1,031 bytes
=========         Device Frame: cuda::std::__4::__atomic_ref_base<unsigned long>::store(unsigned long, cuda::std::__4::memory_order) const+0x50 in /usr/local/cuda/include/cuda/std/__atomic/types/base.h:88
=========         Device Frame: void decoupled_scan_kernel<false, 256, 4>(const int *, int *, unsigned long, unsigned long *, unsigned int *)+0x50 in /tmp/cudalab-stage-x/labs/07-scan/scan.cu:512
=========     Saved host backtrace up to driver entry point at kernel launch time
=========         Host Frame: scan_decoupled(const int *, int *, unsigned long, void *) [0x1234] in liblab07_student_code.so
=========
========= ERROR SUMMARY: 1 error
"""


def test_a_finding_inside_an_inlined_function_is_the_kernels_at_the_students_line() -> None:
    """Issue 25: it named cuda_ptx_generated.h:1009 and a libcu++ function no task owns, so the report's
    first entry pointed nowhere and the finding cost no task."""
    findings, total = sanitizer_log.parse_log(INLINED, "memcheck", ["scan.cu"])
    assert total == 1 and len(findings) == 1
    f = findings[0]
    assert f.kernel == "decoupled_scan_kernel<false, 256, 4>" and f.location == "scan.cu:512"
    assert f.detail == "inside cuda::std::__4::__cuda_atomic_store<unsigned long> (inlined)"
    assert f.line().startswith("Invalid __global__ write of size 8 bytes in decoupled_scan_kernel<false, 256, 4> at "
                               "scan.cu:512; inside cuda::std::")
    # Without the graded file's name the innermost frame's line stays, but the kernel is still the kernel.
    bare, _ = sanitizer_log.parse_log(INLINED, "memcheck")
    assert bare[0].kernel == "decoupled_scan_kernel<false, 256, 4>" and bare[0].location == "cuda_ptx_generated.h:1009"
    # A helper of the student's own, inlined into the kernel: its line, the kernel, the helper named.
    helper = INLINED.replace("/usr/local/cuda/include/cuda/std/__atomic/functions/cuda_ptx_generated.h:1009",
                             "/tmp/s/labs/07-scan/scan.cu:470").replace(
        "void cuda::std::__4::__cuda_atomic_store<unsigned long>(volatile unsigned long *, unsigned long)",
        "publish(StatusWord *, unsigned long)")
    mine, _ = sanitizer_log.parse_log(helper, "memcheck", ["scan.cu"])
    assert (mine[0].kernel, mine[0].location, mine[0].detail) == (
        "decoupled_scan_kernel<false, 256, 4>", "scan.cu:470", "inside publish (inlined)")
    # Host frames never count as device frames.
    assert "scan_decoupled" not in f.line() and "liblab07" not in f.line()


@pytest.mark.parametrize("log, severity, lines", [
    ("racecheck_warning.log", "warning", ("probe.cu:8", "probe.cu:10")),
    ("racecheck_error.log", "error", ("probe.cu:15", "probe.cu:17")),
])
def test_racecheck_logs(log: str, severity: str, lines: tuple[str, str]) -> None:
    findings, total = sanitizer_log.parse_log((LOGS / log).read_text(), "racecheck")
    assert total == 1 and len(findings) == 1
    f = findings[0]
    assert f"race ({severity})" in f.what and lines[0] in f.what and lines[1] in f.what
    assert f.kernel.endswith("race_kernel") and f.detail == "16384 hazards"
    assert "missing barrier" not in f.line() and "__syncthreads" in hint_for(Category.SANITIZER, f.line())


def test_initcheck_log() -> None:
    findings, total = sanitizer_log.parse_log((LOGS / "initcheck.log").read_text(), "initcheck")
    assert total == 4096 and findings[0].kernel == "uninit_kernel" and findings[0].what.startswith("Uninitialized")
    assert "never written" in hint_for(Category.SANITIZER, findings[0].line())


def test_synccheck_and_older_formats() -> None:
    log = """========= COMPUTE-SANITIZER
========= Barrier error detected. Divergent thread(s) in warp
=========     at 0x00000130 in /home/s/labs/06-reduce/reduce.cu:41:reduce_kernel(float const*, float*, int)
=========     by thread (3,0,0) in block (0,0,0)
=========
========= ERROR SUMMARY: 1 error
"""
    findings, total = sanitizer_log.parse_log(log, "synccheck")
    assert total == 1 and findings[0].kernel == "reduce_kernel" and findings[0].location == "reduce.cu:41"
    assert "__syncthreads() must not sit inside a branch" in hint_for(Category.SANITIZER, findings[0].line())
    clean = "========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n"
    assert sanitizer_log.parse_log(clean, "memcheck") == ([], 0)


def test_program_output_is_not_a_finding() -> None:
    """Only lines of the tool's own log count: the program cannot print a finding or a summary."""
    assert sanitizer_log.parse_log("Invalid __global__ write\nERROR SUMMARY: 0 errors\n", "memcheck") == ([], None)


@pytest.mark.parametrize("where, name", [
    ("vector_add_kernel(const float *, const float *, float *, int)+0x90", "vector_add_kernel"),
    ("void fast::matmul_kernel<(bool)1>(const float *, float *)+0x1c0", "fast::matmul_kernel<(bool)1>"),
    ("kernel+0x10", "kernel"),
])
def test_kernel_names(where: str, name: str) -> None:
    assert sanitizer_log.kernel_name(where) == name


def test_two_writes_on_one_line_are_an_index_collision_not_a_missing_barrier() -> None:
    """A race between two writes at the same line: two threads store to one slot, which a barrier would
    only hide; a write racing a read elsewhere keeps the barrier advice."""
    same = ("Shared-memory race (error) between a write at k.cu:72 and a write at k.cu:72 in k; 4 hazards")
    other = ("Shared-memory race (error) between a write at k.cu:72 and a read at k.cu:75 in k; 4 hazards")
    near = ("Shared-memory race (error) between a write at k.cu:72 and a write at k.cu:720 in k; 4 hazards")
    assert "does not tell the writers apart" in hint_for(Category.SANITIZER, same)
    assert "__syncthreads()" in hint_for(Category.SANITIZER, other)
    assert "does not tell the writers apart" not in hint_for(Category.SANITIZER, near)
