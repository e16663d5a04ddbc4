"""Gradescope's results.json for one submission: python3 ci/gradescope/results.py OUT_DIR RESULTS_JSON.

OUT_DIR is where `grader grade --out` wrote its reports. With a GPU, the grader's own gradescope.json is
the grade and is copied as it is. Without one (Gradescope's autograder machines have none), the tests
that make the grade could not run, so there is no grade to give: the result says "not graded: no GPU"
and reports only what was checked here (the file builds, the lab-file checks, the technique checks),
each as a check without points, with the GPU tests listed as not run. The score is 0 because
Gradescope needs a number; the text says plainly that it is not a grade.

Exits 0 when it wrote RESULTS_JSON, 1 when OUT_DIR holds no readable results.json."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from grader.model.hidden import is_hidden, is_hidden_target  # noqa: E402
from grader.model.labs import Lab, LabError, discover  # noqa: E402
from grader.model.results import Category, LabResult, Results, ResultsError, Status, TestResult  # noqa: E402
from grader.inspect.techniques import TECHNIQUE_SUITE  # noqa: E402

NOT_GRADED = "Not graded: no GPU."
WHY = ("Gradescope's autograder machines have no NVIDIA GPU, so the tests that make your grade could not run "
       "here. Tests that did not run are not failures, and the 0 Gradescope shows is not your grade.")
YOUR_GRADE = ("Your grade comes from your instructor, who runs every test on a GPU machine and publishes the "
              "scores. What was checked here, without a GPU, is listed below.")
_OUTPUT_LIMIT = 8000


def _clip(text: str) -> str:
    return text if len(text) <= _OUTPUT_LIMIT else text[: _OUTPUT_LIMIT - 20].rstrip() + "\n... (cut)"


def _student_builds(lab: LabResult) -> list:
    """The builds of the student's file (the instructor's reference and hidden-test builds left out)."""
    return [b for b in lab.builds if "_student" in b.target and not is_hidden_target(b.target)]


def _refusal(lab: LabResult) -> str:
    """Why the lab file was refused ('' when it was not): the static checks' own message."""
    for t in lab.tests:
        if t.category is Category.FORBIDDEN_CALL and not is_hidden(t) and t.message:
            return t.message
    for b in _student_builds(lab):
        if b.category is Category.FORBIDDEN_CALL:
            return b.message or b.log
    return next((m for m in lab.messages if m.startswith("the lab file was ")), "")


def _entry(lab: LabResult, k: int, what: str, output: str, status: str | None, tag: str) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": f"Lab {lab.number:02d} · {what}",
        "number": f"{lab.number}.{k}",
        "output": _clip(output),
        "tags": [f"lab{lab.number:02d}", tag],
        "visibility": "visible",
    }
    if status is not None:
        entry["status"] = status
    return entry


def _technique_tests(lab: LabResult) -> list[TestResult]:
    return [t for t in lab.tests if t.name.split(".", 1)[0] == TECHNIQUE_SUITE and not is_hidden(t)]


