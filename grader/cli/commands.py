"""The verbs of `python3 -m grader`. Each returns an exit code (grader/model/errors.py); cli.py only parses."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Callable, TextIO

from grader.model import hidden
from grader.authoring import skeleton
from grader.build.cmake import Builder, CMakeBuilder
from grader.cli.doctor import format_checks, run_checks
from grader.host.environment import GpuProbe, choose_preset, probe_gpu
from grader.model.errors import Exit, GraderError
from grader.model.labs import Lab, LabError, discover, select
from grader.cli.listing import format_builds, format_labs, format_tests
from grader.build.targets import build_targets
from grader.grade.options import RunOptions
from grader.grade.pipeline import exit_code, run_labs
from grader.model.progress import Progress
from grader.model.results import Results, ResultsError

def make_builder(root: Path, preset: str, jobs: int | None) -> Builder:
    return CMakeBuilder(root, preset, jobs)


def make_submission_builder(root: Path, preset: str, jobs: int | None, staging: Path) -> Builder:
    """The build of a staged submission: build/<preset>-submission, CUDALAB_SUBMISSION_DIR=staging, linking
    the test objects of build/<preset>."""
    from grader.build.submission import SubmissionBuilder

    return SubmissionBuilder(root, preset, jobs, submission_dir=staging,
                             reuse_from=CMakeBuilder(root, preset).build_dir)


def use_color(stream: TextIO) -> bool:
    return hasattr(stream, "isatty") and stream.isatty() and "NO_COLOR" not in os.environ


def load_labs(root: Path, selectors: list[str]) -> list[Lab]:
    try:
        return select(discover(root), selectors)
    except LabError as err:
        raise GraderError(str(err), Exit.USAGE) from None
    except FileNotFoundError:
        raise GraderError(f"{root}/labs: no such directory (is --root right?)", Exit.USAGE) from None


def _reporters() -> tuple[Callable[..., dict[str, Path]] | None, Callable[..., None] | None]:
    """grader.report's write_reports and render_console, or (None, None) where they are absent."""
    try:
        from grader.report import render_console, write_reports
    except ImportError:
        return None, None
    return write_reports, render_console


def publish(results: Results, out_dir: Path, stdout: TextIO, reveal_hidden: bool = False,
            root: Path | None = None) -> dict[str, Path]:
    """Write every report into out_dir and print the summary. Hidden tests show as grader/model/hidden.py says
    (reveal_hidden: --reveal-hidden); results.json keeps them all. The exports show paths under root
    (the lab tree) relative to it."""
    write_reports, render_console = _reporters()
    if write_reports is None:
        out_dir.mkdir(parents=True, exist_ok=True)
        results.save(out_dir / "results.json")
        paths = {"json": out_dir / "results.json"}
        stdout.write("note: grader/report is not available; only results.json was written\n")
    else:
        paths = write_reports(results, out_dir, reveal_hidden=reveal_hidden, root=root)
    shown = hidden.redact(results, reveal_hidden)
    if render_console is not None:
        render_console(shown, stdout, use_color(stdout))
    else:
        stdout.write(format_tests(shown, details=True) + "\n")
    stdout.write("reports: " + ", ".join(str(p) for p in paths.values()) + "\n")
    return paths


# --- verbs ----------------------------------------------------------------------------------------


def cmd_list(root: Path, stdout: TextIO | None = None) -> Exit:
    stdout = stdout or sys.stdout
    stdout.write(format_labs(load_labs(root, [])) + "\n")
    return Exit.OK


def cmd_doctor(root: Path, brief: bool = False, stdout: TextIO | None = None, gpu: GpuProbe | None = None) -> Exit:
    stdout = stdout or sys.stdout
    gpu = probe_gpu() if gpu is None else gpu
    if brief:
        stdout.write(gpu.brief() + "\n")
        return Exit.OK
    checks = run_checks(root, gpu)
    stdout.write(format_checks(checks) + "\n")
    return Exit.ENVIRONMENT if any(c.required and not c.ok for c in checks) else Exit.OK


