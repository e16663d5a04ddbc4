"""The build stages of a grade. Each takes a list of labs, so that a batch's slot builds a student's labs
side by side, while `grade` builds one lab at a time and shows its results as they come:

  test objects  the pristine tests compiled (what they call of the lab file is the contract), in the
                pristine tree, which a submission's build links (build/submission.py)
  object        the graded file compiled on its own, within a time and memory limit
  binaries      the test binaries of the graded code, linked
  references    the reference's binaries, in the pristine tree (a batch builds them once)

With CMake several targets build in one `cmake --build --target A B ...` and compile side by side; when
that fails, target by target, for each one's own log. Builders says where each target builds.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from grader.build.cmake import Builder, CMakeBuilder
from grader.build.targets import binary_sets, is_student_target, object_target, test_object_targets
from grader.model.labs import Lab
from grader.model.progress import Progress
from grader.model.results import BuildResult, Category
from grader.model.text import truncate

COMPILE_TIMEOUT_S = 120.0  # a student file that takes longer to compile is a compile error
COMPILE_MEMORY_MIB = 8192.0  # virtual memory of each compiler process


@dataclass(frozen=True)
class Builders:
    """Where a grade's targets build: the pristine tree (references, the health probe) and the graded
    code's folder (a submission's or a batch slot's; the pristine tree itself otherwise). build=False
    takes the binaries already built and builds nothing."""

    main: Builder
    code: Builder
    mode: str = "student"
    build: bool = True
    jobs: int = 1  # targets compiled side by side
    compile_timeout_s: float = COMPILE_TIMEOUT_S  # the graded object's compile: a longer one is a compile error
    compile_memory_mib: float = COMPILE_MEMORY_MIB  # virtual memory of each compiler process
    main_built: bool = False  # the pristine tree's targets are built already (a batch builds them first)

    def for_target(self, target: str) -> Builder:
        return self.code if is_student_target(target, self.mode) else self.main

    @property
    def code_dir(self) -> Path | None:
        """The graded code's CMake build folder; None without CMake (the grader's own tests)."""
        inner = self.for_target(f"x_{'solution' if self.mode == 'solution' else 'student'}")
        return Path(inner.build_dir) if isinstance(inner, CMakeBuilder) else None

    def unstage(self, text: str) -> str:
        """A message with the staging folder's paths taken out (labs/03-vector-add/vector_add.cu)."""
        code = self.code
        return code.unstaged(text) if hasattr(code, "unstaged") and getattr(code, "submission_dir", None) else text


ShowFailure = Callable[[str, str], str]  # (target, message) -> what the progress line says


def _plain(target: str, message: str) -> str:
    return message


def build_together(builder: Builder, targets: list[str], progress: Progress, jobs: int = 1,
                   limits: tuple[float, float] | None = None, shown: ShowFailure = _plain) -> dict[str, BuildResult]:
    """Each target built: in one CMake call when there are several, target by target when that fails
    (or without CMake). limits: (seconds, MiB) of each compile (a student's object)."""
    built: dict[str, BuildResult] = {}
    if not targets:
        return built
    each = {"timeout_s": limits[0], "memory_mib": limits[1]} if limits else {}
    if len(targets) > 1 and isinstance(builder, CMakeBuilder):
        progress.step(f"building {', '.join(targets)}")
        start = time.monotonic()
        together = {"timeout_s": limits[0] * len(targets), "memory_mib": limits[1]} if limits else {}
        code, output = builder.run_build(*targets, jobs=max(jobs, len(targets)), **together)
        if code == 0:
            seconds = time.monotonic() - start
            log = truncate(output, builder.log_limit)
            for target in targets:
                built[target] = BuildResult(target=target, ok=True, seconds=seconds, log=log)
            progress.ok(f"built {', '.join(targets)} ({seconds:.1f} s)")
            return built
    for target in targets:
        progress.step(f"building {target}")
        built[target] = result = builder.build(target, **each) if each else builder.build(target)
        if result.ok:
            progress.ok(f"built {target} ({result.seconds:.1f} s)")
        else:
            progress.fail(f"{target}: {shown(target, result.message)}")
    return built


def existing(builder: Builder, target: str) -> BuildResult:
    """Without building: the binary that is already there, or why there is none."""
    path = Path(builder.bin_dir) / target
    if path.is_file():
        return BuildResult(target=target, ok=True)
    return BuildResult(target=target, ok=False, category=Category.HARNESS, message=f"{path} does not exist (build it first)")


def build_test_objects(labs: list[Lab], builders: Builders, progress: Progress) -> dict[str, list[str]]:
    """The test objects stage: per lab, notes on the test objects that did not build (the contract then
    cannot be read). In two halves, which a grade may run apart: the pristine tree's, then the graded code's."""
    return build_code_test_objects(labs, builders, build_pristine_test_objects(labs, builders))


