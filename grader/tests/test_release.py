"""`grader release`: what the student copy holds, how lab.toml loses its hidden entries, what the
verification checks (tiny fake trees, no cmake), and one slow end-to-end release of this repository
(CUDALAB_SLOW_TESTS=1: it compiles every lab)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grader.cli import args as cli
from grader.authoring import release
from grader.authoring import release_names
from grader.authoring import release_verify
from grader.model.errors import Exit
from grader.model.labs import discover
from grader.authoring.release import (
    ReleaseError,
    check_tree,
    dangling_links,
    make_release,
    plan,
    strip_hidden,
)

from grader.tests.conftest import LAB_TOML, write_lab

ROOT = Path(__file__).resolve().parents[2]

HIDDEN_PART = """
# Hidden tests: other sizes (this comment goes with the task below).
[[task]]
id = "secret"
title = "Hidden tests"
points = 10
tests = ["AddHidden*"]
hidden = true

[hidden]
visibility = "after_due_date"

[[perf]]
test = "AddHiddenPerf.Big"
task = "secret"
points = 0

[[technique]]
task = "secret"
kind = "symbol"
pattern = "cudaMalloc"
message = "hidden technique"

[[technique]]
task = "small"
kind = "symbol"
pattern = "cudaMemcpy"
message = "public technique"
"""


INSTRUCTOR_README = """# fake (the instructor's README)
See [the guide](docs/getting-started.md) and [staff](docs/instructors.md); `make demo` grades solutions/.

## Licence

The code is under the MIT licence: [LICENSE](LICENSE).

