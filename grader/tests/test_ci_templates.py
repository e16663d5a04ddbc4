"""The CI templates (ci/github, ci/gitlab) and the Gradescope bundle (ci/gradescope): the YAML parses and
says what docs/ci.md promises, every grader verb, option and make target they use exists, and the
Gradescope scripts always leave a valid results.json."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from grader.cli import build_parser
from grader.report.schemas import validate_gradescope

ROOT = Path(__file__).resolve().parents[2]
GITHUB = ROOT / "ci" / "github" / "grade.yml"
GITLAB = ROOT / "ci" / "gitlab" / ".gitlab-ci.yml"
GRADESCOPE = ROOT / "ci" / "gradescope"
SCRIPTS = [GITHUB, GITLAB, GRADESCOPE / "setup.sh", GRADESCOPE / "run_autograder"]

try:
    import yaml
except ImportError:  # PyYAML is optional: without it the YAML templates are not parsed
    yaml = None
needs_yaml = pytest.mark.skipif(yaml is None, reason="PyYAML is not installed: the YAML templates are not parsed")


def load(path: Path) -> dict:
    data = yaml.safe_load(path.read_text())
    assert isinstance(data, dict)
    return data


@needs_yaml
def test_github_workflow() -> None:
    wf = load(GITHUB)
    assert set(wf[True] if True in wf else wf["on"]) >= {"push", "workflow_dispatch"}  # YAML 1.1 reads on: as True
    job = wf["jobs"]["grade"]
    assert job["runs-on"] == ["self-hosted", "gpu"]
    steps = job["steps"]
    uses = [s.get("uses", "") for s in steps]
    assert any(u.startswith("actions/checkout@") for u in uses)
    upload = next(s for s in steps if s.get("uses", "").startswith("actions/upload-artifact@"))
    assert upload["with"]["path"] == "reports/" and upload["if"] == "always()"
    grade = next(s for s in steps if s.get("id") == "grade")
    assert "GITHUB_STEP_SUMMARY" in grade["run"] and "make grade" in grade["run"]
    assert "reports/classroom.b64" in grade["run"]
    reporter = next(s for s in steps if "autograding-grading-reporter" in s.get("uses", ""))
    runner = reporter["with"]["runners"]
    assert f"{runner.upper()}_RESULTS" in reporter["env"]  # the reporter reads <ID>_RESULTS


@needs_yaml
def test_gitlab_pipeline() -> None:
    job = load(GITLAB)["grade"]
    assert job["tags"] == ["gpu"]
    assert any(line.startswith("make grade") and "OUT=reports" in line for line in job["script"])
    artifacts = job["artifacts"]
    assert artifacts["when"] == "always" and "reports/" in artifacts["paths"]
    assert artifacts["reports"]["junit"] == "reports/junit.xml"


def _commands(path: Path) -> list[str]:
    """Every shell command line of a template or script (YAML run/script blocks, or the script itself)."""
    if path.suffix in (".yml", ".yaml"):
        text = path.read_text()
        data = yaml.safe_load(text)
        blocks: list[str] = []

        def walk(node: object) -> None:
            if isinstance(node, dict):
                for key, value in node.items():
                    if key in ("run", "script", "before_script", "after_script"):
                        blocks.extend([value] if isinstance(value, str) else list(value))
                    else:
                        walk(value)
            elif isinstance(node, list):
                for item in node:
                    walk(item)

        walk(data)
        return [line for block in blocks for line in block.splitlines()]
    return path.read_text().splitlines()


def _make_targets() -> set[str]:
    return set(re.findall(r"^([a-z][\w-]*):", (ROOT / "Makefile").read_text(), re.MULTILINE))


def _verbs() -> dict[str, set[str]]:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    return {name: {opt for action in p._actions for opt in action.option_strings} for name, p in sub.choices.items()}


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_every_command_exists(path: Path) -> None:
    if path.suffix == ".yml" and yaml is None:
        pytest.skip("PyYAML is not installed: the YAML templates are not parsed")
    targets, verbs = _make_targets(), _verbs()
    seen = 0
    for line in _commands(path):
        line = line.split(" #", 1)[0]
        for m in re.finditer(r"\bmake\s+([a-z][\w-]*)", line):
            assert m.group(1) in targets, f"{path.name}: make {m.group(1)}"
            seen += 1
        for m in re.finditer(r"python3 -m grader ([a-z]+)([^|;&)]*)", line):
            verb, rest = m.group(1), m.group(2)
            assert verb in verbs, f"{path.name}: grader {verb}"
            for token in shlex.split(rest.replace('"${args[@]}"', "")):
                if token.startswith("-") and token != "--help":
                    assert token.split("=", 1)[0] in verbs[verb], f"{path.name}: grader {verb} {token}"
            seen += 1
    assert seen, f"{path.name} runs neither make nor the grader"


def test_scripts_are_executable_and_parse() -> None:
    for name in ("setup.sh", "run_autograder", "make-zip"):
        path = GRADESCOPE / name
        assert os.access(path, os.X_OK), name
        subprocess.run(["bash", "-n", str(path)], check=True)


# --- the Gradescope scripts, for real ----------------------------------------------------------------------


def _autograder(tmp_path: Path, files: dict[str, str]) -> dict:
    base = tmp_path / "autograder"
    (base / "submission").mkdir(parents=True)
    (base / "source").symlink_to(ROOT)
    for rel, text in files.items():
        (base / "submission" / rel).parent.mkdir(parents=True, exist_ok=True)
        (base / "submission" / rel).write_text(text)
    env = {**os.environ, "AUTOGRADER_ROOT": str(base)}
    subprocess.run(["bash", str(GRADESCOPE / "run_autograder")], env=env, check=True, capture_output=True,
                   timeout=120)
    return json.loads((base / "results" / "results.json").read_text())


def test_run_autograder_without_a_lab_file_still_writes_results(tmp_path: Path) -> None:
    data = _autograder(tmp_path, {"notes.txt": "no code here"})
    assert validate_gradescope(data) == []
    assert data["score"] == 0 and "no lab file was found" in data["output"]
    assert "labs/03-vector-add/vector_add.cu" in data["output"]


def test_stage_finds_only_named_files(tmp_path: Path) -> None:
    sub = tmp_path / "sub"
    (sub / "deep" / "labs" / "06-reduce").mkdir(parents=True)
    (sub / "vector_add.cu").write_text("// mine\n")
    (sub / "deep" / "labs" / "06-reduce" / "reduce.cu").write_text("// mine\n")
    (sub / "scan.cu").symlink_to("/etc/passwd")  # links are never followed
    (sub / "test_vector_add.cu").write_text("// not a student file: ignored\n")
    proc = subprocess.run([sys.executable, str(GRADESCOPE / "stage.py"), "--find", str(sub)], check=True,
                          capture_output=True, text=True)
    assert proc.stdout.split() == ["03-vector-add", "06-reduce"]


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_make_zip(tmp_path: Path) -> None:
    out = tmp_path / "autograder.zip"
    subprocess.run([str(GRADESCOPE / "make-zip"), str(out)], check=True, capture_output=True)
    with zipfile.ZipFile(out) as z:
        names = set(z.namelist())
        assert {"setup.sh", "run_autograder", "Makefile", "grader/cli.py", "labs/03-vector-add/lab.toml"} <= names
        assert "solutions/03-vector-add/test_hidden_vector_add.cu" in names
        assert not any(n.startswith(("build/", ".notes/", ".git/")) for n in names)
        assert (z.getinfo("run_autograder").external_attr >> 16) & 0o111