def build_pristine_test_objects(labs: list[Lab], builders: Builders) -> dict[str, list[str]]:
    """A submission's build links the pristine build's test objects (build/submission.py): they are built
    there first (nothing to do where the build is the pristine one, or a batch built it already)."""
    notes: dict[str, list[str]] = {lab.name: [] for lab in labs}
    if not builders.build:
        return notes
    targets = {t: lab for lab in labs for t in test_object_targets(lab)}
    if builders.main is not builders.code and not builders.main_built and isinstance(builders.main, CMakeBuilder):
        code, _ = builders.main.run_build(*targets, jobs=max(builders.jobs, len(targets)))
        if code != 0:
            for target, lab in targets.items():
                built = builders.main.build(target)
                if not built.ok:
                    notes[lab.name].append(f"the contract could not be read: {target} did not build in the "
                                           f"pristine tree ({built.message})")
    return notes


def build_code_test_objects(labs: list[Lab], builders: Builders, notes: dict[str, list[str]]) -> dict[str, list[str]]:
    """The test objects in the graded code's build (a no-op where it links the pristine tree's; where they
    cannot be reused, compiled here); notes as build_pristine_test_objects gave them, with these added."""
    notes = {lab.name: list(notes.get(lab.name, [])) for lab in labs}
    if not builders.build:
        return notes
    targets = {t: lab for lab in labs for t in test_object_targets(lab)}
    builder = builders.code
    if len(targets) > 1 and isinstance(builder, CMakeBuilder):
        code, _ = builder.run_build(*targets, jobs=max(builders.jobs, len(targets)))
        if code == 0:
            return notes
    for target, lab in targets.items():
        built = builder.build(target)
        if not built.ok:
            notes[lab.name].append(f"the contract could not be read: {target} did not build ({built.message})")
    return notes


def build_objects(labs: list[Lab], builders: Builders, progress: Progress) -> dict[str, BuildResult]:
    """The object stage: each lab's graded file compiled on its own, within the compile limits."""
    if not builders.build or not labs:
        return {}
    targets = {object_target(lab, builders.mode): lab for lab in labs}
    built = build_together(builders.code, list(targets), progress, builders.jobs,
                           limits=(builders.compile_timeout_s, builders.compile_memory_mib))
    return {lab.name: built[target] for target, lab in targets.items()}


def _binary_targets(labs: list[Lab], mode: str) -> list[str]:
    """The test binaries of the graded code: the student's, or in solution mode the reference's."""
    targets = [(None if bs.compiled else bs.reference) if mode == "solution" else bs.target
               for lab in labs for bs in binary_sets(lab)]
    return [t for t in targets if t]


def _reference_targets(labs: list[Lab], mode: str) -> list[str]:
    """The reference's binaries (none in solution mode: the reference is the graded code)."""
    return [] if mode == "solution" else [bs.reference for lab in labs for bs in binary_sets(lab) if bs.reference]


def build_binaries(labs: list[Lab], builders: Builders, progress: Progress,
                   shown: ShowFailure = _plain) -> dict[str, BuildResult]:
    """The binaries stage: the test binaries of the graded code (the student's, or in solution mode the
    reference's), by target."""
    targets = _binary_targets(labs, builders.mode)
    if not builders.build:
        return {t: existing(builders.for_target(t), t) for t in targets}
    return build_together(builders.for_target(targets[0]) if targets else builders.code, targets, progress,
                          builders.jobs, shown=shown)


def build_references(labs: list[Lab], builders: Builders, progress: Progress,
                     shown: ShowFailure = _plain) -> dict[str, BuildResult]:
    """The references stage: the reference's binaries in the pristine tree (student mode only: in
    solution mode the reference is the graded code)."""
    targets = _reference_targets(labs, builders.mode)
    if not builders.build:
        return {t: existing(builders.main, t) for t in targets}
    return build_together(builders.main, targets, progress, builders.jobs, shown=shown)


def build_links(linkable: list[Lab], labs: list[Lab], builders: Builders, progress: Progress,
                shown: ShowFailure = _plain) -> tuple[dict[str, BuildResult], dict[str, BuildResult]]:
    """The binaries stage (of linkable) and the references stage (of labs): where both link in one build
    folder (a student's grade in place), in one CMake call, side by side; elsewhere one after the other."""
    binaries, references = _binary_targets(linkable, builders.mode), _reference_targets(labs, builders.mode)
    one_folder = all(builders.for_target(t) is builders.main for t in binaries)
    if builders.build and binaries and references and one_folder and isinstance(builders.main, CMakeBuilder):
        built = build_together(builders.main, binaries + references, progress, builders.jobs, shown=shown)
        return {t: built[t] for t in binaries}, {t: built[t] for t in references}
    return build_binaries(linkable, builders, progress, shown), build_references(labs, builders, progress, shown)
