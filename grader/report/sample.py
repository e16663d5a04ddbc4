"""Made-up but realistic results for the report tests and for looking at the reports without a GPU:

    python3 -m grader.report.sample OUT_DIR      # writes every report of sample_results() into OUT_DIR

sample_results(): an H100 run with a passing lab with a progression of perf tests (reduce), a lab
with a 2D wrong answer and its mismatch map (tiled matmul), a lab whose student build failed (vector
add), and a streams lab with a timeline and hostile student output. no_gpu_results(): the same labs
built on a machine without a GPU, every GPU test skipped.
"""

from __future__ import annotations

import sys
from pathlib import Path

from grader.model.results import (
    BuildResult,
    Category,
    LabResult,
    Perf,
    PerfSeries,
    Results,
    RunInfo,
    Status,
    TaskScore,
    TestResult,
)

H100 = {
    "gpu_name": "NVIDIA H100 80GB HBM3",
    "gpu_compute_capability": "9.0",
    "gpu_sm_count": "132",
    "gpu_sm_clock_mhz": "1980",
    "gpu_memory_mib": "81079",
    "gpu_l2_bytes": "52428800",
    "gpu_dram_peak_gbps": "3352",
    "cuda_driver_version": "13000",
    "cuda_runtime_version": "13000",
}
HOSTILE = "expected 3 <script>alert(1)</script> got ]]> &amp; \x07\x00\x1b[31mred\x1b[0m \ud800 end"


def _series(name: str, ms: float, noise: float = 0.4) -> PerfSeries:
    return PerfSeries(name, ms, min_ms=ms * 0.985, mean_ms=ms * 1.004, noise_pct=noise, samples=20)


def _run(gpu: bool) -> RunInfo:
    return RunInfo(
        started="2025-11-22T10:15:03+00:00",
        finished="2025-11-22T10:21:47+00:00",
        mode="student",
        submission="submissions/ada-lovelace",
        commit="bd0eca2f5c1e7a9d3b4c",
        host="gpu-runner-3",
        grader_version="0.1.0",
        toolkit="Cuda compilation tools, release 13.0, V13.0.48",
        gpu=dict(H100) if gpu else {"gpu_name": "none"},
        gpu_available=gpu,
        gpu_reason="" if gpu else "cudaGetDeviceCount: no CUDA-capable device is detected",
        sandboxed=True,
    )


def _reduce_lab() -> LabResult:
    n_bytes = 4.0 * 2**28
    floor = 0.355
    steps = [
        ("interleaved", "Interleaved addressing", 2.10, 1.92),
        ("sequential", "Sequential addressing", 1.21, 1.12),
        ("first-add", "First add during load", 0.64, 0.61),
        ("unrolled", "Unroll the last warp", 0.47, 0.452),
        ("shuffle", "Warp shuffles", 0.402, 0.391),
    ]
    tests: list[TestResult] = []
    tasks: list[TaskScore] = []
    for i, (tid, title, you, ref) in enumerate(steps):
        camel = "".join(p.capitalize() for p in tid.split("-"))
        for n in (1, 255, 256, 257, 1000003, 268435456):
            tests.append(
                TestResult(
                    f"ReduceCorrectness.{camel}/{n}",
                    Status.PASSED,
                    task=tid,
                    binary="student",
                    duration_s=0.004 if n < 10**6 else 0.31,
                )
            )
        points = 5.0 if tid == "shuffle" else 0.0
        perf = Perf(
            metric="GB/s",
            work=n_bytes,
            variants=[_series("impl", you), _series("cub", 0.381, 0.3)],
            baseline="cub",
            label="N = 2^28",
            floor_ms=floor,
            reference=_series("impl", ref),
            points=points,
            earned=points * (0.94 if points else 0.0),
        )
        tests.append(
            TestResult(
                f"ReducePerf.{camel}/268435456",
                Status.PASSED,
                kind="perf",
                task=tid,
                binary="student",
                duration_s=1.8,
                perf=perf,
            )
        )
        tasks.append(
            TaskScore(
                tid,
                title,
                points=19.0 if i < 4 else 19.0,
                earned=19.0,
                tests_passed=6,
                tests_total=6,
                perf_points=points,
                perf_earned=perf.earned,
            )
        )
    score = sum(t.earned + t.perf_earned for t in tasks)
    return LabResult(
        6,
        "06-reduce",
        "Reduce: from a divergent tree to warp shuffles",
        max_score=100.0,
        score=score,
        tests=tests,
        tasks=tasks,
        builds=[BuildResult("lab06_student", True, 38.2), BuildResult("lab06_solution", True, 36.9)],
    )


