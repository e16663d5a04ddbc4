"""The CI templates (ci/github, ci/gitlab) and the Gradescope bundle (ci/gradescope).

The templates' jobs are run for real, step by step (grader/tests/workflow_sim.py), with `make` and the
grader replaced by stand-ins that exit 0, 1, 3 and 4 as the grader does: each code must give the job
result, summary text, artifacts and Classroom step it promises. Every grader verb, option and make target
the templates use must exist. run_autograder runs against fake submissions with a stand-in grader that
writes what the real one writes without a GPU, and its results.json must say "not graded: no GPU"."""

from __future__ import annotations

import base64
import json
import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from grader.cli.args import build_parser
from grader.report.schemas import validate_gradescope

from grader.tests.workflow_sim import os_environ_without_ci, run_github_job, run_gitlab_job

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
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


def _on(workflow: dict) -> dict:
    return workflow[True] if True in workflow else workflow["on"]  # YAML 1.1 reads on: as True


# --- the templates' shape --------------------------------------------------------------------------------


@needs_yaml
def test_github_workflow() -> None:
    wf = load(GITHUB)
    assert set(_on(wf)) >= {"push", "workflow_dispatch"}
    job = wf["jobs"]["grade"]
    assert job["runs-on"] == ["self-hosted", "gpu"]
    steps = job["steps"]
    uses = [s.get("uses", "") for s in steps]
    assert any(u.startswith("actions/checkout@") for u in uses)
    upload = next(s for s in steps if s.get("uses", "").startswith("actions/upload-artifact@"))
    assert upload["with"]["path"] == "reports/" and upload["if"] == "always()"
    grade = "\n".join(_code_lines(next(s for s in steps if s.get("id") == "grade")["run"]))
    assert "make grade" not in grade, "make turns the grader's exit code into 2"
    assert "-m grader grade" in grade and "build/.python" in grade
    reporter = next(s for s in steps if "autograding-grading-reporter" in s.get("uses", ""))
    runner = reporter["with"]["runners"]
    assert f"{runner.upper()}_RESULTS" in reporter["env"]  # the reporter reads <ID>_RESULTS
    for step in steps:  # values reach scripts through env:, never pasted into the script's text
        assert "${{" not in step.get("run", ""), step.get("name")


@needs_yaml
def test_gitlab_pipeline() -> None:
    job = load(GITLAB)["grade"]
    assert job["tags"] == ["gpu"]
    script = "\n".join(line for block in job["script"] for line in _code_lines(block))
    assert "make grade" not in script and "-m grader grade" in script and "build/.python" in script
    artifacts = job["artifacts"]
    assert artifacts["when"] == "always" and "reports/" in artifacts["paths"]
    assert artifacts["reports"]["junit"] == "reports/junit.xml"


def _commands(path: Path) -> list[str]:
    """Every shell command line of a template or script (YAML run/script blocks, or the script itself),
    without comment lines and line continuations."""
    if path.suffix not in (".yml", ".yaml"):
        return _code_lines(path.read_text())
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

    walk(yaml.safe_load(path.read_text()))
    return [line for block in blocks for line in _code_lines(block)]


def _code_lines(script: str) -> list[str]:
    return [line.rstrip("\\").rstrip() for line in script.splitlines() if not line.lstrip().startswith("#")]


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
        for m in re.finditer(r"-m grader ([a-z]+)([^|;&)]*)", line):
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


# --- the templates' jobs, run with a stand-in grader -------------------------------------------------------

SUMMARY = "03-vector-add   62/100   passed 48  failed 24  skipped 0"
CLASSROOM = '{"version": 1, "status": "fail", "max_score": 100, "tests": []}'


