"""Stands in for `python3 -m grader grade LAB... --submission DIR --out OUT` where no GPU and no compiler
are wanted: it writes the results.json and gradescope.json the real grader writes for such a run, from
the real result model and renderer, and exits with the grader's code.

Per lab, from the staged file DIR/labs/NN-slug/<file>: "#error" in it is a compile error, "fopen" a
refused lab file, anything else builds; a file without "cudaMalloc" misses a technique. Without
FAKE_GPU=1 there is no GPU: every test skips as the test binaries do ("no CUDA device"), and the exit
code is 4. With FAKE_GPU=1 every test passes and the exit code is 0. One hidden test per lab is there
as the hidden binary would report it, so that what reaches students can be checked for its name."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from grader.model.labs import discover  # noqa: E402
from grader.report.gradescope import render_gradescope  # noqa: E402
from grader.model.results import BuildResult, Category, LabResult, Results, RunInfo, Status, TestResult  # noqa: E402

NO_GPU = "no CUDA device (no NVIDIA driver is installed on this machine)"
HIDDEN_NAME = "SecretHiddenCorrectness.OddGrid/7"
REFUSAL = ("the lab file was refused: fopen: reads, writes or changes files or memory mappings: a lab file works on "
           "the buffers the tests hand it and returns its results")


def lab_result(lab, source: str, gpu: bool) -> LabResult:
    result = LabResult(number=lab.number, name=lab.name, title=lab.title, max_score=lab.total_points)
    names = [f"{lab.slug.title().replace('-', '')}Correctness.Case/{i}" for i in range(3)]
    if "#error" in source:
        why = "compile error: the file's own #error"
        result.builds.append(BuildResult(f"{lab.target_prefix}_student_object", False, category=Category.COMPILE_ERROR,
                                         message=why, log=f"labs/{lab.name}/x.cu(1): error: {why}"))
        tests = [TestResult(n, Status.NOT_RUN, category=Category.COMPILE_ERROR, binary="student",
                            message=f"{lab.target_prefix}_student_object did not build ({why})") for n in names]
        result.messages.append(f"{lab.target_prefix}_student did not build: {why}")
    elif "fopen" in source:
        result.builds.append(BuildResult(f"{lab.target_prefix}_student_object", True))
        tests = [TestResult(n, Status.NOT_RUN, category=Category.FORBIDDEN_CALL, binary="student", message=REFUSAL)
                 for n in names]
        result.messages.append(REFUSAL)
    else:
        result.builds += [BuildResult(f"{lab.target_prefix}_student_object", True),
                          BuildResult(f"{lab.target_prefix}_student", True)]
        status, category, message = ((Status.PASSED, None, "") if gpu else (Status.SKIPPED, Category.NO_GPU, NO_GPU))
        tests = [TestResult(n, status, category=category, binary="student", message=message) for n in names]
        tests.append(TestResult(HIDDEN_NAME, status, category=category, binary="hidden", message=message,
                                visibility="hidden"))
        if "cudaMalloc" not in source:
            tests.append(TestResult("Techniques.host-flow", Status.FAILED, binary="student", task="host-flow",
                                    category=Category.TECHNIQUE_MISSING,
                                    message="the host flow allocates device memory with cudaMalloc "
                                            "(the task's points withheld)"))
        if gpu:
            result.score = lab.total_points
    result.tests = tests
    return result


def main(argv: list[str]) -> int:
    if argv[:3] != ["-m", "grader", "grade"]:
        print(f"fake_grader: only `-m grader grade` is faked, not {argv[:3]}", file=sys.stderr)
        return 2
    p = argparse.ArgumentParser()
    p.add_argument("labs", nargs="*")
    p.add_argument("--submission", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--preset")
    p.add_argument("-q", action="store_true")
    args = p.parse_args(argv[3:])
    gpu = os.environ.get("FAKE_GPU") == "1"
    labs = {lab.name: lab for lab in discover(ROOT)}
    run = RunInfo(started="2026-01-01T00:00:00+00:00", finished="2026-01-01T00:00:09+00:00", mode="student",
                  submission=str(args.submission), toolkit="Build cuda_13.0.r13.0/compiler.0_0", gpu_available=gpu,
                  gpu_reason="" if gpu else "no NVIDIA driver is installed on this machine")
    results = Results(run=run)
    for name in args.labs:
        lab = labs[name]
        staged = args.submission / "labs" / lab.name / lab.student_files[0]
        source = staged.read_text() if staged.is_file() else ""
        results.labs.append(lab_result(lab, source, gpu))
    args.out.mkdir(parents=True, exist_ok=True)
    results.save(args.out / "results.json")
    (args.out / "gradescope.json").write_text(json.dumps(render_gradescope(results), indent=2))
    print(f"fake grader: {len(results.labs)} lab(s), {'a GPU' if gpu else 'no GPU'}")
    return 0 if gpu else 4


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
