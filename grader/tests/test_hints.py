"""Hints come from grader/score/hints.toml, picked by category, message and derived signatures."""

from __future__ import annotations

import pytest

from grader.score import hints
from grader.model.results import Category, LabResult, Status
from grader.model.results import TestResult as TResult


@pytest.mark.parametrize(
    ("category", "message", "expected"),
    [
        (Category.CUDA_ERROR, 'C++ exception with description "CUDA error cudaErrorIllegalAddress (an illegal ...)"', "bounds guard"),
        (Category.CUDA_ERROR, "CUDA error cudaErrorInvalidConfiguration (invalid configuration argument)", "1024"),
        (Category.CUDA_ERROR, "CUDA error cudaErrorNotYetImplemented", "compute-sanitizer"),
        # CUDA 13 reports a launch of 0 blocks as an invalid value (seen on an H200)
        (Category.CUDA_ERROR, 'C++ exception with description "CUDA error cudaErrorInvalidValue (invalid argument) from `kernel launch` at x.cu:30"', "grid of 0 blocks"),
        (Category.CUDA_ERROR, "CUDA error cudaErrorInvalidValue (invalid argument) from `cudaMemcpy(...)`", "byte count"),
        (Category.CUDA_ERROR, "CUDA error cudaErrorInvalidAddressSpace (operation not supported)", "bounds guard"),
        (Category.TIMEOUT, "the test did not finish within 300 s", "__syncthreads() inside a branch"),
        (Category.WRONG_ANSWER, "Actual: false (2 of 257 elements differ (seed 1, exact); mismatches span indices 255..256", "ceil-div"),
        (Category.WRONG_ANSWER, "Actual: false (257 of 257 elements differ (seed 1, exact); mismatches span indices 0..256", "poison"),
        (Category.WRONG_ANSWER, "Actual: false (3 of 257 elements differ (seed 1, exact); mismatches span indices 3..200", "indexing"),
        (Category.WRONG_ANSWER, "Expected: (h) != (nullptr)", "mismatches and the seed"),
        # cudalab/guarded_buffer.cuh, even beside a mismatch: the guard zone is the sharper clue
        (Category.WRONG_ANSWER, "Value of: c.guards_intact(\"c\")\nActual: false (out-of-bounds write: a kernel changed "
                                "memory outside c (257 element(s) of 4 bytes): 4 byte(s) past its end (the first at byte 0 "
                                "past the end). ...)\n2 of 257 elements differ (seed 1, exact); mismatches span indices 255..256",
         "i < n, not i <= n"),
        (Category.CRASH, "the test process was killed by SIGSEGV", "segmentation fault"),
        (Category.LINK_ERROR, "undefined reference to `vector_add(float const*, ...)'", "signature"),
        (Category.NO_GPU, "no CUDA device (no NVIDIA driver)", "no usable NVIDIA GPU"),
    ],
)
def test_hint_for(category, message, expected) -> None:
    assert expected in hints.hint_for(category, message)


def test_no_category_no_hint() -> None:
    assert hints.hint_for(None, "anything") == ""


def test_signatures() -> None:
    assert hints.signatures("1 of 1 elements differ (seed 3004, exact); mismatches span indices 0..0") == {"mismatch:all"}
    assert hints.signatures("1 of 257 elements differ (x); mismatches span indices 256..256") == {"mismatch:tail"}
    assert hints.signatures("2 of 257 elements differ (x); mismatches span indices 250..256") == {"mismatch:some"}
    assert hints.signatures("nothing to see") == set()


def test_every_category_with_failures_has_a_default() -> None:
    loaded = hints.load_hints()
    for category in Category:
        if category is Category.SANITIZER:
            continue
        assert any(h.category is category and h.match is None and h.signature is None for h in loaded), category


def test_parse_errors() -> None:
    with pytest.raises(hints.HintsError):
        hints.parse_hints('[[hint]]\ncategory = "nope"\ntext = "x"\n')
    with pytest.raises(hints.HintsError):
        hints.parse_hints('[[hint]]\ncategory = "crash"\nmatch = "("\ntext = "x"\n')
    with pytest.raises(hints.HintsError):
        hints.parse_hints("not toml [")


def test_annotate_skips_passed_tests() -> None:
    lab = LabResult(1, "01-x", "X", 100, tests=[
        TResult("A.B", Status.PASSED),
        TResult("A.C", Status.FAILED, category=Category.TIMEOUT, message="timeout"),
    ])
    hints.annotate(lab)
    assert lab.tests[0].hint == "" and "infinite loop" in lab.tests[1].hint