def _executable(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def _stand_ins(tmp_path: Path, grader_code: int, doctor_code: int = 0, python_env_ok: bool = True) -> dict[str, str]:
    """A bin/ with `make` (doctor, python-env: records a Python in build/.python) and that Python, which
    for `-m grader grade` prints a summary, writes reports/ and exits grader_code. Returns the env."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls.log"
    python = _executable(bin_dir / "stand-in-python", f"""#!/bin/bash
echo "python $*" >> "{calls}"
[ "$1 $2 $3" = "-m grader grade" ] || {{ echo "stand-in python: unexpected $*" >&2; exit 2; }}
out=""; prev=""
for a in "$@"; do [ "$prev" = "--out" ] && out=$a; prev=$a; done
mkdir -p "$out"
for f in results.json report.html junit.xml gradescope.json grades.csv; do echo "{{}}" > "$out/$f"; done
echo '{CLASSROOM}' > "$out/classroom.json"
base64 -w 76 "$out/classroom.json" > "$out/classroom.b64"
echo "{SUMMARY}"
echo "progress lines go to stderr" >&2
exit {grader_code}
""")
    python_env = f'mkdir -p build; echo "{python}" > build/.python; echo "python-env: using {python}"' if python_env_ok \
        else 'echo "python-env: could not install requirements.txt (no network?)" >&2; exit 4'
    _executable(bin_dir / "make", f"""#!/bin/bash
echo "make $*" >> "{calls}"
case "$1" in
  doctor) echo "doctor: stand-in"; exit {doctor_code} ;;
  python-env) {python_env} ;;
  *) echo "stand-in make: no target $1" >&2; exit 2 ;;