def cmd_build(
    root: Path,
    selectors: list[str],
    preset: str | None = None,
    jobs: int | None = None,
    solution: bool = False,
    stdout: TextIO | None = None,
    progress: Progress | None = None,
) -> Exit:
    stdout = stdout or sys.stdout
    labs = load_labs(root, selectors)
    progress = progress or Progress()
    preset = choose_preset(probe_gpu(), preset)
    builder = make_builder(root, preset, jobs)
    progress.step(f"configuring (preset {preset})")
    builder.configure([lab.name for lab in labs])
    builds = []
    for lab in labs:
        for target in build_targets(lab, "solution" if solution else "student"):
            progress.step(f"building {target}")
            result = builder.build(target)
            (progress.ok if result.ok else progress.fail)(f"{target}: {'built' if result.ok else result.message}")
            builds.append(result)
    stdout.write(format_builds(builds) + "\n")
    return Exit.OK if all(b.ok for b in builds) else Exit.BUILD


def _run(
    root: Path,
    selectors: list[str],
    *,
    solution: bool,
    preset: str | None,
    jobs: int | None,
    build: bool,
    reference: bool,
    timeout_s: float | None,
    progress: Progress | None,
    gpu: GpuProbe | None,
    submission: Path | None = None,
    max_seconds: float | None = None,
    sanitizer_tools: list[str] | None = None,
    sandbox: bool = True,
    small: bool = False,
    confine: bool = True,
    host_memory_mib: float | None = None,
    compile_timeout_s: float | None = None,
    profile: bool = False,
    reference_cache: bool | None = None,
) -> Results:
    labs = load_labs(root, selectors)
    if submission is not None and solution:
        raise GraderError("--submission grades a student's files; it cannot be combined with --solution", Exit.USAGE)
    gpu = probe_gpu() if gpu is None else gpu
    progress = progress or Progress()
    progress.note(gpu.brief())
    preset = choose_preset(gpu, preset)
    builder = make_builder(root, preset, jobs)
    options = RunOptions(mode="solution" if solution else "student", build=build, reference=reference, timeout_s=timeout_s,
                         max_seconds=max_seconds, sanitizer_tools=sanitizer_tools, sandbox="auto" if sandbox else "off",
                         small=small, confine=confine, host_memory_mib=host_memory_mib, profile=profile,
                         reference_cache=reference_cache)
    if compile_timeout_s:
        options.compile_timeout_s = compile_timeout_s
    if submission is None:
        return run_labs(root, labs, builder, gpu, options, progress)
    # An untrusted submission: only its student files, staged apart, built in a directory of their own.
    from grader.intake.stage import take_in
    from grader.intake.staging import StagingError

    staging = Path(tempfile.mkdtemp(prefix="cudalab-stage-"))
    try:
        try:
            options.staged = take_in(submission, labs, staging, staging / "opened", load_labs(root, []))
        except StagingError as err:  # SubmissionError included
            raise GraderError(f"--submission: {err}", Exit.USAGE) from None
        for name, staged in options.staged.labs.items():
            if staged.refused:
                progress.fail(f"{name}: the submission's file was not accepted: {'; '.join(staged.errors)}")
        options.student_builder = make_submission_builder(root, preset, jobs, staging)
        options.submission = str(submission)
        return run_labs(root, labs, builder, gpu, options, progress)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def cmd_test(
    root: Path,
    selectors: list[str],
    solution: bool = False,
    preset: str | None = None,
    jobs: int | None = None,
    build: bool = True,
    timeout_s: float | None = None,
    stdout: TextIO | None = None,
    progress: Progress | None = None,
    gpu: GpuProbe | None = None,
    submission: Path | None = None,
    max_seconds: float | None = None,
    sanitizer_tools: list[str] | None = None,
    sandbox: bool = True,
    small: bool = False,
    confine: bool = True,
    host_memory_mib: float | None = None,
    compile_timeout_s: float | None = None,
) -> Exit:
    stdout = stdout or sys.stdout
    results = _run(root, selectors, solution=solution, preset=preset, jobs=jobs, build=build, reference=False,
                   timeout_s=timeout_s, progress=progress, gpu=gpu, submission=submission, max_seconds=max_seconds,
                   sanitizer_tools=sanitizer_tools, sandbox=sandbox, small=small, confine=confine,
                   host_memory_mib=host_memory_mib, compile_timeout_s=compile_timeout_s)
    # Student-facing like the reports: concealed hidden tests are counted, never named (grader/model/hidden.py).
    stdout.write(format_tests(hidden.redact(results)) + "\n")
    return exit_code(results)


