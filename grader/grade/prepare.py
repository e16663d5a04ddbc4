"""The first half of a grade, which needs no GPU: intake's verdict, build and inspection, for a list of
labs at once. `grade` prepares one lab at a time (its results come as they are made); a batch prepares a
student's labs together in a build slot, outside the GPU's lock, and hands the result to the run half.

  test objects → screen | object → inspect → binaries (+ references)

With several labs, their screens run side by side, and so do their inspections (each lab's own files).
A submission's grade builds the pristine tree's part (its test objects, then the references) in a thread
while the screen and the object's compile run in the submission's build: none of it waits on the
student's file, and it is joined before the inspection reads the test objects. The object compiles beside
the screen; what the screen refused is dropped, its compile's lines and log unsaid.

Nothing of a student's file runs here, and nothing links that a refusal stopped: a lab refused by the
intake, the screen or the inspection gets a Block, and its binaries a stand-in build.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TypeVar

from grader.build import stages as build
from grader.build.cmake import CMakeBuilder
from grader.build.stages import Builders
from grader.build.targets import binary_sets
from grader.execute.lab_run import Binary
from grader.inspect import static_checks
from grader.inspect.static_checks import Inspection
from grader.intake import stage as intake
from grader.intake.staging import StagedSubmission
from grader.model import hidden
from grader.model.block import Block
from grader.model.labs import Lab
from grader.model.progress import GatedProgress, HeldProgress, Progress, say
from grader.model.results import BuildResult


T = TypeVar("T")
MAX_CHECKS_AT_ONCE = 8


@dataclass
class PreparedLab:
    """One lab, built and inspected: what the run half needs."""

    lab: Lab
    builds: list[BuildResult] = field(default_factory=list)  # every build attempted, in the report's order
    notes: list[str] = field(default_factory=list)  # the lab's messages so far
    binaries: list[Binary] = field(default_factory=list)
    inspection: Inspection = field(default_factory=Inspection)


def _shown(target: str, message: str) -> str:
    return hidden.build_message(target, message, conceal=True)


def prepare(labs: list[Lab], builders: Builders, *, staged: StagedSubmission | None, checks: bool | None,
            progress: Progress, references: Mapping[str, BuildResult] | None = None) -> dict[str, PreparedLab]:
    """Build and inspect these labs. checks: the static checks (None: with a CMake build); references:
    the reference binaries' builds already made (a batch's pristine tree), else they are built here."""
    mode = builders.mode
    prepared = {lab.name: PreparedLab(lab) for lab in labs}
    sources = {lab.name: intake.graded_sources(lab, mode, staged) for lab in labs}
    blocks: dict[str, Block | None] = {lab.name: intake.refusal(lab, mode, staged) for lab in labs}
    failed: dict[str, BuildResult] = {}  # the graded object did not compile
    code_dir = builders.code_dir
    real = isinstance(getattr(builders.code, "inner", builders.code), CMakeBuilder)
    on = checks if checks is not None else real
    refs: dict[str, BuildResult] | None = dict(references) if references is not None else None
    if on and code_dir is not None:
        open_labs = [lab for lab in labs if blocks[lab.name] is None]
        with _PristineAhead(open_labs, labs if refs is None else [], builders) as pristine:
            failed, blocks = _screen_and_compile(open_labs, sources, blocks, prepared, builders, progress)
            pristine_notes, ahead_refs = pristine.result(progress)
        refs = refs if ahead_refs is None else ahead_refs
        for name, notes in build.build_code_test_objects(open_labs, builders, pristine_notes).items():
            prepared[name].notes += notes
        compiled_ok = [lab for lab in open_labs if blocks[lab.name] is None and lab.name not in failed]
        inspected = _each(compiled_ok, lambda lab: static_checks.inspect(lab, sources[lab.name], code_dir, mode,
                                                                         progress))
        for lab, found in zip(compiled_ok, inspected):
            prepared[lab.name].inspection = found
            prepared[lab.name].notes += found.notes
            blocks[lab.name] = found.block
    else:
        for lab in labs:  # no object to read: the technique checks say what they could not check
            found = prepared[lab.name].inspection = static_checks.inspect(lab, sources[lab.name], None, mode, progress)
            blocks[lab.name] = blocks[lab.name] or found.block
            if real:
                prepared[lab.name].notes.append("the static checks did not run (no CMake build)")
    for lab in labs:
        prepared[lab.name].notes += [n for n in intake.notes(lab, mode, staged) if n not in prepared[lab.name].notes]
    linkable = [lab for lab in labs if blocks[lab.name] is None and lab.name not in failed]
    if refs is None:
        linked, refs = build.build_links(linkable, labs, builders, progress, shown=_shown)
    else:
        linked = build.build_binaries(linkable, builders, progress, shown=_shown)
    for lab in labs:
        _binaries(prepared[lab.name], builders, blocks[lab.name], failed.get(lab.name), linked, refs)
    return prepared


class _PristineAhead:
    """The pristine tree's part of a submission's build, in a thread: its test objects, then (for ref_labs)
    the reference binaries. Its progress lines are held and said when it is joined, so the console reads in
    order. Where the pristine tree is the graded code's own build (a grade in place) nothing runs ahead: its
    builds would only queue on that folder's lock behind the compile."""

    def __init__(self, open_labs: list[Lab], ref_labs: list[Lab], builders: Builders) -> None:
        self._open_labs, self._builders = open_labs, builders
        self._held = HeldProgress()
        self._pool: ThreadPoolExecutor | None = None
        self._future: Future[tuple[dict[str, list[str]], dict[str, BuildResult] | None]] | None = None
        apart = builders.build and builders.main is not builders.code and isinstance(builders.main, CMakeBuilder)
        if apart and (ref_labs or not builders.main_built):
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pristine-build")
            self._future = self._pool.submit(self._build, ref_labs)

    def _build(self, ref_labs: list[Lab]) -> tuple[dict[str, list[str]], dict[str, BuildResult] | None]:
        notes = build.build_pristine_test_objects(self._open_labs, self._builders)
        refs = build.build_references(ref_labs, self._builders, self._held, _shown) if ref_labs else None
        return notes, refs

    def result(self, progress: Progress) -> tuple[dict[str, list[str]], dict[str, BuildResult] | None]:
        """(notes on the pristine test objects, the references' builds or None when they were not built)."""
        if self._future is None:
            return build.build_pristine_test_objects(self._open_labs, self._builders), None
        done = self._future.result()
        say(self._held.lines, progress)
        return done

    def __enter__(self) -> _PristineAhead:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._pool is not None:  # even when the main thread failed: no build is left running
            self._pool.shutdown(wait=True)