esac
""")
    env = os_environ_without_ci()
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    return env


class Actions:
    """Stand-ins for the actions grade.yml uses; each records what it was given."""

    def __init__(self) -> None:
        self.calls: dict[str, list[dict]] = {}

    def _record(self, action: str, **kw: object) -> None:
        self.calls.setdefault(action, []).append(kw)

    def checkout(self, with_: dict, env: dict, ws: Path) -> int:
        self._record("checkout")
        return 0

    def upload(self, with_: dict, env: dict, ws: Path) -> int:
        files = sorted(p.name for p in (ws / with_["path"]).glob("*")) if (ws / with_["path"]).is_dir() else []
        self._record("upload", name=with_["name"], files=files)
        return 0

    def reporter(self, with_: dict, env: dict, ws: Path) -> int:
        runner = with_["runners"]
        self._record("reporter", result=env.get(f"{runner.upper()}_RESULTS", ""))
        return 0

    def table(self) -> dict:
        return {"actions/checkout": self.checkout, "actions/upload-artifact": self.upload,
                "classroom-resources/autograding-grading-reporter": self.reporter}


def _github(tmp_path: Path, grader_code: int, lab: str = "", **kw: object):
    env = _stand_ins(tmp_path, grader_code, **kw)  # type: ignore[arg-type]
    actions = Actions()
    job = run_github_job(load(GITHUB), "grade", tmp_path / "ws", env, actions.table(),
                         github={"actor": "ada", "ref": "refs/heads/main"}, variables={"CUDALAB_LAB": lab})
    return job, actions, (tmp_path / "calls.log").read_text()


# grader exit code -> (what the summary and the last step say, whether Classroom gets a score)
VERDICTS = {
    0: ("every test passed", True),
    1: ("some tests failed", True),
    3: ("a lab did not build", True),
    4: ("not graded: no GPU or no CUDA toolkit on this runner", False),
}


@needs_yaml
@pytest.mark.parametrize("code", sorted(VERDICTS))
def test_github_job_follows_the_graders_exit_code(tmp_path: Path, code: int) -> None:
    job, actions, calls = _github(tmp_path, code, lab="03")
    verdict, scored = VERDICTS[code]
    # the grader itself ran, with the Python make python-env recorded, on the lab asked for
    assert "make python-env" in calls and "make grade" not in calls
    assert "python -m grader grade 03 --out reports" in calls
    assert job.ran and job.result == ("success" if code == 0 else "failure")
    grade = job.step("Grade")
    assert grade.conclusion == "success" and SUMMARY in grade.output
    assert job.outputs["grade"]["code"] == str(code)
    # the summary page: the verdict, the grader's code, and its console summary
    assert f"### cudalab: 03: {verdict} (grader exit {code})" in job.summary
    assert SUMMARY in job.summary and "progress lines" not in job.summary
    assert "`cudalab-report` artifact" in job.summary
    # the report is uploaded whatever the code
    assert actions.calls["upload"] == [{"name": "cudalab-report", "files": [
        "classroom.b64", "classroom.json", "grades.csv", "gradescope.json", "junit.xml", "report.html",
        "results.json"]}]
    # GitHub Classroom gets a score only from a run that graded: no GPU is not zero points
    reporter = job.step("Autograding reporter (GitHub Classroom)")
    if scored:
        assert reporter.ran and base64.b64decode(actions.calls["reporter"][0]["result"]).decode().strip() == CLASSROOM
    else:
        assert not reporter.ran and "reporter" not in actions.calls
        assert "result" not in job.outputs["grade"]
    # the last step fails the job for every code but 0, and names the reason
    result = job.step("Result")
    assert result.ran and result.exit_code == code
    if code:
        assert f"::error::{verdict.split(':')[0]}" in result.output
    else:
        assert "every test passed" in result.output and "::error::" not in result.output


@needs_yaml
def test_github_job_every_lab_and_a_missing_toolchain(tmp_path: Path) -> None:
    job, actions, calls = _github(tmp_path, 4, lab="", doctor_code=4)
    assert "python -m grader grade --out reports" in calls  # no LAB: every lab
    doctor = job.step("Toolchain and GPU")
    assert doctor.outcome == "failure" and doctor.conclusion == "success"  # it informs, the grade step decides
    assert job.step("Grade").ran and "### cudalab: every lab: not graded" in job.summary
    assert job.result == "failure" and "no usable GPU or no CUDA toolkit" in job.step("Result").output


@needs_yaml
def test_github_job_without_the_graders_python(tmp_path: Path) -> None:
    job, actions, calls = _github(tmp_path, 0, lab="03", python_env_ok=False)
    assert "-m grader" not in calls
    assert job.outputs["grade"]["code"] == "2"
    assert "the grader could not start (usage or setup error) (grader exit 2)" in job.summary
    assert "could not install requirements.txt" in job.summary
    assert job.result == "failure" and job.step("Result").exit_code == 2
    assert "::error::the grader could not start" in job.step("Result").output
    assert "reporter" not in actions.calls and actions.calls["upload"][0]["files"] == []


@needs_yaml
def test_github_job_skips_classroom_bot_pushes(tmp_path: Path) -> None:
    env = _stand_ins(tmp_path, 0)
    job = run_github_job(load(GITHUB), "grade", tmp_path / "ws", env, Actions().table(),
                         github={"actor": "github-classroom[bot]"}, variables={})
    assert not job.ran and job.result == "skipped"


GITLAB_VERDICTS = {
    0: "cudalab: every test passed",
    1: "cudalab: some tests failed",
    3: "cudalab: a lab did not build",
    4: "cudalab: not graded: this runner has no usable GPU or no CUDA toolkit",
}


@needs_yaml
@pytest.mark.parametrize("code", sorted(GITLAB_VERDICTS))
def test_gitlab_job_follows_the_graders_exit_code(tmp_path: Path, code: int) -> None:
    env = _stand_ins(tmp_path, code)
    job = run_gitlab_job(load(GITLAB), "grade", tmp_path / "ws", env, variables={"LAB": "03"})
    calls = (tmp_path / "calls.log").read_text()
    assert "make grade" not in calls and "python -m grader grade 03 --out reports" in calls
    assert job.exit_code == code and job.result == ("success" if code == 0 else "failure")
    assert GITLAB_VERDICTS[code] in job.output and SUMMARY in job.output
    assert [p.name for p in job.artifacts] == ["reports"]  # kept even when the job fails
    assert job.junit is not None and job.junit.name == "junit.xml"


@needs_yaml
def test_gitlab_job_with_a_failing_doctor_still_grades(tmp_path: Path) -> None:
    env = _stand_ins(tmp_path, 4, doctor_code=4)
    job = run_gitlab_job(load(GITLAB), "grade", tmp_path / "ws", env)
    calls = (tmp_path / "calls.log").read_text()
    assert "python -m grader grade --out reports" in calls  # LAB empty: every lab
    assert job.exit_code == 4 and GITLAB_VERDICTS[4] in job.output


# --- the Gradescope bundle, run for real with a stand-in grader -------------------------------------------


def _stand_in_python(tmp_path: Path) -> Path:
    """A python3 that runs fake_grader.py for `-m grader ...` and this interpreter for everything else."""
    return _executable(tmp_path / "python3", f"""#!/bin/bash
