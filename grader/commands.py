"""The verbs of `python3 -m grader`. Each returns an exit code (grader/errors.py); cli.py only parses."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Callable, TextIO

from . import skeleton
from .cmake import Builder, CMakeBuilder
from .doctor import format_checks, run_checks
from .environment import GpuProbe, choose_preset, probe_gpu
from .errors import Exit, GraderError
from .labs import Lab, LabError, discover, select
from .listing import format_builds, format_labs, format_tests
from .pipeline import RunOptions, build_targets, exit_code, run_labs
from .progress import Progress
from .results import Results, ResultsError

DEFAULT_ROOT = Path(__file__).resolve().parent.parent


def repo_root(explicit: str | None = None) -> Path:
    return Path(explicit or os.environ.get("CUDALAB_ROOT") or DEFAULT_ROOT).resolve()


def make_builder(root: Path, preset: str, jobs: int | None) -> Builder:
    return CMakeBuilder(root, preset, jobs)


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
        from .report import render_console, write_reports
    except ImportError:
        return None, None
    return write_reports, render_console


def publish(results: Results, out_dir: Path, stdout: TextIO) -> dict[str, Path]:
    """Write every report into out_dir and print the summary."""
    write_reports, render_console = _reporters()
    if write_reports is None:
        out_dir.mkdir(parents=True, exist_ok=True)
        results.save(out_dir / "results.json")
        paths = {"json": out_dir / "results.json"}
        stdout.write("note: grader/report is not available; only results.json was written\n")
    else:
        paths = write_reports(results, out_dir)
    if render_console is not None:
        render_console(results, stdout, use_color(stdout))
    else:
        stdout.write(format_tests(results, details=True) + "\n")
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
) -> Results:
    labs = load_labs(root, selectors)
    gpu = probe_gpu() if gpu is None else gpu
    progress = progress or Progress()
    progress.note(gpu.brief())
    builder = make_builder(root, choose_preset(gpu, preset), jobs)
    options = RunOptions(mode="solution" if solution else "student", build=build, reference=reference, timeout_s=timeout_s)
    return run_labs(root, labs, builder, gpu, options, progress)


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
) -> Exit:
    stdout = stdout or sys.stdout
    results = _run(root, selectors, solution=solution, preset=preset, jobs=jobs, build=build, reference=False,
                   timeout_s=timeout_s, progress=progress, gpu=gpu)
    stdout.write(format_tests(results) + "\n")
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
) -> Exit:
    stdout = stdout or sys.stdout
    results = _run(root, selectors, solution=solution, preset=preset, jobs=jobs, build=build, reference=True,
                   timeout_s=timeout_s, progress=progress, gpu=gpu)
    publish(results, out_dir or root / "reports", stdout)
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


def cmd_report(source: Path, out_dir: Path | None = None, stdout: TextIO | None = None) -> Exit:
    stdout = stdout or sys.stdout
    try:
        results = Results.load(source)
    except ResultsError as err:
        raise GraderError(f"cannot read results: {err}", Exit.USAGE) from None
    publish(results, out_dir or source.parent, stdout)
    return Exit.OK