def cmd_grade(
    root: Path,
    selectors: list[str],
    solution: bool = False,
    out_dir: Path | None = None,
    preset: str | None = None,
    jobs: int | None = None,
    build: bool = True,
    timeout_s: float | None = None,
    stdout: TextIO | None = None,
    progress: Progress | None = None,
    gpu: GpuProbe | None = None,
    reveal_hidden: bool = False,
    submission: Path | None = None,
    max_seconds: float | None = None,
    sanitizer_tools: list[str] | None = None,
    sandbox: bool = True,
    small: bool = False,
    confine: bool = True,
    host_memory_mib: float | None = None,
    compile_timeout_s: float | None = None,
    profile: bool = False,
    reference_cache: bool | None = None,
) -> Exit:
    stdout = stdout or sys.stdout
    results = _run(root, selectors, solution=solution, preset=preset, jobs=jobs, build=build, reference=True,
                   timeout_s=timeout_s, progress=progress, gpu=gpu, submission=submission, max_seconds=max_seconds,
                   sanitizer_tools=sanitizer_tools, sandbox=sandbox, small=small, confine=confine,
                   host_memory_mib=host_memory_mib, compile_timeout_s=compile_timeout_s, profile=profile,
                   reference_cache=reference_cache)
    publish(results, out_dir or root / "reports", stdout, reveal_hidden=reveal_hidden, root=root)
    return exit_code(results)


def cmd_skeleton(root: Path, selectors: list[str], write: bool, stdout: TextIO | None = None) -> Exit:
    stdout = stdout or sys.stdout
    labs = load_labs(root, selectors)
    try:
        if write:
            written = [p for lab in labs for p in skeleton.write(lab)]
            for path in written:
                stdout.write(f"wrote {path.relative_to(root) if path.is_relative_to(root) else path}\n")
            stdout.write(f"{len(written)} skeleton(s) rewritten\n" if written else "every skeleton is up to date\n")
            return Exit.OK
        diffs = [d for lab in labs for d in skeleton.check(lab)]
    except skeleton.MarkerError as err:
        raise GraderError(f"unbalanced solution markers: {err}", Exit.USAGE) from None
    stale = [d for d in diffs if not d.ok]
    for d in stale:
        stdout.write(d.diff if d.diff.endswith("\n") else d.diff + "\n")
    if stale:
        stdout.write(
            f"{len(stale)} skeleton(s) differ from their solution: run python3 -m grader skeleton --write\n"
        )
        return Exit.TEST_FAILURES
    stdout.write(f"{len(diffs)} skeleton(s) match their solutions\n")
    return Exit.OK


def cmd_check(
    root: Path,
    selectors: list[str],
    preset: str | None = None,
    list_tests: bool = True,
    stdout: TextIO | None = None,
    gpu: GpuProbe | None = None,
) -> Exit:
    """Check each lab's rubric (grader/authoring/rubric.py) against the tests its built binaries list: exit 1 when
    a problem is found, 2 for an unknown lab."""
    from grader.authoring import rubric

    stdout = stdout or sys.stdout
    bin_dir = None
    if list_tests:  # the binaries `grader build` made for this machine's preset
        if not preset:
            preset = choose_preset(probe_gpu() if gpu is None else gpu)
        bin_dir = make_builder(root, preset, None).bin_dir
    try:
        checks = rubric.check_labs(root, selectors, bin_dir)
    except LabError as err:
        raise GraderError(str(err), Exit.USAGE) from None
    except FileNotFoundError:
        raise GraderError(f"{root}/labs: no such directory (is --root right?)", Exit.USAGE) from None
    stdout.write(rubric.format_checks(checks, instructor_tree=(root / "solutions").is_dir()) + "\n")
    return Exit.OK if all(c.ok for c in checks) else Exit.TEST_FAILURES