if [ "$1 $2" = "-m grader" ]; then exec "{sys.executable}" "{HERE / 'fake_grader.py'}" "$@"; fi
exec "{sys.executable}" "$@"
""")


def _autograder(tmp_path: Path, files: dict[str, str], gpu: bool = False, labs: str = "") -> tuple[dict, str]:
    base = tmp_path / "autograder"
    (base / "submission").mkdir(parents=True)
    (base / "source").symlink_to(ROOT)
    for rel, text in files.items():
        (base / "submission" / rel).parent.mkdir(parents=True, exist_ok=True)
        (base / "submission" / rel).write_text(text)
    env = {**os.environ, "AUTOGRADER_ROOT": str(base), "PYTHON": str(_stand_in_python(tmp_path)),
           "FAKE_GPU": "1" if gpu else "0", "LABS": labs}
    pristine = {p: p.read_bytes() for p in sorted((ROOT / "labs").glob("*/*.cu"))}
    proc = subprocess.run(["bash", str(GRADESCOPE / "run_autograder")], env=env, check=True, capture_output=True,
                          text=True, timeout=120)
    assert {p: p.read_bytes() for p in sorted((ROOT / "labs").glob("*/*.cu"))} == pristine  # the tree is untouched
    data = json.loads((base / "results" / "results.json").read_text())
    assert validate_gradescope(data) == [], data
    return data, proc.stdout + proc.stderr


GOOD = "// mine\nvoid f() { cudaMalloc(nullptr, 0); }\n"


def test_run_autograder_without_a_gpu_reports_checks_not_a_grade(tmp_path: Path) -> None:
    data, log = _autograder(tmp_path, {"vector_add.cu": GOOD, "deep/labs/06-reduce/reduce.cu": "// no technique\n"})
    assert "grader exit code: 4" in log
    assert data["score"] == 0 and data["extra_data"]["graded"] is False and data["extra_data"]["reason"] == "no GPU"
    out = data["output"]
    assert out.startswith("Not graded: no GPU.") and "no NVIDIA GPU" in out and "not failures" in out
    assert "is not your grade" in out and "Your grade comes from your instructor" in out
    assert "Lab 03 " in out and "Lab 06 " in out
    entries = {t["name"]: t for t in data["tests"]}
    for lab in ("03", "06"):
        assert entries[f"Lab {lab} · build"]["status"] == "passed"
        assert entries[f"Lab {lab} · lab-file checks"]["status"] == "passed"
        not_run = entries[f"Lab {lab} · GPU tests: not run (no GPU)"]
        assert "status" not in not_run and "did not run" in not_run["output"] and "Not run is not failed" in \
            not_run["output"]
    assert entries["Lab 03 · technique checks"]["status"] == "passed"
    assert entries["Lab 06 · technique checks"]["status"] == "failed"
    assert "withhold points" in entries["Lab 06 · technique checks"]["output"]
    for entry in data["tests"]:  # checks carry no points: nothing dressed as a grade
        assert "score" not in entry and "max_score" not in entry
    assert "SecretHidden" not in json.dumps(data)


def test_run_autograder_reports_a_compile_error_and_a_refusal(tmp_path: Path) -> None:
    data, _ = _autograder(tmp_path, {"labs/03-vector-add/vector_add.cu": "#error no\n",
                                     "reduce.cu": "void f() { fopen(0, 0); }\n"})
    entries = {t["name"]: t for t in data["tests"]}
    assert entries["Lab 03 · build"]["status"] == "failed" and "#error" in entries["Lab 03 · build"]["output"]
    assert "Lab 03 · GPU tests: not run (no GPU)" not in entries  # nothing could run, GPU or not
    refused = entries["Lab 06 · lab-file checks"]
    assert refused["status"] == "failed" and "the lab file was refused: fopen" in refused["output"]
    assert "did not build" in data["output"] and "the lab file was refused" in data["output"]


def test_run_autograder_with_a_gpu_hands_on_the_graders_grade(tmp_path: Path) -> None:
    data, log = _autograder(tmp_path, {"vector_add.cu": GOOD}, gpu=True)
    assert "grader exit code: 0" in log and "Not graded" not in data["output"]
    graders = json.loads((tmp_path / "autograder/results/cudalab/gradescope.json").read_text())
    assert data == graders and data["score"] == data["extra_data"]["max_score"] > 0


def test_run_autograder_without_a_lab_file_still_writes_results(tmp_path: Path) -> None:
    data, _ = _autograder(tmp_path, {"notes.txt": "no code here"})
    assert data["score"] == 0 and "no lab file was found" in data["output"]
    assert "labs/03-vector-add/vector_add.cu" in data["output"]


def test_run_autograder_labs_setting_picks_the_lab(tmp_path: Path) -> None:
    data, _ = _autograder(tmp_path, {"vector_add.cu": GOOD, "reduce.cu": GOOD}, labs="06-reduce")
    assert {t["name"].split(" · ")[0] for t in data["tests"]} == {"Lab 06"}


def test_stage_finds_only_named_files(tmp_path: Path) -> None:
    sub = tmp_path / "sub"
    (sub / "deep" / "labs" / "06-reduce").mkdir(parents=True)
    (sub / "vector_add.cu").write_text("// mine\n")
    (sub / "deep" / "labs" / "06-reduce" / "reduce.cu").write_text("// mine 06\n")
    (sub / "scan.cu").symlink_to("/etc/passwd")  # links are never followed
    (sub / "test_vector_add.cu").write_text("// not a student file: ignored\n")
    proc = subprocess.run([sys.executable, str(GRADESCOPE / "stage.py"), "--find", str(sub)], check=True,
                          capture_output=True, text=True)
    assert proc.stdout.split() == ["03-vector-add", "06-reduce"]
    dest = tmp_path / "staged"
    proc = subprocess.run([sys.executable, str(GRADESCOPE / "stage.py"), str(sub), str(dest)], check=True,
                          capture_output=True, text=True)
    assert proc.stdout.split() == ["03-vector-add", "06-reduce"]
    copied = sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file())
    assert copied == ["labs/03-vector-add/vector_add.cu", "labs/06-reduce/reduce.cu"]
    assert (dest / "labs/06-reduce/reduce.cu").read_text() == "// mine 06\n"


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_make_zip(tmp_path: Path) -> None:
    out = tmp_path / "autograder.zip"
    subprocess.run([str(GRADESCOPE / "make-zip"), str(out)], check=True, capture_output=True)
    with zipfile.ZipFile(out) as z:
        names = set(z.namelist())
        assert {"setup.sh", "run_autograder", "Makefile", "grader/cli/args.py", "labs/03-vector-add/lab.toml",
                "ci/gradescope/results.py", "ci/gradescope/stage.py"} <= names
        assert "solutions/03-vector-add/test_hidden_vector_add.cu" in names
        assert not any(n.startswith(("build/", ".notes/", ".git/")) for n in names)
        assert (z.getinfo("run_autograder").external_attr >> 16) & 0o111


@pytest.mark.skipif(os.environ.get("CUDALAB_SLOW_TESTS") != "1" or shutil.which("nvcc") is None,
                    reason="builds lab 03 with nvcc: set CUDALAB_SLOW_TESTS=1")
def test_run_autograder_with_the_real_grader(tmp_path: Path) -> None:
    """The real grader on a machine without a GPU, end to end (lab 03's skeleton as the submission)."""
    if Path("/dev/nvidia0").exists():
        pytest.skip("this machine has a GPU: the no-GPU path is what is tested here")
    base = tmp_path / "autograder"
    (base / "submission").mkdir(parents=True)
    (base / "source").symlink_to(ROOT)
    shutil.copyfile(ROOT / "labs/03-vector-add/vector_add.cu", base / "submission" / "vector_add.cu")
    python = _executable(tmp_path / "python3", f'#!/bin/bash\nexec "{sys.executable}" "$@"\n')
    env = {**os.environ, "AUTOGRADER_ROOT": str(base), "PYTHON": str(python),
           "CUDALAB_SUBMISSION_BUILD_DIR": str(tmp_path / "build-submission")}
    proc = subprocess.run(["bash", str(GRADESCOPE / "run_autograder")], env=env, check=True, capture_output=True,
                          text=True, timeout=1800)
    assert "grader exit code: " in proc.stdout
    data = json.loads((base / "results" / "results.json").read_text())
    assert validate_gradescope(data) == [] and data["output"].startswith("Not graded: no GPU.")
    entries = {t["name"]: t for t in data["tests"]}
    assert entries["Lab 03 · build"]["status"] == "passed"
    assert entries["Lab 03 · lab-file checks"]["status"] == "passed"
    assert entries["Lab 03 · technique checks"]["status"] == "failed"  # the skeleton has no cudaMalloc
    assert "status" not in entries["Lab 03 · GPU tests: not run (no GPU)"]
