"""The project as something to adopt and install: licences, one version, the wheel, `make help`, `make demo`
in a student release."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import grader

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

REPO = Path(__file__).resolve().parents[2]
NETWORK = os.environ.get("CUDALAB_NETWORK_TESTS") == "1"  # opt in: pip may fetch setuptools for the build


# --- licences and version ---------------------------------------------------------------------------------


def test_licences_are_there_and_named_in_the_readme() -> None:
    assert (REPO / "LICENSE").read_text().startswith("MIT License")
    assert "Creative Commons Attribution 4.0 International Public License" in (REPO / "LICENSE-CC-BY-4.0").read_text()
    readme = (REPO / "README.md").read_text()
    assert "[LICENSE](LICENSE)" in readme and "[LICENSE-CC-BY-4.0](LICENSE-CC-BY-4.0)" in readme


def test_one_version() -> None:
    """grader/__init__.py holds the version; pyproject.toml reads it; the changelog's newest entry names it."""
    assert re.fullmatch(r"\d+\.\d+\.\d+", grader.__version__)
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert "version" not in pyproject["project"] and pyproject["project"]["dynamic"] == ["version"]
    assert pyproject["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "grader.__version__"}
    newest = re.search(r"^## (\S+)", (REPO / "CHANGELOG.md").read_text(), re.M)
    assert newest is not None and newest.group(1) == grader.__version__


def test_version_flag(capsys) -> None:
    from grader.cli import args as cli

    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--version"])
    assert exit_info.value.code == 0 and capsys.readouterr().out.strip() == f"cudalab grader {grader.__version__}"


def test_results_and_the_html_report_carry_the_version() -> None:
    from grader.host.environment import GpuProbe, new_run_info
    from grader.report.html import render_html
    from grader.report.sample import sample_results

    assert new_run_info(REPO, "student", GpuProbe(False, reason="none")).grader_version == grader.__version__
    results = sample_results()
    results.run.grader_version = "9.8.7"
    assert re.search(r"grader</[a-z]+>\s*<[a-z]+[^>]*>9\.8\.7<", render_html(results))


# --- the wheel --------------------------------------------------------------------------------------------


def _source_copy(dest: Path) -> Path:
    """What the wheel is built from (the checkout's build/ is CMake's: a copy keeps setuptools out of it)."""
    for name in ("pyproject.toml", "README.md", "LICENSE", "LICENSE-CC-BY-4.0"):
        shutil.copy2(REPO / name, dest / name)
    shutil.copytree(REPO / "grader", dest / "grader", ignore=shutil.ignore_patterns("__pycache__", "tests"))
    return dest


def _can_build_offline() -> str:
    """'' when setuptools can build a wheel here without fetching anything, else why not."""
    if importlib.util.find_spec("setuptools") is None:
        return "setuptools is not installed"
    import setuptools

    major, minor = (int(x) for x in setuptools.__version__.split(".")[:2])
    if (major, minor) < (61, 0):
        return f"setuptools {setuptools.__version__} is older than 61"
    if (major, minor) < (70, 1) and importlib.util.find_spec("wheel") is None:
        return f"setuptools {setuptools.__version__} needs the wheel package to build a wheel"
    return ""


def _build_wheel(tmp_path: Path, isolated: bool) -> Path:
    (tmp_path / "src").mkdir()
    src = _source_copy(tmp_path / "src")
    out = tmp_path / "wheels"
    cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--disable-pip-version-check", "-w", str(out), str(src)]
    if not isolated:
        cmd.insert(4, "--no-build-isolation")
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:]
    wheels = list(out.glob("cudalab_grader-*.whl"))
    assert len(wheels) == 1, proc.stdout[-3000:]
    return wheels[0]


