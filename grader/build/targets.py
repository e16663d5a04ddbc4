"""The CMake targets of one lab (cmake/CudaLab.cmake makes them): test objects, the graded object, the
test binaries of the graded code and their reference counterparts."""

from __future__ import annotations

from dataclasses import dataclass

import json
from collections.abc import Sequence
from pathlib import Path

from grader.model.labs import Lab

COMPILED_REFERENCE_DIR = "reference"
COMPILED_REFERENCE_MANIFEST = f"{COMPILED_REFERENCE_DIR}/MANIFEST.json"  # the archs, the toolkit, the sha256s


@dataclass(frozen=True)
class BinarySet:
    """One test binary of a lab and its reference counterpart (the same tests, linked with the solution)."""

    kind: str  # "student" or "hidden"
    target: str  # labNN_student / labNN_hidden_student
    reference: str | None  # labNN_solution / labNN_hidden_solution, when the solution exists
    # The reference is the compiled one a student release ships (reference/NN-slug/): it times, and
    # is never graded itself (solution mode needs the source).
    compiled: bool = False


def has_solution(lab: Lab) -> bool:
    return all((lab.solution_dir / f).is_file() for f in lab.student_files)


def compiled_reference(root: Path, lab: Lab) -> Path:
    """Where a student release holds the lab's reference as a compiled library (it may not exist):
    grader/authoring/release_reference.py writes it, cmake/CudaLab.cmake links the tests against it."""
    return root / COMPILED_REFERENCE_DIR / lab.name / f"lib{lab.target_prefix}_solution_code.so"


def compiled_reference_manifest(root: Path) -> dict:
    """reference/MANIFEST.json of a tree ({} when it has none or it does not parse)."""
    try:
        data = json.loads((root / COMPILED_REFERENCE_MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def archs_text(archs: Sequence[str | int]) -> str:
    return ", ".join(f"sm_{a}" for a in archs)


def has_compiled_reference(lab: Lab) -> bool:
    """A compiled reference and no source: the tree is a student release."""
    return not has_solution(lab) and compiled_reference(lab.root, lab).is_file()


def has_hidden(lab: Lab) -> bool:
    return (lab.solution_dir / f"test_hidden_{lab.topic}.cu").is_file()


def binary_sets(lab: Lab) -> list[BinarySet]:
    prefix = lab.target_prefix
    solution = has_solution(lab)
    compiled = has_compiled_reference(lab)
    sets = [BinarySet("student", f"{prefix}_student", f"{prefix}_solution" if solution or compiled else None,
                      compiled=compiled)]
    if has_hidden(lab):
        sets.append(BinarySet("hidden", f"{prefix}_hidden_student", f"{prefix}_hidden_solution" if solution else None))
    return sets


def build_targets(lab: Lab, mode: str = "student") -> list[str]:
    """Every test binary a grade of this lab builds, in order."""
    targets: list[str] = []
    for bs in binary_sets(lab):
        if mode == "student":
            targets.append(bs.target)
        if bs.reference and (mode == "student" or not bs.compiled):
            targets.append(bs.reference)
    return targets


def test_object_targets(lab: Lab) -> list[str]:
    """The pristine test objects: what they call of the lab file is the contract."""
    return [f"{lab.target_prefix}_tests"] + ([f"{lab.target_prefix}_hidden_tests"] if has_hidden(lab) else [])


def code_prefix(lab: Lab, mode: str) -> str:
    """labNN_student or labNN_solution: the prefix of the graded code's targets."""
    return f"{lab.target_prefix}_{'solution' if mode == 'solution' else 'student'}"


def object_target(lab: Lab, mode: str) -> str:
    """The graded file compiled on its own (labNN_student_object)."""
    return f"{code_prefix(lab, mode)}_object"


def is_student_target(target: str, mode: str) -> bool:
    """Whether the target holds the student's code (built where the submission builds)."""
    return mode == "student" and "_student" in target
