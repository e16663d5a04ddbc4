"""The inspection stages of a lab's graded file, before anything of it runs. They read and judge; they
build nothing (the build stages hand them what the compiler made).

  screen   every file the preprocessor opens for the graded file (grader/inspect/includes.py), before
           the file is compiled at all (a forbidden include never reaches the compiler);
  inspect  the object the file compiled to, held to allowlists of what it may define and reference, its
           sections and initializers, no `syscall`, no host inline assembly (grader/inspect/objcheck.py);
           then lab.toml's technique checks, read once here for whoever needs them (the mutation gate,
           scoring).

A refusal is a Block: the binaries are never run, every test of the lab says why.
"""

from __future__ import annotations

import glob
from dataclasses import dataclass, field
from pathlib import Path

from grader.build.compiledb import CompileDb
from grader.build.submission import dirs_with_test_objects
from grader.build.targets import code_prefix, object_target, test_object_targets
from grader.host.toolkit import find_nvcc
from grader.inspect import includes, objcheck, techniques
from grader.inspect.elf import ElfError, ObjectFile, localize, read_object, read_symbols
from grader.intake.stage import refused_block
from grader.model.block import Block
from grader.model.labs import Lab
from grader.model.progress import Progress
from grader.model.results import BuildResult, Category

MAX_SHOWN = 6


@dataclass
class Screening:
    """What the preprocessor read for the graded file: a refusal, or the preprocessor's own error."""

    block: Block | None = None
    compile_error: BuildResult | None = None
    notes: list[str] = field(default_factory=list)


@dataclass
class Inspection:
    """What the graded object was found to be. techniques: lab.toml's technique checks and their notes,
    None when there is nothing to check (no [[technique]], or the object was refused)."""

    block: Block | None = None
    notes: list[str] = field(default_factory=list)
    obj: ObjectFile | None = None
    object_path: Path | None = None
    contract: set[str] = field(default_factory=set)  # the functions the tests call
    techniques: tuple[list[techniques.TechniqueOutcome], list[str]] | None = field(default=None, repr=False)

    @property
    def technique_missing(self) -> bool:
        return self.techniques is not None and any(not o.found for o in self.techniques[0])


def _label(mode: str) -> str:
    return "solution" if mode == "solution" else "student"


def _group_includes(problems: list[includes.IncludeProblem]) -> list[str]:
    """One line per reason, naming the first file it was given for (a forbidden header pulls in dozens)."""
    seen: dict[str, list[str]] = {}
    for p in problems:
        seen.setdefault(p.why, []).append(p.path)
    return [f"{paths[0]}" + (f" (and {len(paths) - 1} more files)" if len(paths) > 1 else "") + f": {why}"
            for why, paths in seen.items()]


def include_problems(lab: Lab, sources: list[Path], build_dir: Path, target: str,
                     notes: list[str] | None = None) -> tuple[list[str], str]:
    """What the files compiled for target may not include (one line per reason), and the preprocessor's
    error when it could not list them at all; ([], "") when all is well."""
    problems: list[includes.IncludeProblem] = []
    for source in sources:
        command = includes.compile_command_of(source, build_dir, target)
        if command is None:
            if notes is not None:
                notes.append(f"the includes were not checked: {target} is not in compile_commands.json")
            continue
        policy = includes.IncludePolicy.for_lab(lab, sources, find_nvcc(), command[0])
        try:
            problems += includes.check_dependencies(includes.list_dependencies(*command), policy)
        except includes.PreprocessError as err:
            return [], str(err)
    return _group_includes(problems), ""


def screen(lab: Lab, sources: list[Path], build_dir: Path, mode: str, progress: Progress,
           unstage=lambda text: text) -> Screening:  # noqa: ANN001 - str -> str: staging paths out of messages
    """The screen stage: what the preprocessor reads for the graded file, against the lab's allowlist."""
    target = object_target(lab, mode)
    progress.step(f"checking what the files of {target} include")
    found = Screening()
    lines, error = include_problems(lab, sources, build_dir, target, found.notes)
    if error:
        found.compile_error = BuildResult(target=target, ok=False, category=Category.COMPILE_ERROR,
                                          message=f"compile error: {unstage(error)}")
    elif lines:
        prefix = code_prefix(lab, mode)
        found.block = refused_block("rejected", [unstage(x) for x in lines], Category.FORBIDDEN_CALL, _label(mode),
                                    prefix, MAX_SHOWN)
        progress.fail(f"{prefix}: includes that are not allowed")
    return found