## Layout
"""


def fake_repo(root: Path, git: bool = True) -> Path:
    """A tiny instructor tree: one lab with hidden tests, instructor docs, CI bundles, build outputs."""
    write_lab(root, toml="# Lab 01 rubric (docs/authoring-a-lab.md describes every key).\n" + LAB_TOML + HIDDEN_PART)
    files = {
        "README.md": INSTRUCTOR_README,
        "LICENSE": "MIT License\n",
        "Makefile": "grade:\n\t@echo grade\n",
        "labs/01-add/README.md": "# Lab 01\nEdit `labs/01-add/add.cu`; the tests are in `labs/01-add/test_add.cu`.\n",
        "labs/01-add/test_add.cu": "// public tests\n",
        "labs/01-add/test_hidden_stray.cu": "// a hidden test in the wrong place\n",
        "solutions/01-add/test_hidden_add.cu": "// AddHiddenCorrectness\n",
        "docs/getting-started.md": "# start (the instructor's)\n`make demo` shows the reference.\n",
        "docs/timing.md": "# timing\nSee [getting started](getting-started.md).\n",
        "docs/instructors.md": "# staff only\n",
        "docs/design.md": "# architecture\n",
        "docs/notes-for-tas.md": "# a staff page release.py has never heard of\n",
        "CMakeLists.txt": "# builds solutions/NN-slug/ where it exists: code may name it\n",
        ".notes/plan.md": "notes\n",
        "ci/gradescope/setup.sh": "#!/bin/sh\n",
        "ci/github/grade.yml": "name: grade\n",
        "ci/gpu-check": "#!/bin/sh\n",
        "ci/python-env": "#!/bin/sh\n",
        "grader/__init__.py": "",
        "grader/tests/test_x.py": "",
        ".ci/run": "#!/bin/sh\n",
        ".gitignore": "/build/\n",
        "build/ci/CMakeCache.txt": "ignored\n",
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    if git:
        subprocess.run(["git", "init", "-q", str(root)], check=True)
        subprocess.run(["git", "-C", str(root), "add", "-A"], check=True)
        (root / "untracked.txt").write_text("new\n")  # untracked, not ignored: goes in, with a note
    return root


needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


# --- lab.toml ----------------------------------------------------------------------------------------


def test_strip_hidden_removes_every_hidden_entry() -> None:
    text = LAB_TOML + HIDDEN_PART
    out = strip_hidden(text)
    assert "secret" not in out and "[hidden]" not in out and "Hidden tests" not in out
    assert "hidden technique" not in out and "AddHiddenPerf" not in out
    assert "public technique" in out and 'id = "small"' in out and 'id = "large"' in out
    assert "\n\n\n" not in out
    assert strip_hidden(LAB_TOML) == LAB_TOML  # nothing hidden: unchanged


def test_strip_hidden_refuses_what_it_cannot_remove() -> None:
    with pytest.raises(ReleaseError, match="hidden"):
        strip_hidden(LAB_TOML.replace("[lab]", "hidden = { visibility = 'hidden' }\n[lab]"))
    with pytest.raises(ReleaseError, match="names hidden tests"):
        strip_hidden(LAB_TOML.replace('tests = ["AddCorrectness.Small/*"]', 'tests = ["AddHidden*"]'))


def test_real_lab_tomls_strip_to_valid_labs(tmp_path: Path) -> None:
    for lab in discover(ROOT):
        text = (lab.path / "lab.toml").read_text()
        stripped = strip_hidden(text, lab.name)
        assert release.hidden_keys(stripped) == []
        if not any(t.hidden for t in lab.tasks):
            assert stripped == text or "\n\n\n" in text, lab.name


# --- the copy -------------------------------------------------------------------------------------------------


@needs_git
def test_release_from_git(tmp_path: Path) -> None:
    repo = fake_repo(tmp_path / "repo")
    made = make_release(repo, tmp_path / "out")
    out = made.out
    files = {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()}
    assert {"README.md", "LICENSE", "Makefile", "CMakeLists.txt", "labs/01-add/README.md", "labs/01-add/add.cu",
            "labs/01-add/lab.toml", "labs/01-add/test_add.cu", "docs/getting-started.md", "docs/timing.md",
            "ci/github/grade.yml", "ci/python-env", "grader/__init__.py", "untracked.txt", "RELEASE.md",
            ".gitignore"} == files
    assert made.untracked == ["untracked.txt"]
    assert made.stripped == ["labs/01-add/lab.toml"]
    assert "solutions/01-add/test_hidden_add.cu" in made.left_out["reference solutions and hidden tests"]
    assert made.left_out["a hidden test"] == ["labs/01-add/test_hidden_stray.cu"]
    assert made.left_out[release.DOCS_WHY] == ["docs/notes-for-tas.md"]
    assert made.left_out["the instructor guide"] == ["docs/instructors.md"]
    assert check_tree(out, repo) == []
    assert dangling_links(out) == []
    lab = discover(out)[0]
    assert lab.total_points == 100 and not any(t.hidden for t in lab.tasks)
    assert "student release" in (out / "RELEASE.md").read_text()
    # lab.toml keeps its values but not the comment that points at a guide the copy does not have
    assert "authoring-a-lab" not in (out / "labs/01-add/lab.toml").read_text()


@needs_git
def test_release_readme_and_guide_are_the_students(tmp_path: Path) -> None:
    out = make_release(fake_repo(tmp_path / "repo"), tmp_path / "out").out
    readme = (out / "README.md").read_text()
    assert "the instructor's README" not in readme and "{{" not in readme
    assert "| [01-add](labs/01-add) | Add: a fake lab | `labs/01-add/add.cu` | 100 |" in readme
    for needle in ("What the score on your machine means", "for lab 01 `labs/01-add/add.cu`", "make grade LAB=01",
                   "`LAB` also takes `1`, `add` or `01-add`", "cannot score speed points",
                   "Hidden tests", "[docs/getting-started.md](docs/getting-started.md)"):
        assert needle in readme
    assert readme.rstrip().endswith("The code is under the MIT licence: [LICENSE](LICENSE).")  # the README's own
    guide = (out / "docs/getting-started.md").read_text()
    assert "the instructor's" not in guide
    for needle in ("the lab file was refused", "make it `static`", "technique missing", "skipped / not run",
                   "perf points cannot be scored", "on a machine with a GPU: `cmake --preset debug",
                   "./build/default/bin/lab01_student --gtest_list_tests"):
        assert needle in guide
    assert (out / "docs/timing.md").read_text() == "# timing\nSee [getting started](getting-started.md).\n"


def test_release_readme_without_a_licence_section(tmp_path: Path) -> None:
    repo = fake_repo(tmp_path / "repo", git=False)
    (repo / "README.md").write_text("# fake\n")
    readme = (make_release(repo, tmp_path / "out").out / "README.md").read_text()
    assert "{{LICENCE}}" not in readme and "Licence" not in readme and readme.endswith(".\n")


def test_release_without_git_walks_the_tree(tmp_path: Path) -> None:
    repo = fake_repo(tmp_path / "repo", git=False)
    made = make_release(repo, tmp_path / "out")
    p = plan(repo)
    assert p.source == "walk" and "build/ci/CMakeCache.txt" not in p.files
    assert not (made.out / "build").exists() and not (made.out / "solutions").exists()
    assert check_tree(made.out, repo) == []


def test_out_dir_rules(tmp_path: Path) -> None:
    repo = fake_repo(tmp_path / "repo", git=False)
    for bad in (repo, repo.parent, repo / "solutions" / "x"):
        with pytest.raises(ReleaseError) as err:
            make_release(repo, bad, force=True)
        assert err.value.code is Exit.USAGE
    other = tmp_path / "other"
    other.mkdir()
    (other / "keep.txt").write_text("mine")
    with pytest.raises(ReleaseError, match="not empty"):
        make_release(repo, other)
    with pytest.raises(ReleaseError, match="not an earlier release"):
        make_release(repo, other, force=True)
    assert (other / "keep.txt").is_file()
    out = tmp_path / "out"
    make_release(repo, out)
    (out / "stale.txt").write_text("from before")
    make_release(repo, out, force=True)  # an earlier release is replaced
    assert not (out / "stale.txt").exists() and (out / "RELEASE.md").is_file()


def test_check_tree_finds_leaks(tmp_path: Path) -> None:
    repo = fake_repo(tmp_path / "repo", git=False)
    out = make_release(repo, tmp_path / "out").out
    (out / "solutions").mkdir()
    (out / "labs/01-add/test_hidden_more.cu").write_text("//\n")
    (out / "docs/instructors.md").write_text("#\n")
    (out / "docs/paths.md").write_text(f"built in {repo.resolve()}/build\n")
    lab_toml = out / "labs/01-add/lab.toml"
    lab_toml.write_text(lab_toml.read_text() + '\n[hidden]\nvisibility = "hidden"\n')
    (out / "labs/01-add/answers.toml").write_text('[[answer]]\nid = "q1.x"\nvalue = 1\n')
    problems = "\n".join(check_tree(out, repo))
    for needle in ("solutions/ is in the release", "test_hidden_more.cu is a hidden test", "[hidden] table",
                   "labs/01-add/answers.toml holds reference answers",
                   "docs/instructors.md is in the release", "docs/paths.md names the instructor's checkout"):
        assert needle in problems


# --- what the release's text may name ---------------------------------------------------------------------


BAD_TEXT = {
    "docs/timing.md": "# timing\nSee [staff](instructors.md) and [design](design.md#layout).\n",
    "labs/01-add/README.md": ("# Lab 01\n"
                              "Compare with `make demo`, or run `python3 -m grader grade --solution`.\n"
                              "The reference is in solutions/01-add/add.cu; the hidden tests in test_hidden_add.cu.\n"
                              "On a GPU machine ./ci/gpu-check proves it; bench/README.md times it.\n"
                              "Helpers: `common/include/cudalab/gone.cuh` and `labs/NN-slug/<topic>.cu`.\n"
                              "The [header](add.cuh) and [tests](test_add.cu#L1) and [web](https://example.org).\n"),
    "ci/github/grade.yml": "# docs/ci.md says more\nname: grade\n",
}


def test_missing_references_names_each_place(tmp_path: Path) -> None:
    out = make_release(fake_repo(tmp_path / "repo", git=False), tmp_path / "out").out
    for rel, text in BAD_TEXT.items():
        (out / rel).write_text(text)
    with (out / "labs/01-add/lab.toml").open("a") as f:  # a value (not a comment) that names a left-out folder
        f.write('\n[[technique]]\ntask = "small"\nkind = "symbol"\npattern = "x"\nmessage = "see bench/x"\n')
    found = set(dangling_links(out))
    expected = {
        "docs/timing.md:2 names docs/instructors.md (left out of a release: the instructor guide)",
        "docs/timing.md:2 names docs/design.md (left out of a release: the grader's architecture (maintainers))",
        "labs/01-add/README.md:2 names make demo (it grades the reference solutions, which a release does not have)",
        "labs/01-add/README.md:2 names --solution (it grades the reference solutions, which a release does not have)",
        "labs/01-add/README.md:3 names solutions/ (left out of a release: reference solutions and hidden tests)",
        "labs/01-add/README.md:3 names test_hidden_* (hidden tests are never in a release)",
        "labs/01-add/README.md:4 names ci/gpu-check (left out of a release: the GPU check of the reference "
        "solutions (needs solutions/))",
        "labs/01-add/README.md:4 names bench/ (left out of a release: the grading throughput benchmark "
        "(course staff; needs solutions/))",
        "labs/01-add/README.md:5 names common/include/cudalab/gone.cuh, which the release does not have",
        "labs/01-add/README.md:6 links to add.cuh, which the release does not have",  # test_add.cu exists
        "ci/github/grade.yml:1 names docs/ci.md (left out of a release: grading pushes on GPU runners, and "
        "Gradescope (instructors))",
        f"labs/01-add/lab.toml:{len((out / 'labs/01-add/lab.toml').read_text().splitlines())} names bench/ "
        "(left out of a release: the grading throughput benchmark (course staff; needs solutions/))",
    }
    assert found == expected
    # the check fails the tree, and code that names solutions/ to build it where it exists is not read
    assert set(check_tree(out)) >= expected
    assert not any(p.startswith("CMakeLists.txt") for p in check_tree(out))


def test_drop_comment_lines_keeps_values() -> None:
    text = ('# Lab 03 (docs/authoring-a-lab.md describes every key).\n# plain comment\n'
            'message = "see solutions/"  # solutions/ again\n')
    kept = release_names.drop_comment_lines(text, release.EXCLUDED)
    assert kept == '# plain comment\nmessage = "see solutions/"  # solutions/ again\n'


def test_release_of_this_repository_names_nothing_it_lacks(tmp_path: Path) -> None:
    """The real tree, copied (not built): its student-facing text is clean, and its docs are the students'."""
    made = make_release(ROOT, tmp_path / "release")
    assert check_tree(made.out, ROOT) == []
    assert sorted(p.name for p in (made.out / "docs").iterdir()) == ["getting-started.md", "timing.md"]
    readme = (made.out / "README.md").read_text()
    for lab in discover(made.out):
        assert f"[{lab.name}](labs/{lab.name})" in readme
    assert "`labs/03-vector-add/vector_add.cu` | 90 |" in readme  # lab 03's hidden points are not in the copy