def lab_entries(lab: LabResult, spec: Lab | None) -> tuple[list[dict[str, Any]], str]:
    """The check entries of one lab and its line in the top-level output."""
    entries: list[dict[str, Any]] = []
    builds = _student_builds(lab)
    failed_builds = [b for b in builds if not b.ok]
    refusal = _refusal(lab)
    built = bool(builds) and not failed_builds
    if failed_builds:
        text = "\n\n".join(f"{b.target}: {b.message}\n{b.log}".strip() for b in failed_builds)
        entries.append(_entry(lab, 1, "build", "Your file did not build.\n\n" + text, "failed", "build"))
        line = "did not build"
    elif builds:
        entries.append(_entry(lab, 1, "build", "Your file compiles and links with the lab's tests (CUDA 13).",
                              "passed", "build"))
        line = "builds"
    else:
        line = "not built"
    unchecked = [m for m in lab.messages if "was not checked" in m]
    if refusal:
        text = "Your lab file was refused, so none of its tests could run, with or without a GPU:\n" + refusal
        entries.append(_entry(lab, 2, "lab-file checks", text, "failed", "checks"))
        line += "; the lab file was refused"
    elif unchecked:
        text = "Not checked here: " + "; ".join(unchecked)
        entries.append(_entry(lab, 2, "lab-file checks", text, None, "checks"))
    elif built:
        text = ("Passed: your file includes only headers a lab file may include, and defines and calls only "
                "what a lab file may.")
        entries.append(_entry(lab, 2, "lab-file checks", text, "passed", "checks"))
        line += "; lab-file checks passed"
    techniques = [t for t in (spec.techniques if spec else ())
                  if not any(task.id == t.task and task.hidden for task in spec.tasks)] if spec else []
    missing = _technique_tests(lab)
    if built and not refusal and (techniques or missing):
        if missing:
            text = ("In a graded run these techniques would withhold points:\n"
                    + "\n".join(f"- {t.message}" for t in missing))
            entries.append(_entry(lab, 3, "technique checks", text, "failed", "techniques"))
            line += f"; {len(missing)} technique(s) missing"
        else:
            entries.append(_entry(lab, 3, "technique checks", f"Passed: every technique the lab asks for "
                                  f"({len(techniques)}) is in your code.", "passed", "techniques"))
            line += "; technique checks passed"
    public = [t for t in lab.tests if not is_hidden(t) and t not in missing]
    no_gpu = [t for t in public if t.status in (Status.SKIPPED, Status.NOT_RUN)
              and (t.category is Category.NO_GPU or "no CUDA device" in t.message)]
    if built and not refusal:
        ran = [t for t in public if t not in no_gpu]
        text = (f"{len(no_gpu)} test(s) need an NVIDIA GPU and did not run: this machine has none. "
                "Not run is not failed: your instructor runs them on a GPU machine.")
        entries.append(_entry(lab, 4, "GPU tests: not run (no GPU)", text, None, "not-run"))
        line += f"; {len(no_gpu)} GPU test(s) not run (no GPU)"
        failed = [t for t in ran if t.status is Status.FAILED]
        if failed:
            text = "These tests ran without a GPU and failed:\n" + "\n".join(
                f"- {t.name}: {t.message}" for t in failed)
            entries.append(_entry(lab, 5, "tests that ran without a GPU", text, "failed", "tests"))
    return entries, f"Lab {lab.number:02d} {lab.title}: {line}."


def not_graded(results: Results, labs: dict[str, Lab] | None = None) -> dict[str, Any]:
    """Gradescope's results.json for a run without a GPU: checks without points; the grade is a GPU run's."""
    labs = labs or {}
    run = results.run
    head = [NOT_GRADED, WHY, YOUR_GRADE, ""]
    tests: list[dict[str, Any]] = []
    for lab in results.labs:
        entries, line = lab_entries(lab, labs.get(lab.name))
        tests += entries
        head.append(line)
    if run.gpu_reason:
        head += ["", f"GPU: none ({run.gpu_reason})"]
    if run.toolkit:
        head.append(f"Toolkit: {run.toolkit}")
    return {
        "score": 0,
        "output": _clip("\n".join(head)),
        "output_format": "text",
        "test_output_format": "text",
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "tests": tests,
        "extra_data": {"graded": False, "reason": "no GPU", "gpu_reason": run.gpu_reason,
                       "labs": [lab.name for lab in results.labs], "schema_version": results.schema_version},
    }


def write(out_dir: Path, dest: Path) -> str:
    """Write dest from the grader's reports in out_dir; returns what was written ("grade" or "not graded")."""
    results = Results.load(out_dir / "results.json")
    if results.run.gpu_available and (out_dir / "gradescope.json").is_file():
        shutil.copyfile(out_dir / "gradescope.json", dest)
        return "grade"
    try:
        specs = {lab.name: lab for lab in discover(ROOT)}
    except (LabError, OSError):
        specs = {}
    dest.write_text(json.dumps(not_graded(results, specs), indent=2, ensure_ascii=False) + "\n")
    return "not graded"


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.splitlines()[0], file=sys.stderr)
        return 2
    try:
        what = write(Path(argv[0]), Path(argv[1]))
    except ResultsError as err:
        print(f"results.py: {err}", file=sys.stderr)
        return 1
    print(f"results.py: wrote {argv[1]} ({what})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