def _screen_and_compile(open_labs: list[Lab], sources: Mapping[str, list[Path]], blocks: dict[str, Block | None],
                        prepared: dict[str, PreparedLab], builders: Builders,
                        progress: Progress) -> tuple[dict[str, BuildResult], dict[str, Block | None]]:
    """The screen, and beside it the object of each lab: (the labs whose object did not compile, the blocks
    so far). The compile starts with the screen (it takes seconds, the screen under one), and only what
    the screen let through is kept: a refused lab's object is never inspected or linked, and its compile
    said nothing (its output may quote a file it was not allowed to read)."""
    code_dir = builders.code_dir
    mode = builders.mode
    failed: dict[str, BuildResult] = {}
    gate = GatedProgress(progress)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="object-compile") as pool:
        compiling = pool.submit(build.build_objects, open_labs, builders, gate)
        try:
            screened = _each(open_labs, lambda lab: static_checks.screen(lab, sources[lab.name], code_dir, mode,
                                                                         progress, builders.unstage))
        except BaseException:
            gate.drop()
            raise
        for lab, screening in zip(open_labs, screened):
            prepared[lab.name].notes += screening.notes
            blocks[lab.name] = screening.block
            if screening.compile_error is not None:
                failed[lab.name] = screening.compile_error
                prepared[lab.name].builds.append(screening.compile_error)
        passed = [lab for lab in open_labs if blocks[lab.name] is None and lab.name not in failed]
        if len(passed) == len(open_labs):
            gate.open()
        else:
            gate.drop()
        compiled = compiling.result()
    for lab in passed:
        result = compiled.get(lab.name)
        if result is None:
            continue
        if gate.dropped:
            # Compiled in one call with a refused lab's file: the log they share is left out.
            result = replace(result, log="")
            (progress.ok if result.ok else progress.fail)(
                f"built {result.target} ({result.seconds:.1f} s)" if result.ok else f"{result.target}: {result.message}")
        prepared[lab.name].builds.append(result)
        if not result.ok:
            failed[lab.name] = result
    return failed, blocks


def _each(labs: list[Lab], check: Callable[[Lab], T]) -> list[T]:
    """check(lab) for each lab, in order; several labs' checks side by side (each is a few tool runs of
    its own files: the include listing, readelf and objdump of its object), one lab's alone."""
    if len(labs) < 2:
        return [check(lab) for lab in labs]
    with ThreadPoolExecutor(max_workers=min(len(labs), os.cpu_count() or 1, MAX_CHECKS_AT_ONCE)) as pool:
        return list(pool.map(check, labs))


def _binaries(prepared: PreparedLab, builders: Builders, block: Block | None, failed: BuildResult | None,
              linked: Mapping[str, BuildResult], refs: Mapping[str, BuildResult]) -> None:
    """Each binary set of the lab as the run stage gets it; the builds in the report's order."""
    lab = prepared.lab
    for bs in binary_sets(lab):
        if builders.mode == "solution":
            if bs.reference is None or bs.compiled:
                prepared.notes.append(f"no reference solution in {lab.solution_dir}: nothing to grade in solution mode"
                                      + (" (this copy holds the reference compiled, to time it, not its source)"
                                         if bs.compiled else ""))
                continue
            target, reference, label = bs.reference, None, "hidden" if bs.kind == "hidden" else "solution"
        else:
            target, reference, label = bs.target, bs.reference, bs.kind
        if block is not None:
            built = block.build
        elif failed is not None:
            built = failed
        else:
            built = linked[target]
            if builders.build or not built.ok:  # without building, only a missing binary is news
                prepared.builds.append(built)
        ref_built = refs.get(reference) if reference else None
        if ref_built is not None and (builders.build or not ref_built.ok):
            prepared.builds.append(ref_built)
        where = Path(builders.for_target(target).bin_dir)
        prepared.binaries.append(Binary(
            kind=bs.kind, label=label, target=target, path=where / target, built=built,
            reference=Path(builders.main.bin_dir) / reference if reference else None,
            reference_built=ref_built, reference_compiled=bs.compiled, block=block))