# --- the verification -------------------------------------------------------------------------------------


def _fake_commands(reports_ok: bool = True, grade_code: int = 4, targets: tuple[str, ...] = ("lab01_student",)):
    """Stands in for `grader build --all` and `make grade`: makes binaries, then writes the reports."""
    calls: list[list[str]] = []

    def run(cmd: list[str], cwd: Path, log: list[str], env: dict[str, str], timeout: float) -> int:
        calls.append(cmd)
        log.append("$ " + " ".join(cmd))
        if "build" in cmd:
            bin_dir = cwd / "build" / "ci" / "bin"
            bin_dir.mkdir(parents=True, exist_ok=True)
            for t in targets:
                (bin_dir / t).write_text("")
            (cwd / "build" / "ci" / "build.ninja").write_text("build labs/01-add/add.cu.o: CUDA_COMPILER\n")
            return 0
        out = Path(next((a.split("=", 1)[1] for a in cmd if a.startswith("OUT=")), cmd[-1]))
        out.mkdir(parents=True, exist_ok=True)
        for name in release.REPORT_FILES:
            if reports_ok or name != "junit.xml":
                (out / name).write_text("x")
        labs = [{"name": "01-add", "builds": [{"target": t, "ok": True} for t in targets], "tests": []}]
        (out / "results.json").write_text(json.dumps({"labs": labs}))
        if grade_code and cmd[0] == "make":
            log.append(f"make: *** [Makefile:27: grade] Error {grade_code}")
            return 2
        return grade_code

    return calls, run


