"""The proof that a student release works (grader/authoring/release.py makes it): a scratch copy of the released
tree is checked for leaks (release.check_tree), configured with the preset for this machine ("ci" without
a GPU), every student binary is built, and `make grade` must write every report and exit 0, 1 or 4. Its
results.json must show only student binaries: no solution, no hidden test.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from grader.authoring.release import REPORT_FILES, check_tree


@dataclass
class Verification:
    ok: bool
    stage: str  # where it stopped: "tree" (leaks), "build", "grade"; "done" when ok
    exit_code: int | None  # of the grade
    preset: str
    built: int  # student binaries found after the build
    problems: list[str]
    log: str  # the last lines of what the commands printed
    seconds: float
    scratch: Path | None  # kept when the verification failed

    def summary(self) -> str:
        if not self.ok:
            return "FAILED: " + "; ".join(self.problems)
        meaning = {0: "every test passed", 1: "tests failed, as a skeleton's do",
                   4: "no GPU here, so no test could run"}.get(self.exit_code or 0, "")
        return (f"configured (preset {self.preset}), built {self.built} student binaries, `make grade` wrote "
                f"every report (exit {self.exit_code}: {meaning}) in {self.seconds:.0f} s")


def _default_preset() -> str:
    from grader.host.environment import choose_preset, probe_gpu

    return choose_preset(probe_gpu(), None)


def _run_logged(cmd: list[str], cwd: Path, log: list[str], env: dict[str, str], timeout: float) -> int:
    log.append("$ " + " ".join(cmd))
    try:
        proc = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              errors="replace", env=env, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        log.append(f"(did not finish in {timeout:g} s)")
        return 124
    except OSError as err:
        log.append(str(err))
        return 127
    log.extend(proc.stdout.splitlines())
    return proc.returncode


def verify(out: Path, preset: str | None = None, jobs: int | None = None, source_root: Path | None = None,
           python: str | None = None, keep: bool = False, step: Callable[[str], None] | None = None,
           timeout_s: float = 7200.0) -> Verification:
    """Configure, build and grade a scratch copy of the released tree. ok when nothing leaks, every
    student binary builds, and `make grade` exits 0, 1 or 4 with every report written."""
    step = step or (lambda _msg: None)
    start = time.monotonic()
    preset = preset or _default_preset()
    python = python or sys.executable
    problems = check_tree(out, source_root)
    log: list[str] = []
    scratch = Path(tempfile.mkdtemp(prefix="cudalab-release-verify-"))
    tree = scratch / "cudalab"
    shutil.copytree(out, tree, symlinks=True)
    env = {k: v for k, v in os.environ.items() if k not in ("CUDALAB_ROOT", "PYTHONPATH")}
    env["PYTHON"] = python
    reports = scratch / "reports"
    code: int | None = None
    built = 0
    if not problems:
        step(f"building every student binary (preset {preset})")
        cmd = [python, "-m", "grader", "build", "--all", "--preset", preset] + (["-j", str(jobs)] if jobs else [])
        rc = _run_logged(cmd, tree, log, env, timeout_s)
        bin_dir = tree / "build" / preset / "bin"
        built = len(list(bin_dir.glob("lab[0-9][0-9]_student"))) if bin_dir.is_dir() else 0
        if rc != 0:
            problems.append(f"`grader build --all` exited {rc}")
        for name in ("build.ninja", "Makefile", "compile_commands.json"):
            graph = tree / "build" / preset / name
            if graph.is_file() and re.search(r"[/\\]solutions[/\\]", graph.read_text(errors="replace")):
                problems.append(f"build/{preset}/{name} references solutions/: the release builds only with them")
        extra = bin_dir.glob("lab[0-9][0-9]_*") if bin_dir.is_dir() else []
        timed = _compiled_reference_targets(tree)
        problems += [f"{b.name} was built: the release has binaries beyond the student's" for b in extra
                     if (not b.name.endswith("_student") or "_hidden_" in b.name) and b.name not in timed]
    if not problems:
        step("running make grade in the copy")
        if shutil.which("make"):
            cmd = ["make", "grade", f"OUT={reports}", f"PRESET={preset}", f"PYTHON={python}"]
        else:
            cmd = [python, "-m", "grader", "grade", "--preset", preset, "--out", str(reports)]
        code = _run_logged(cmd, tree, log, env, timeout_s)
        # make reports a failing recipe as 2; the grade's own code is in the log ("Error N")
        if cmd[0] == "make" and code == 2:
            m = re.search(r"\[Makefile:\d+: grade\] Error (\d+)", "\n".join(log[-20:]))
            code = int(m.group(1)) if m else code
        if code not in (0, 1, 4):
            problems.append(f"the grade exited {code} (0, 1 or 4 expected)")
        missing = [f for f in REPORT_FILES if not (reports / f).is_file() or (reports / f).stat().st_size == 0]
        if missing:
            problems.append("the grade did not write " + ", ".join(missing))
        problems += _check_results(reports / "results.json", _compiled_reference_targets(tree))
    ok = not problems
    if ok and not keep:
        shutil.rmtree(scratch, ignore_errors=True)
    stage = "done" if ok else ("tree" if not log else ("build" if code is None else "grade"))
    return Verification(ok, stage, code, preset, built, problems, "\n".join(log[-60:]),
                        time.monotonic() - start, None if ok and not keep else scratch)


def _compiled_reference_targets(tree: Path) -> set[str]:
    """labNN_solution for each lab whose compiled reference the release ships (the tests linked with it)."""
    from grader.build.targets import has_compiled_reference
    from grader.model.labs import discover

    try:
        return {f"{lab.target_prefix}_solution" for lab in discover(tree) if has_compiled_reference(lab)}
    except Exception:  # noqa: BLE001 - a tree that does not load is reported by check_tree
        return set()


def _check_results(path: Path, timed: set[str] | None = None) -> list[str]:
    """The grade of a release saw only student binaries, and the compiled references' (timed): no
    solution source, no hidden test."""
    timed = timed or set()
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return []  # reported as a missing report already
    problems = []
    for lab in data.get("labs", []):
        for build in lab.get("builds", []):
            target = str(build.get("target", ""))
            if target in timed:
                if not build.get("ok"):
                    problems.append(f"lab {lab.get('name')}: {target} (the compiled reference's tests) did not build")
            elif not target.endswith(("_student", "_student_object", "_student_code")) or "_hidden_" in target:
                problems.append(f"lab {lab.get('name')}: the grade built {build.get('target')}")
            elif not build.get("ok"):
                problems.append(f"lab {lab.get('name')}: {build.get('target')} did not build")
        if any(t.get("binary") == "hidden" for t in lab.get("tests", [])):
            problems.append(f"lab {lab.get('name')}: hidden tests ran")
    return problems
