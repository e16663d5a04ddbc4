"""Parsing recorded gtest JSON (real runs of lab 03 on an H200 and on a machine without a GPU)."""

from __future__ import annotations

import json

import pytest

from grader.execute import gtest
from grader.model.results import Category, Status

from grader.tests.conftest import FIXTURES


def load(name: str, binary: str = "student") -> gtest.ParsedRun:
    return gtest.load_report(FIXTURES / name, binary)


def test_passing_run_with_perf_properties() -> None:
    run = load("lab03_solution_pass.json", "solution")
    assert len(run.tests) == 72
    assert all(t.status is Status.PASSED for t in run.tests)
    assert run.properties["gpu_name"] == "NVIDIA H200"
    assert run.properties["gpu_compute_capability"] == "9.0"
    assert "testsuites" not in run.properties and "tests" not in run.properties

    perf = {t.name: t for t in run.tests if t.kind == "perf"}
    assert set(perf) == {
        "VectorAddExtrasPerf.AosVersusSoa",
        "VectorAddExtrasPerf.PinnedVersusPageableUpload",
        "VectorAddPerf.Fast/16777216",
        "VectorAddPerf.Fast/268435456",
    }
    big = perf["VectorAddPerf.Fast/268435456"].perf
    assert big is not None
    assert big.metric == "GB/s" and big.work == 3221225472
    assert [v.name for v in big.variants] == ["impl", "thrust", "memcpy", "one_per_thread"]
    assert big.baseline == "thrust" and big.label == "N = 2^28"
    assert big.floor_ms == pytest.approx(0.7803839743)
    assert big.impl is not None and big.impl.median_ms == pytest.approx(0.740447998) and big.impl.samples == 10
    assert big.ratio_to_baseline == pytest.approx(0.7365919948 / 0.740447998)
    # A perf test without a baseline or floor.
    aos = perf["VectorAddExtrasPerf.AosVersusSoa"].perf
    assert aos is not None and aos.baseline is None and aos.floor_ms is None
    # Correctness tests have no Perf, and keep their properties.
    correctness = next(t for t in run.tests if t.kind == "correctness")
    assert correctness.perf is None and correctness.binary == "solution"
    assert perf["VectorAddPerf.Fast/16777216"].properties["perf_label"] == "N = 2^24"


def test_failing_run_has_messages_and_categories() -> None:
    run = load("lab03_student_fail.json")
    by_name = {t.name: t for t in run.tests}
    host = by_name["VectorAddCorrectness.HostFlow/1"]
    assert host.status is Status.FAILED
    assert host.category is Category.WRONG_ANSWER
    assert "1 of 1 elements differ" in host.message
    assert host.message.startswith("Value of: AllEqual(")  # the location moved to the end
    assert host.message.endswith("(at test_vector_add.cu:64)")
    pinned = by_name["VectorAddPinnedCorrectness.AllocationIsPageLocked"]
    assert pinned.status is Status.FAILED and "allocate_pinned returned nullptr" in pinned.message
    skipped = by_name["VectorAddPerf.Fast/268435456"]
    assert skipped.status is Status.SKIPPED
    assert skipped.message == "vector_add_fast is incorrect at this size: not timed"
    assert skipped.category is None and skipped.perf is None


def test_no_gpu_run_is_skipped_with_reason() -> None:
    run = load("lab03_student_no_gpu.json")
    assert len(run.tests) == 72
    assert all(t.status is Status.SKIPPED for t in run.tests)
    assert all(t.category is Category.NO_GPU for t in run.tests)
    assert run.tests[0].message.startswith("no CUDA device (")
    assert run.properties["gpu_name"] == "none"
    assert run.properties["gpu_unavailable_reason"]


def test_truncated_file_is_an_error() -> None:
    with pytest.raises(gtest.GtestError, match="unreadable"):
        load("lab03_truncated.json")


def test_missing_file_is_an_error(tmp_path) -> None:
    with pytest.raises(gtest.GtestError, match="no results file"):
        gtest.load_report(tmp_path / "nope.json")


@pytest.mark.parametrize("data", [[], {"tests": 3}, {"testsuites": [3]}, {"testsuites": [{"testsuite": ["x"]}]}])
def test_wrong_shape_is_an_error(data) -> None:
    with pytest.raises(gtest.GtestError):
        gtest.parse_report(data)