@pytest.fixture
def released(tmp_path: Path) -> Path:
    return make_release(fake_repo(tmp_path / "repo", git=False), tmp_path / "out").out


def test_verify_passes_with_exit_4_and_every_report(released: Path, monkeypatch) -> None:
    calls, run = _fake_commands()
    monkeypatch.setattr(release_verify, "_run_logged", run)
    v = release_verify.verify(released, preset="ci", jobs=1)
    assert v.ok and v.stage == "done" and v.exit_code == 4 and v.built == 1 and v.scratch is None, v.problems
    assert calls[0][-4:] == ["--preset", "ci", "-j", "1"] and "grade" in calls[1]
    assert "exit 4: no GPU here" in v.summary()


def test_verify_fails_on_missing_reports_and_extra_binaries(released: Path, monkeypatch) -> None:
    _, run = _fake_commands(reports_ok=False, targets=("lab01_student", "lab01_solution"))
    monkeypatch.setattr(release_verify, "_run_logged", run)
    v = release_verify.verify(released, preset="ci")
    assert not v.ok and v.stage == "build" and "lab01_solution was built" in "\n".join(v.problems)
    assert v.scratch is not None and v.scratch.is_dir()
    shutil.rmtree(v.scratch)
    _, run = _fake_commands(reports_ok=False, grade_code=3)
    monkeypatch.setattr(release_verify, "_run_logged", run)
    v = release_verify.verify(released, preset="ci")
    assert not v.ok and v.stage == "grade" and v.exit_code == 3
    assert any("did not write junit.xml" in p for p in v.problems)
    shutil.rmtree(v.scratch)


