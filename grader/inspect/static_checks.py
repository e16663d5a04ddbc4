"""The static checks of a lab's graded file, before anything of it runs: what the preprocessor reads,
then what the compiler made of it.

  1. the staging step's refusal, if any (a link, a binary or oversized file: grader/isolate/bwrap.py);
  2. the test objects, built from the pristine tree (their undefined symbols are the contract);
  3. every file the preprocessor opens for the student file (grader/inspect/includes.py);
  4. the student file compiled on its own (labNN_student_object), within a time and memory limit;
  5. the allowlists over that object and its assembly listing (grader/inspect/objcheck.py).

A refusal is a Block: the binaries are never built or run, every test of the lab says why. The object
read in step 5 is kept for the technique checks (grader/inspect/techniques.py).
"""

from __future__ import annotations

import glob
from dataclasses import dataclass, field
from pathlib import Path

from grader.inspect import includes
from grader.inspect import objcheck
from grader.build.cmake import CMakeBuilder, find_nvcc
from grader.build.compiledb import CompileDb
from grader.grade.context import Block, GradeContext
from grader.inspect.elf import ElfError, ObjectFile, read_object
from grader.model.labs import Lab
from grader.model.results import BuildResult, Category

MAX_SHOWN = 6


@dataclass
class StaticResult:
    block: Block | None = None
    build: BuildResult | None = None  # the student object's compile, when it was attempted
    notes: list[str] = field(default_factory=list)  # what could not be checked
    obj: ObjectFile | None = None
    object_path: Path | None = None
    contract: set[str] = field(default_factory=set)  # the functions the tests call
    techniques: tuple[list, list[str]] | None = field(default=None, repr=False)  # technique_outcomes, once read

    @property
    def ok(self) -> bool:
        return self.block is None and (self.build is None or self.build.ok)


def code_target(ctx: GradeContext, lab: Lab) -> str:
    """labNN_student or labNN_solution: the prefix of the graded code's targets."""
    return f"{lab.target_prefix}_{'solution' if ctx.mode == 'solution' else 'student'}"


def test_object_targets(lab: Lab) -> list[str]:
    targets = [f"{lab.target_prefix}_tests"]
    if (lab.solution_dir / f"test_hidden_{lab.topic}.cu").is_file():
        targets.append(f"{lab.target_prefix}_hidden_tests")
    return targets


def _refused(what: str, lines: list[str], category: Category, label: str, target: str) -> Block:
    shown = "; ".join(lines[:MAX_SHOWN]) + (f"; and {len(lines) - MAX_SHOWN} more" if len(lines) > MAX_SHOWN else "")
    return Block(category, f"the lab file was {what}: {shown}", f"the lab file was {what}: {shown}", label, target)


def _group_includes(problems: list[includes.IncludeProblem]) -> list[str]:
    """One line per reason, naming the first file it was given for (a forbidden header pulls in dozens)."""
    seen: dict[str, list[str]] = {}
    for p in problems:
        seen.setdefault(p.why, []).append(p.path)
    return [f"{paths[0]}" + (f" (and {len(paths) - 1} more files)" if len(paths) > 1 else "") + f": {why}"
            for why, paths in seen.items()]