def cmd_report(
    source: Path, out_dir: Path | None = None, stdout: TextIO | None = None, reveal_hidden: bool = False
) -> Exit:
    stdout = stdout or sys.stdout
    try:
        results = Results.load(source)
    except ResultsError as err:
        raise GraderError(f"cannot read results: {err}", Exit.USAGE) from None
    publish(results, out_dir or source.parent, stdout, reveal_hidden=reveal_hidden)
    return Exit.OK


def cmd_release(
    root: Path,
    out: Path,
    force: bool = False,
    verify: bool = True,
    preset: str | None = None,
    jobs: int | None = None,
    keep: bool = False,
    stdout: TextIO | None = None,
    progress: Progress | None = None,
    reference_archs: str = "none",
) -> Exit:
    """Write the student copy into out, then prove it configures, builds and grades (grader/authoring/release.py)."""
    from grader.authoring import release
    from grader.authoring import release_reference
    from grader.authoring import release_verify

    stdout = stdout or sys.stdout
    progress = progress or Progress()
    archs = release_reference.parse_archs(reference_archs)
    made = release.make_release(root, out, force, archs, jobs, progress.step)
    stdout.write(f"release: {len(made.files)} files copied into {made.out}\n")
    libraries = [f for f in made.compiled if f.endswith(".so")]
    if libraries:
        stdout.write(f"  compiled references: {len(libraries)} lab(s) for {release_reference.archs_text(archs)} "
                     "(machine code only, checked: no PTX, no debug information)\n")
    else:
        stdout.write("  no compiled references (--reference-archs none): the copy cannot score perf points\n")
    for why, paths in made.left_out.items():
        stdout.write(f"  left out {len(paths):4d} file(s): {why}\n")
    for rel in made.stripped:
        lab = next((x for x in load_labs(made.out, []) if rel.startswith(f"labs/{x.name}/")), None)
        points = f" ({lab.total_points:g} points in this copy)" if lab else ""
        stdout.write(f"  {rel}: hidden tasks and [hidden] removed{points}\n")
    if made.untracked:
        stdout.write(f"  note: {len(made.untracked)} file(s) not committed yet are in the copy: "
                     + ", ".join(made.untracked[:8]) + (" ..." if len(made.untracked) > 8 else "") + "\n")
    for line in release.dangling_links(made.out):
        stdout.write(f"  warning: {line}\n")
    if not verify:
        stdout.write("not verified (--no-verify): run `make grade` in the copy before handing it out\n")
        return Exit.OK
    v = release_verify.verify(made.out, preset, jobs, source_root=root, keep=keep, step=progress.step)
    if v.ok:
        note = release.release_note(made.commit, v.summary())
        (made.out / release.MARKER).write_text(note, encoding="utf-8")
        stdout.write(f"verified: {v.summary()}\n")
        if v.scratch:
            stdout.write(f"the verification copy is kept in {v.scratch}\n")
        return Exit.OK
    stdout.write("release verification FAILED:\n" + "".join(f"  - {p}\n" for p in v.problems))
    if v.log:
        stdout.write("last output:\n" + v.log + "\n")
    if v.scratch:
        stdout.write(f"the verification copy is kept in {v.scratch}\n")
    if v.stage == "build":
        return Exit.BUILD
    if v.stage == "grade" and v.exit_code in (Exit.USAGE, Exit.BUILD):
        return Exit(v.exit_code)
    return Exit.TEST_FAILURES