def inspect(lab: Lab, sources: list[Path], build_dir: Path | None, mode: str, progress: Progress) -> Inspection:
    """The inspect stage: the allowlists over the compiled graded file, then the technique checks. With
    no build folder (no CMake build: the grader's own tests) only the technique checks run, on nothing."""
    found = Inspection()
    if build_dir is not None:
        _check_object(lab, sources, build_dir, mode, progress, found)
    if found.block is None and lab.techniques:
        found.techniques = techniques.check_all(lab, found.obj, contract_for(found), ptx_of(found))
    return found


def _check_object(lab: Lab, sources: list[Path], build_dir: Path, mode: str, progress: Progress,
                  found: Inspection) -> None:
    target = object_target(lab, mode)
    objects = [_object_path(build_dir, target, s) for s in sources]
    if any(o is None for o in objects):
        found.notes.append(f"the compiled lab file was not checked: no object of {target} in {build_dir}")
        return
    contract = found.contract = _contract(build_dir, lab, found.notes)
    progress.step(f"checking what {target} compiled to")
    findings: list[objcheck.Finding] = []
    for obj_path, source in zip(objects, sources):
        assert obj_path is not None
        try:
            obj = read_object(obj_path)
        except ElfError as err:
            found.notes.append(f"the compiled lab file was not checked: {err}")
            return
        listing = obj_path.with_suffix(".s")
        assembly = listing.read_text(errors="replace") if listing.is_file() else None
        if assembly is None:
            found.notes.append("host inline assembly was not checked: the compiler's listing is missing")
        checked = objcheck.check_object(obj, lab, contract, [source], assembly)
        findings += [f for f in checked if f.refuses]
        helpers = [f for f in checked if not f.refuses]
        if helpers and not findings:
            try:  # before the link: a helper left global can stand in for nothing
                localize(obj_path, [f.symbol for f in helpers])
                obj = read_object(obj_path)
            except ElfError as err:
                findings += [objcheck.Finding("definition", f.name, objcheck.WHY_EXTERNAL) for f in helpers]
                found.notes.append(f"helpers left global could not be made local: {err}")
            else:
                still = {s.name for s in obj.defined() if s.external} & {f.symbol for f in helpers}
                findings += [objcheck.Finding("definition", f.name, objcheck.WHY_EXTERNAL)
                             for f in helpers if f.symbol in still]
                found.notes += [f"warning: {f.line()}" for f in helpers if f.symbol not in still]
        found.obj, found.object_path = obj, obj_path
    if findings:
        prefix = code_prefix(lab, mode)
        found.block = refused_block("refused", [f.line() for f in findings], Category.FORBIDDEN_CALL, _label(mode),
                                    prefix, MAX_SHOWN)
        progress.fail(f"{prefix}: {len(findings)} thing(s) a lab file may not do")


def _object_path(build_dir: Path, target: str, source: Path) -> Path | None:
    db = CompileDb.load(build_dir)
    entry = db.entry(source, target) if db is not None else None
    path = db.object_of(entry) if db is not None and entry is not None else None
    return path if path is not None and path.is_file() else None


def _contract(build_dir: Path, lab: Lab, notes: list[str]) -> set[str]:
    objects = []
    for target in test_object_targets(lab):
        found = [glob.glob(str(d / "labs" / lab.name / "CMakeFiles" / f"{target}.dir" / "*.o"))
                 for d in dirs_with_test_objects(build_dir)]  # its own, else those it links from the pristine build
        for path in next((f for f in found if f), []):
            try:
                objects.append(read_symbols(Path(path)))  # the contract needs only what the tests call
            except ElfError as err:
                notes.append(f"the contract could not be read from {Path(path).name}: {err}")
    if not objects:
        notes.append("the contract could not be read (no test object): every external function was refused")
    return objcheck.contract_of(objects)


def contract_for(found: Inspection) -> set[str]:
    return found.contract


def ptx_of(found: Inspection) -> str | None:
    """The PTX nvcc kept beside the object (--keep), for the technique checks; None when there is none."""
    if found.object_path is None:
        return None
    keep_dir = found.object_path.parent
    while keep_dir.name and not keep_dir.name.endswith(".dir"):
        keep_dir = keep_dir.parent
    return kept_ptx(keep_dir)


def kept_ptx(keep_dir: Path) -> str | None:
    """The PTX nvcc kept in an object target's folder (CMakeFiles/<target>.dir); None when there is none."""
    kept = sorted(glob.glob(str(keep_dir / "*.ptx")))
    if not kept:
        return None
    return "\n".join(Path(p).read_text(errors="replace") for p in kept)


def object_dir(build_dir: Path, lab: Lab, mode: str) -> Path:
    """The folder of the graded file's object target (mode "solution": the reference's) in a build."""
    return Path(build_dir) / "labs" / lab.name / "CMakeFiles" / f"{object_target(lab, mode)}.dir"