def test_cuda_error_category_and_disabled_tests() -> None:
    data = {
        "testsuites": [
            {
                "name": "ReduceCorrectness",
                "testsuite": [
                    {"name": "A", "status": "RUN", "result": "COMPLETED", "time": "0.5s",
                     "failures": [{"failure": 'C++ exception with description "CUDA error cudaErrorIllegalAddress (x)"', "type": ""}]},
                    {"name": "B", "status": "RUN", "result": "COMPLETED", "time": "0s",
                     "failures": [{"failure": "first", "type": ""}, {"failure": "second", "type": ""}]},
                    {"name": "DISABLED_C", "status": "NOTRUN", "result": "SUPPRESSED"},
                    {"name": "D", "status": "RUN", "result": "SKIPPED", "skipped": [{"message": "newer gtest keeps it here"}]},
                ],
            }
        ]
    }
    run = gtest.parse_report(data)
    a, b, d = run.tests
    assert a.category is Category.CUDA_ERROR and a.duration_s == 0.5
    assert gtest.cuda_error_name(a.message) == "cudaErrorIllegalAddress"
    assert b.message == "first\n\nsecond" and b.category is Category.WRONG_ANSWER
    assert d.status is Status.SKIPPED and d.message == "newer gtest keeps it here"


def test_clean_failure() -> None:
    assert gtest.clean_failure("/a/b/test_x.cu:12\nExpected: 1\nActual: 2") == "Expected: 1\nActual: 2\n(at test_x.cu:12)"
    assert gtest.clean_failure('unknown file\nC++ exception with description "x"') == 'C++ exception with description "x"'
    assert gtest.clean_failure("just one line") == "just one line"
    assert gtest.clean_failure("no location here\nsecond") == "no location here\nsecond"


def test_perf_suite_names() -> None:
    assert gtest.is_perf_suite("ReducePerf")
    assert gtest.is_perf_suite("Prefix/ReducePerf")
    assert gtest.is_perf_suite("ReducePerf/0")
    assert not gtest.is_perf_suite("ReduceCorrectness")
    assert not gtest.is_perf_suite("PerfCorrectness")


def test_parse_test_list() -> None:
    text = (
        "VectorAddMemoryCorrectness.\n  HostFlowFreesEverything\nVectorAddCorrectness.\n"
        "  HostFlow/1  # GetParam() = 1\n  HostFlow/257  # GetParam() = 257\n"
        "VectorAddGridStrideCorrectness.\n  CoversEveryElement/n1_grid1_block32  # GetParam() = 16-byte object <01-00>\n"
    )
    assert gtest.parse_test_list(text) == [
        "VectorAddMemoryCorrectness.HostFlowFreesEverything",
        "VectorAddCorrectness.HostFlow/1",
        "VectorAddCorrectness.HostFlow/257",
        "VectorAddGridStrideCorrectness.CoversEveryElement/n1_grid1_block32",
    ]


def test_filter_matches() -> None:
    assert gtest.filter_matches("VectorAddPerf.Fast/1", "*Perf.*")
    assert not gtest.filter_matches("VectorAddCorrectness.Fast/1", "*Perf.*")
    assert gtest.filter_matches("A.B", None)
    assert gtest.filter_matches("A.B", "X.*:A.*")
    assert not gtest.filter_matches("A.B", "*-A.B")
    assert gtest.filter_matches("A.C", "*-A.B")


def test_fixture_files_are_gtest_json() -> None:
    """The recorded fixtures stay what a real lab 03 binary writes (guards accidental edits)."""
    for name in ("lab03_solution_pass.json", "lab03_student_fail.json", "lab03_student_no_gpu.json"):
        data = json.loads((FIXTURES / name).read_text())
        assert data["tests"] == 72 and data["name"] == "AllTests"


def test_reference_perf_only_run() -> None:
    """What `--gtest_filter=*Perf.*` of the solution writes: the reference timings, nothing else."""
    run = load("lab03_solution_perf_only.json", "solution")
    assert len(run.tests) == 4 and all(t.kind == "perf" and t.perf is not None for t in run.tests)
    assert all(t.perf.impl is not None and t.perf.impl.median_ms > 0 for t in run.tests if t.perf)