def test_verify_stops_at_a_name_the_release_does_not_have(released: Path, monkeypatch) -> None:
    (released / "labs/01-add/README.md").write_text("# Lab 01\nCompare with `make demo`.\n")
    calls, run = _fake_commands()
    monkeypatch.setattr(release_verify, "_run_logged", run)
    v = release_verify.verify(released, preset="ci")
    assert not v.ok and v.stage == "tree" and calls == []
    assert any(p.startswith("labs/01-add/README.md:2 names make demo") for p in v.problems)
    shutil.rmtree(v.scratch)


def test_verify_stops_at_a_leak(released: Path, monkeypatch) -> None:
    (released / "solutions").mkdir()
    calls, run = _fake_commands()
    monkeypatch.setattr(release_verify, "_run_logged", run)
    v = release_verify.verify(released, preset="ci")
    assert not v.ok and v.stage == "tree" and calls == []
    shutil.rmtree(v.scratch)


def test_cli_release_no_verify(tmp_path: Path, capsys) -> None:
    repo = fake_repo(tmp_path / "repo", git=False)
    (repo / "docs/timing.md").write_text("# timing\nAsk for [the guide](instructors.md).\n")
    out = tmp_path / "out"
    assert cli.main(["--root", str(repo), "release", "--out", str(out), "--no-verify", "--reference-archs", "none"]) == 0
    text = capsys.readouterr().out
    assert "left out" in text and "hidden tasks and [hidden] removed (100 points in this copy)" in text
    assert "warning: docs/timing.md:2 names docs/instructors.md" in text and "not verified" in text
    assert cli.main(["--root", str(repo), "release", "--out", str(out), "--no-verify", "--reference-archs", "none"]) == Exit.USAGE
    assert cli.main(["--root", str(repo), "release", "--out", str(out), "--no-verify", "--force", "--reference-archs", "none"]) == 0


def test_cli_release_reports_a_failed_verification(tmp_path: Path, monkeypatch, capsys) -> None:
    repo = fake_repo(tmp_path / "repo", git=False)
    _, run = _fake_commands(grade_code=3)
    monkeypatch.setattr(release_verify, "_run_logged", run)
    assert cli.main(["--root", str(repo), "release", "--out", str(tmp_path / "out"), "--preset", "ci", "--reference-archs", "none"]) == Exit.BUILD
    text = capsys.readouterr().out
    assert "release verification FAILED" in text and "the grade exited 3" in text
    scratch = next(line.split()[-1] for line in text.splitlines() if "verification copy is kept" in line)
    shutil.rmtree(scratch)


# --- the real thing (slow) ----------------------------------------------------------------------------------


@pytest.mark.skipif(os.environ.get("CUDALAB_SLOW_TESTS") != "1", reason="compiles every lab: set CUDALAB_SLOW_TESTS=1")
def test_release_this_repository(tmp_path: Path) -> None:
    out = tmp_path / "release"
    jobs = os.environ.get("CUDALAB_SLOW_JOBS", "2")
    proc = subprocess.run([sys.executable, "-m", "grader", "release", "--out", str(out), "-j", jobs],
                          cwd=ROOT, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "verified:" in proc.stdout and "Verified:" in (out / "RELEASE.md").read_text()
    assert not (out / "solutions").exists() and not list(out.rglob("test_hidden_*"))
    assert check_tree(out, ROOT) == []


def test_release_perf_check_grades_its_variant_in_a_build_folder_of_its_own(tmp_path: Path) -> None:
    """gpu-check's release and timing stages may run side by side; both grade a submission in this tree, and
    build/<preset>-submission was the one folder for both. The release check's commands take an env."""
    from grader.tests.conftest import ci_script

    check = ci_script("release_perf_check")
    log = tmp_path / "log.txt"
    code = "import os; print(os.environ.get('CUDALAB_SUBMISSION_BUILD_DIR'))"
    assert check.sh([sys.executable, "-c", code], tmp_path, log, env={"CUDALAB_SUBMISSION_BUILD_DIR": "/x/variant-build"}) == 0
    assert log.read_text().splitlines()[-1] == "/x/variant-build"
    source = (Path(check.__file__)).read_text()
    assert 'env={"CUDALAB_SUBMISSION_BUILD_DIR": str(work / "variant-build")}' in source