def _mismatch_map() -> str:
    rows = []
    for r in range(24):
        row = ""
        for c in range(24):
            # the last tile column and every other tile row of the bottom half are wrong
            if c >= 22:
                row += "9"
            elif r >= 12 and (r // 2) % 2 == 0 and c % 4 == 3:
                row += str(3 + (c % 5))
            else:
                row += "0"
        rows.append(row)
    return "/".join(rows)


def _matmul_lab() -> LabResult:
    wrong = TestResult(
        "MatmulCorrectness.Tiled/1000",
        Status.FAILED,
        task="tiled",
        binary="student",
        duration_s=0.05,
        category=Category.WRONG_ANSWER,
        message=(
            "42112 of 1000000 elements differ (seed 5):\n"
            "  [row 0, col 928]: expected 251.734375 got 0 (tolerance 0.0025)\n"
            "  [row 0, col 929]: expected 249.12207 got 0 (tolerance 0.0025)\n"
            "  [row 0, col 930]: expected 248.87012 got nan (tolerance 0.0025)"
        ),
        hint="The last tile of a row runs past the matrix edge: load zeros for out-of-range elements "
        "instead of skipping the load, and guard the final store.",
        properties={
            "mismatch_shape": "1000x1000",
            "mismatch_map": _mismatch_map(),
            "mismatch_map_complete": "true",
        },
    )
    tests = [
        TestResult(
            "MatmulCorrectness.Naive/64", Status.PASSED, task="naive", binary="student", duration_s=0.01
        ),
        TestResult(
            "MatmulCorrectness.Naive/1000", Status.PASSED, task="naive", binary="student", duration_s=0.02
        ),
        TestResult(
            "MatmulCorrectness.Tiled/64", Status.PASSED, task="tiled", binary="student", duration_s=0.01
        ),
        wrong,
        TestResult(
            "MatmulCorrectness.TiledUsesSharedMemory",
            Status.FAILED,
            task="tiled",
            binary="student",
            category=Category.TECHNIQUE_MISSING,
            message="the tiled kernel uses shared memory (no ld.shared / st.shared in matmul_tiled_kernel)",
            hint="Stage each tile of A and B in __shared__ arrays and read them from there.",
        ),
        TestResult(
            "MatmulHidden.Rectangular/r1021_c777",
            Status.FAILED,
            task="tiled",
            binary="hidden",
            category=Category.CRASH,
            message="the test binary died with SIGSEGV (signal 11) while running this test",
        ),
        TestResult(
            "MatmulPerf.Naive/2048",
            Status.PASSED,
            kind="perf",
            task="naive",
            binary="student",
            duration_s=2.2,
            perf=Perf(
                "TFLOP/s",
                2.0 * 2048**3,
                [_series("impl", 3.85, 0.8), _series("cublas", 0.31, 0.5)],
                baseline="cublas",
                label="2048 x 2048",
                reference=_series("impl", 3.61),
                points=0,
            ),
        ),
        TestResult(
            "MatmulPerf.Tiled/2048",
            Status.SKIPPED,
            kind="perf",
            task="tiled",
            binary="student",
            message="matmul_tiled is incorrect at this size: not timed",
            properties={"skip_reason": "matmul_tiled is incorrect at this size: not timed"},
        ),
    ]
    tasks = [
        TaskScore("naive", "Naive matmul, one thread per output", 30.0, 30.0, tests_passed=2, tests_total=2),
        TaskScore(
            "tiled",
            "Shared-memory tiles",
            60.0,
            12.0,
            tests_passed=1,
            tests_total=5,
            perf_points=10.0,
            perf_earned=0.0,
            notes=["technique missing: the tiled kernel uses shared memory"],
        ),
    ]
    return LabResult(
        5,
        "05-tiled-matmul",
        "Tiled matrix multiply",
        max_score=100.0,
        score=42.0,
        tests=tests,
        tasks=tasks,
        builds=[BuildResult("lab05_student", True, 41.0)],
        messages=["1 test crashed the binary; the other tests were re-run one per process."],
    )


_BUILD_LOG = """\
labs/03-vector-add/vector_add.cu(41): error: identifier "ceil_dvi" is undefined
      const int blocks = ceil_dvi(n, threads);
                         ^
labs/03-vector-add/vector_add.cu(58): error: no instance of "std::vector<float>::vector<T>" matches
      std::vector<float> h = std::vector<float><int>(n);
\x1b[01;31m2 errors\x1b[0m detected in the compilation of "labs/03-vector-add/vector_add.cu".
"""


def _vector_add_lab() -> LabResult:
    names = [
        "VectorAddCorrectness.HostFlow/1",
        "VectorAddCorrectness.HostFlow/1000003",
        "VectorAddCorrectness.OneThreadPerElement/257",
        "VectorAddGridStrideCorrectness.AnyGrid/1000003",
    ]
    tasks = ["host-flow", "host-flow", "one-per-thread", "grid-stride"]
    tests = [
        TestResult(
            n,
            Status.NOT_RUN,
            task=t,
            binary="student",
            category=Category.COMPILE_ERROR,
            message="lab03_student did not build",
        )
        for n, t in zip(names, tasks, strict=False)
    ]
    return LabResult(
        3,
        "03-vector-add",
        "Vector add: the whole host flow",
        max_score=100.0,
        score=0.0,
        tests=tests,
        tasks=[
            TaskScore(
                "host-flow", "Host flow: allocate, copy, launch, copy back, free", 20, 0, tests_total=2
            ),
            TaskScore("one-per-thread", "One thread per element with a ceil-div grid", 20, 0, tests_total=1),
            TaskScore("grid-stride", "Grid-stride loop on any grid", 60, 0, tests_total=1),
        ],
        builds=[
            BuildResult(
                "lab03_student",
                False,
                6.3,
                Category.COMPILE_ERROR,
                _BUILD_LOG,
                "vector_add.cu does not compile (2 errors)",
            )
        ],
        messages=["The student file did not compile, so none of this lab's tests ran."],
    )


def _timeline() -> str:
    """Eight chunks through three stages: copy in, kernel, copy out, each stage in order."""
    spans, k_end, d_end = [], 0.0, 0.0
    for chunk in range(8):
        h0, h1 = 0.42 * chunk, 0.42 * (chunk + 1)
        k0 = max(h1, k_end)
        k_end = k0 + 0.31
        d0 = max(k_end, d_end)
        d_end = d0 + 0.40
        spans += [
            f"h2d:{chunk}:{h0:.3f}:{h1:.3f}",
            f"kernel:{chunk}:{k0:.3f}:{k_end:.3f}",
            f"d2h:{chunk}:{d0:.3f}:{d_end:.3f}",
        ]
    return ";".join(spans)


def _streams_lab() -> LabResult:
    perf = Perf(
        "ms",
        0.0,
        [_series("impl", 4.21, 1.1), _series("serial", 9.87, 0.6), _series("one_stream", 6.02)],
        baseline=None,
        label="8 chunks of 32 MiB",
        floor_ms=3.52,
        reference=_series("impl", 4.05),
        points=10.0,
        earned=8.5,
    )
    tests = [
        TestResult(
            "StreamsCorrectness.Pipeline/8", Status.PASSED, task="pipeline", binary="student", duration_s=0.2
        ),
        TestResult(
            "StreamsCorrectness.Events/8",
            Status.FAILED,
            task="events",
            binary="student",
            duration_s=0.1,
            category=Category.WRONG_ANSWER,
            message=HOSTILE,
            hint="Record the event on the stream that did the work <b>before</b> waiting on it.",
        ),
        TestResult(
            "StreamsPerf.Overlap/8",
            Status.PASSED,
            kind="perf",
            task="pipeline",
            binary="student",
            duration_s=3.1,
            perf=perf,
            properties={"timeline": _timeline()},
        ),
    ]
    tasks = [
        TaskScore(
            "pipeline",
            "Pipeline copies and kernels over streams",
            45.0,
            45.0,
            tests_passed=1,
            tests_total=1,
            perf_points=10.0,
            perf_earned=8.5,
        ),
        TaskScore("events", "Order work with events", 45.0, 0.0, tests_passed=0, tests_total=1),
    ]
    return LabResult(
        9,
        "09-streams",
        "Streams: overlap copies and kernels",
        max_score=100.0,
        score=53.5,
        tests=tests,
        tasks=tasks,
        builds=[BuildResult("lab09_student", True, 22.4)],
    )


def sample_results() -> Results:
    return Results(run=_run(gpu=True), labs=[_vector_add_lab(), _matmul_lab(), _reduce_lab(), _streams_lab()])


def no_gpu_results() -> Results:
    """The reduce and matmul labs on a machine without a GPU: built, every GPU test skipped, no score."""
    labs = [_reduce_lab(), _matmul_lab()]
    reason = "no CUDA device (cudaGetDeviceCount: no CUDA-capable device is detected)"
    for lab in labs:
        lab.score = 0.0
        lab.messages = []
        for t in lab.tests:
            t.status, t.category, t.hint, t.perf = Status.SKIPPED, Category.NO_GPU, "", None
            t.message, t.properties = "", {"skip_reason": reason}
        for task in lab.tasks:
            task.earned, task.perf_earned, task.tests_passed, task.notes = 0.0, 0.0, 0, []
    return Results(run=_run(gpu=False), labs=labs)


def main(argv: list[str]) -> int:
    from grader.report import render_console, write_reports

    if len(argv) != 1:
        print("usage: python3 -m grader.report.sample OUT_DIR", file=sys.stderr)
        return 2
    results = sample_results()
    for fmt, path in write_reports(results, Path(argv[0])).items():
        print(f"{fmt:>10}: {path}")
    render_console(results, sys.stdout, color=sys.stdout.isatty())
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