def _check_wheel(wheel: Path) -> None:
    assert wheel.name == f"cudalab_grader-{grader.__version__}-py3-none-any.whl"
    names = set(zipfile.ZipFile(wheel).namelist())
    # every file of the package, Python or data (templates, allowlists, hints), and none of its tests
    source = {str(p.relative_to(REPO)) for p in (REPO / "grader").rglob("*")
              if p.is_file() and "__pycache__" not in p.parts and "tests" not in p.relative_to(REPO).parts}
    assert {"grader/isolate/confine.py", "grader/inspect/allowlist.toml", "grader/report/templates/report.html.j2"} <= source
    assert sorted(source - names) == []
    assert not [n for n in names if n.startswith("grader/tests/")]
    info = f"cudalab_grader-{grader.__version__}.dist-info"
    assert f"{info}/licenses/LICENSE" in names or f"{info}/LICENSE" in names
    entry_points = zipfile.ZipFile(wheel).read(f"{info}/entry_points.txt").decode()
    assert "cudalab-grader = grader.cli.args:main" in entry_points


def test_pip_wheel_builds_offline(tmp_path: Path) -> None:
    why = _can_build_offline()
    if why:
        pytest.skip(f"pip wheel --no-build-isolation cannot run here: {why}")
    _check_wheel(_build_wheel(tmp_path, isolated=False))


@pytest.mark.skipif(not NETWORK, reason="CUDALAB_NETWORK_TESTS=1 lets pip fetch setuptools for an isolated build")
def test_pip_wheel_builds_isolated(tmp_path: Path) -> None:
    _check_wheel(_build_wheel(tmp_path, isolated=True))


# --- make -------------------------------------------------------------------------------------------------


def _make(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["make", "--no-print-directory", *args], cwd=cwd, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=60)


needs_make = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


@needs_make
def test_make_help_lists_every_verb() -> None:
    makefile = (REPO / "Makefile").read_text()
    phony = re.search(r"^\.PHONY:(.*)$", makefile, re.M)
    assert phony is not None
    verbs = phony.group(1).split()
    rules = re.findall(r"^([a-z-]+):", makefile, re.M)
    assert sorted(rules) == sorted(verbs)  # every verb has a rule, every rule is a verb
    proc = _make(REPO, "help")
    assert proc.returncode == 0
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("make VERB")
    listed = [line.split()[0] for line in lines[1:]]
    assert listed == rules  # in the Makefile's order, nothing else (no stray line)
    assert all(len(line.split(None, 1)) == 2 for line in lines[1:])  # each with its description


@needs_make
def test_make_demo_in_a_student_release_says_the_reference_is_not_included(tmp_path: Path) -> None:
    shutil.copy2(REPO / "Makefile", tmp_path / "Makefile")
    (tmp_path / "ci").mkdir()
    stub = tmp_path / "ci" / "python-env"  # the release's own ci/python-env: nothing to do here
    stub.write_text("#!/bin/sh\nexit 0\n")
    stub.chmod(0o755)
    proc = _make(tmp_path, "demo", "PRESET=ci", "PYTHON=/nonexistent/python")
    assert proc.returncode == 0, proc.stdout
    assert "the reference solutions are not included in this copy" in proc.stdout
    assert "make grade" in proc.stdout and "Error" not in proc.stdout


# --- docs -------------------------------------------------------------------------------------------------

DOCS = ["README.md", "CHANGELOG.md", "docs/design.md", "docs/getting-started.md", "docs/authoring-a-lab.md",
        "labs/06-reduce/README.md", "labs/11-quicksort/README.md"]


@pytest.mark.parametrize("doc", DOCS)
def test_docs_link_only_to_what_exists(doc: str) -> None:
    text = (REPO / doc).read_text()
    targets = [t.split("#")[0] for t in re.findall(r"\]\(([^)\s]+)\)", text)]
    missing = [t for t in targets if t and "://" not in t and not (REPO / doc).parent.joinpath(t).exists()]
    assert missing == []
    for gone in ("research/", "LABS.md", "student guide", "DESIGN.md", "CMake ≥ 3.24"):
        assert gone not in text, gone


def test_one_cmake_minimum() -> None:
    """The presets file's cmakeMinimumRequired is the minimum CMakeLists.txt and the docs state."""
    import json

    needed = json.loads((REPO / "CMakePresets.json").read_text())["cmakeMinimumRequired"]
    version = f"{needed['major']}.{needed['minor']}"
    assert re.search(rf"^cmake_minimum_required\(VERSION {re.escape(version)}\)", (REPO / "CMakeLists.txt").read_text())
    assert f"CMake ≥ {version}" in (REPO / "README.md").read_text()
    assert f"CMake ≥ {version}" in (REPO / "docs" / "design.md").read_text()