def run(ctx: GradeContext, lab: Lab) -> StaticResult:
    """The static checks of one lab (in both modes: the reference must pass them too)."""
    label = "solution" if ctx.mode == "solution" else "student"
    prefix = code_target(ctx, lab)
    target = f"{prefix}_object"
    staged = ctx.options.staged.lab(lab.name) if ctx.options.staged and ctx.mode == "student" else None
    if staged is not None and staged.refused:
        what = "refused" if staged.category is Category.COMPILE_ERROR else "rejected"
        return StaticResult(block=_refused(what, staged.errors, staged.category or Category.COMPILE_ERROR, label, prefix))
    builder = ctx.builder_for(prefix)
    if not ctx.checks or not isinstance(getattr(builder, "inner", builder), CMakeBuilder):
        return StaticResult(notes=[] if not ctx.real else ["the static checks did not run (no CMake build)"])
    build_dir = Path(getattr(builder, "build_dir"))
    sources = ctx.sources(lab)
    result = StaticResult()

    # 2. the pristine test objects: the contract is what they call
    if ctx.options.build:
        for t in test_object_targets(lab):
            built = builder.build(t)
            if not built.ok:
                result.notes.append(f"the contract could not be read: {t} did not build ({built.message})")

    # 3. what the preprocessor reads
    ctx.progress.step(f"checking what the files of {target} include")
    lines, error = include_problems(lab, sources, build_dir, target, result.notes)
    if error:
        message = builder.unstaged(error) if hasattr(builder, "unstaged") else error
        result.build = BuildResult(target=target, ok=False, category=Category.COMPILE_ERROR,
                                   message=f"compile error: {message}")
        return result
    if lines:
        result.block = _refused("rejected", lines, Category.FORBIDDEN_CALL, label, prefix)
        ctx.progress.fail(f"{prefix}: includes that are not allowed")
        return result

    # 4. the file on its own, within limits
    if ctx.options.build:
        ctx.progress.step(f"compiling {target}")
        result.build = builder.build(target, timeout_s=ctx.options.compile_timeout_s,
                                     memory_mib=ctx.options.compile_memory_mib)
        if not result.build.ok:
            ctx.progress.fail(f"{target}: {result.build.message}")
            return result

    # 5. the allowlists over what it compiled to
    objects = [_object_path(build_dir, target, s) for s in sources]
    if any(o is None for o in objects):
        result.notes.append(f"the compiled lab file was not checked: no object of {target} in {build_dir}")
        return result
    contract = result.contract = _contract(build_dir, lab, result.notes)
    ctx.progress.step(f"checking what {target} compiled to")
    findings: list[objcheck.Finding] = []
    for obj_path, source in zip(objects, sources):
        assert obj_path is not None
        try:
            obj = read_object(obj_path)
        except ElfError as err:
            result.notes.append(f"the compiled lab file was not checked: {err}")
            return result
        listing = obj_path.with_suffix(".s")
        assembly = listing.read_text(errors="replace") if listing.is_file() else None
        if assembly is None:
            result.notes.append("host inline assembly was not checked: the compiler's listing is missing")
        findings += objcheck.check_object(obj, lab, contract, [source], assembly)
        result.obj, result.object_path = obj, obj_path
    if findings:
        result.block = _refused("refused", [f.line() for f in findings], Category.FORBIDDEN_CALL, label, prefix)
        ctx.progress.fail(f"{prefix}: {len(findings)} thing(s) a lab file may not do")
    return result


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


def _object_path(build_dir: Path, target: str, source: Path) -> Path | None:
    db = CompileDb.load(build_dir)
    entry = db.entry(source, target) if db is not None else None
    path = db.object_of(entry) if db is not None and entry is not None else None
    return path if path is not None and path.is_file() else None


def _contract(build_dir: Path, lab: Lab, notes: list[str]) -> set[str]:
    objects = []
    for target in test_object_targets(lab):
        for path in glob.glob(str(build_dir / "labs" / lab.name / "CMakeFiles" / f"{target}.dir" / "*.o")):
            try:
                objects.append(read_object(Path(path)))
            except ElfError as err:
                notes.append(f"the contract could not be read from {Path(path).name}: {err}")
    if not objects:
        notes.append("the contract could not be read (no test object): every external function was refused")
    return objcheck.contract_of(objects)


def contract_for(result: StaticResult) -> set[str]:
    return result.contract


def ptx_of(result: StaticResult) -> str | None:
    """The PTX nvcc kept beside the object (--keep), for the technique checks; None when there is none."""
    if result.object_path is None:
        return None
    keep_dir = result.object_path.parent
    while keep_dir.name and not keep_dir.name.endswith(".dir"):
        keep_dir = keep_dir.parent
    found = sorted(glob.glob(str(keep_dir / "*.ptx")))
    if not found:
        return None
    return "\n".join(Path(p).read_text(errors="replace") for p in found)


def technique_outcomes(lab: Lab, result: StaticResult) -> tuple[list, list[str]] | None:
    """lab.toml's technique checks on the checked object, and their notes: read once, whoever asks
    first (the mutation gate before the sanitizer, scoring at the end). None: nothing to check."""
    if not result.ok or not lab.techniques:
        return None
    if result.techniques is None:
        from grader.inspect import techniques

        result.techniques = techniques.check_all(lab, result.obj, contract_for(result), ptx_of(result))
    return result.techniques
