"""`grader check` (grader/authoring/rubric.py): each kind of rubric problem in a fake lab tree, found with its file and
key; a clean tree passes; every real lab passes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from grader.cli import args as cli
from grader.authoring.rubric import LabCheck, Problem, check_lab, check_labs, format_checks, glob_problem

from grader.tests.conftest import LAB_TOML, add_tests, make_binary, spec, write_lab

REPO = Path(__file__).resolve().parents[2]
FILE = "labs/01-add/lab.toml"


def make_tree(root: Path, toml: str = LAB_TOML, tests: list[dict[str, Any]] | None = None,
              built: tuple[str, ...] = ("lab01_solution",), hidden_tests: list[dict[str, Any]] | None = None,
              release: bool = False) -> Path:
    """A one-lab tree (labs/01-add) with its test source, and fake binaries in build/ci/bin listing tests."""
    solution = None if release else "int add(int a, int b) { return a + b; }\n"
    lab = write_lab(root, "01-add", toml=toml, solution=solution)
    (lab / "test_add.cu").write_text("// the tests\n")
    bin_dir = root / "build" / "ci" / "bin"
    for target in built:
        make_binary(bin_dir / target, spec(add_tests() if tests is None else tests))
    if hidden_tests is not None:
        (root / "solutions" / "01-add" / "test_hidden_add.cu").write_text("// hidden tests\n")
        for target in ("lab01_hidden_solution",):
            make_binary(bin_dir / target, spec(hidden_tests))
    return bin_dir


def check(root: Path, bin_dir: Path | None) -> LabCheck:
    return check_lab(root / "labs" / "01-add", root, bin_dir)


def keyed(result: LabCheck) -> list[tuple[str, str]]:
    assert all(p.file == FILE or p.file.startswith("build/") for p in result.problems)
    return [(p.key, p.message) for p in result.problems]


def has(result: LabCheck, key: str, fragment: str) -> bool:
    return any(k == key and fragment in m for k, m in keyed(result))


def test_a_clean_lab_passes(tmp_path: Path) -> None:
    result = check(tmp_path, make_tree(tmp_path))
    assert result.ok, result.problems
    assert result.points == "100 (tasks 80 + perf 20)"
    assert result.tests == 5 and result.notes == []


# Each broken lab.toml: (the change, the key the problem is reported under, a piece of its message).
BROKEN = [
    pytest.param(LAB_TOML.replace("points = 40", "points = 35", 1), "points",
                 "add up to 95 (tasks 75 + perf 20), not 100: [[task]] points (hidden tasks included) + [[perf]] "
                 "points + [sanitizer] points", id="points-do-not-add-up"),
    pytest.param(LAB_TOML + '\n[sanitizer]\ntools = ["memcheck"]\npoints = 5\n', "points",
                 "add up to 105 (tasks 80 + perf 20 + sanitizer 5)", id="sanitizer-points-count"),
    pytest.param(LAB_TOML.replace('tests = ["AddCorrectness.Small/*"]', 'tests = ["AddCorrectness.Smal/*"]'),
                 '[[task]] "small" tests', "'AddCorrectness.Smal/*' matches no test of lab01_solution",
                 id="task-glob-matches-nothing"),
    pytest.param(LAB_TOML.replace('tests = ["AddCorrectness.Small/*"]', "tests = []"), '[[task]] "small" tests',
                 "is empty", id="task-without-globs"),
    pytest.param(LAB_TOML.replace('test = "AddPerf.Fast/*"', 'test = "AddPerf.Slow/*"'),
                 '[[perf]] "AddPerf.Slow/*" test', "matches no test of lab01_solution", id="perf-matches-nothing"),
    pytest.param(LAB_TOML.replace('test = "AddPerf.Fast/*"', 'test = "AddCorrectness.Large/*"'),
                 '[[perf]] "AddCorrectness.Large/*" test', "matches only correctness tests", id="perf-on-correctness"),
    pytest.param(LAB_TOML.replace('task = "large"', 'task = "nope"'), '[[perf]] "AddPerf.Fast/*" task',
                 "names unknown task 'nope'", id="perf-unknown-task"),
    pytest.param(LAB_TOML.replace("zero_at = 0.5", "zero_at = 0.95"), '[[perf]] "AddPerf.Fast/*" zero_at',
                 "0.95 must be below full_at (0.9)", id="perf-zero-above-full"),
    pytest.param(LAB_TOML + '\n[[technique]]\ntask = "small"\nkind = "symbol"\npattern = "cudaMalloc("\n',
                 '[[technique]] #1 (task "small") pattern', "'cudaMalloc(' is not a regular expression",
                 id="technique-regex-does-not-compile"),
    pytest.param(LAB_TOML + '\n[[technique]]\ntask = "small"\nkind = "ptx"\npattern = "ld\\\\.shared"\n',
                 '[[technique]] #1 (task "small") kernel', 'a "ptx" technique names the kernel',
                 id="ptx-technique-without-kernel"),
    pytest.param(LAB_TOML + '\n[[technique]]\ntask = "small"\nkind = "source"\npattern = "x"\n',
                 '[[technique]] #1 (task "small") kind', "'source' is not one of symbol, ptx",
                 id="technique-unknown-kind"),
    pytest.param(LAB_TOML + '\n[[technique]]\ntask = "tiny"\nkind = "symbol"\npattern = "x"\n',
                 '[[technique]] #1 (task "tiny") task', "names unknown task 'tiny'", id="technique-unknown-task"),
    pytest.param(LAB_TOML + '\n[forbid]\nsymbols = ["*cub*", "cub[Device"]\n', "[forbid] symbols",
                 "'cub[Device' has a '[' without its ']'", id="forbid-unbalanced-bracket"),
    pytest.param(LAB_TOML + '\n[forbid]\nsymbols = [" *thrust*"]\n', "[forbid] symbols", "has space at its ends",
                 id="forbid-spaces"),
    pytest.param(LAB_TOML + '\n[allow]\nsymbols = ["*"]\n', "[allow] symbols", "'*' matches every name",
                 id="allow-everything"),
    pytest.param(LAB_TOML + '\n[allow]\nsymbols = [""]\n', "[allow] symbols", "an empty glob", id="allow-empty-glob"),
    pytest.param(LAB_TOML + '\n[allow]\nsymbols = "cudaFoo"\n', "[allow] symbols", "must be a list of globs",
                 id="allow-not-a-list"),
    pytest.param(LAB_TOML.replace('student_files = ["add.cu"]', 'student_files = ["add.cu", "extra.cu"]'),
                 "[lab] student_files", "extra.cu does not exist in labs/01-add/", id="student-file-missing"),
    pytest.param(LAB_TOML.replace('student_files = ["add.cu"]', 'student_files = ["../add.cu"]'),
                 "[lab] student_files", "is not a file name inside the lab directory", id="student-file-outside"),
    pytest.param(LAB_TOML + '\n[sanitizer]\ntools = ["memcheck", "leakcheck"]\n', "[sanitizer] tools",
                 "unknown tool 'leakcheck' (known: memcheck, racecheck, synccheck, initcheck)",
                 id="sanitizer-unknown-tool"),
    pytest.param(LAB_TOML.replace("points = 40", "point = 40", 1), '[[task]] "small" point', "unknown key",
                 id="misspelt-key"),
    pytest.param(LAB_TOML + '\n[[tasks]]\nid = "x"\n', "[[tasks]]", "unknown table", id="misspelt-table"),
    pytest.param(LAB_TOML.replace('id = "large"', 'id = "small"'), '[[task]] "small" id', "appears twice",
                 id="duplicate-task-id"),
    pytest.param(LAB_TOML.replace("points = 40", 'points = "40"', 1), '[[task]] "small" points',
                 "'40' is not a number", id="points-not-a-number"),
    pytest.param(LAB_TOML + '\n[hidden]\nvisibility = "later"\n', "[hidden] visibility",
                 "'later' is not one of hidden, after_due_date, visible", id="hidden-visibility"),
    pytest.param(LAB_TOML.replace("points = 40", "points = 30", 1)
                 + '\n[[task]]\nid = "hidden"\npoints = 10\ntests = ["AddHidden*"]\nhidden = true\n',
                 '[[task]] "hidden" hidden', "no hidden tests: solutions/01-add/test_hidden_<topic>.cu does not exist",
                 id="hidden-task-without-hidden-tests"),
    pytest.param(LAB_TOML.replace('title = "Add: a fake lab"\n', ""), "[lab] title", "missing", id="no-title"),
    pytest.param("[lab\n", "file", "not valid TOML", id="not-toml"),
    pytest.param(LAB_TOML.replace('tests = ["AddCorrectness.Small/*"]',
                                  'tests = ["AddCorrectness.Small/*"]\nscoring = "most"'),
                 '[[task]] "small" scoring', "'most' is not one of proportional, all-or-nothing", id="task-scoring"),
    pytest.param(LAB_TOML.replace('tests = ["AddCorrectness.Small/*"]',
                                  'tests = ["AddCorrectness.Small/*"]\nkernels = "add_kernel"'),
                 '[[task]] "small" kernels', "must be a list of kernel name globs", id="task-kernels-not-a-list"),
    pytest.param(LAB_TOML + '\n[sanitizer]\ntools = ["memcheck"]\ncost = 2\n', "[sanitizer] cost",
                 "2 is more than 1", id="sanitizer-cost"),
    pytest.param(LAB_TOML + '\n[sanitizer]\ntools = ["memcheck"]\nskip = { racecheck = ["AddCorrectness.Large/*"] }\n',
                 "[sanitizer] skip.racecheck", "is not one of this lab's [sanitizer] tools", id="sanitizer-skip-tool"),
    pytest.param(LAB_TOML + '\n[sanitizer]\ntools = ["memcheck"]\nskip = { memcheck = ["AddCorrectness.Larg/*"] }\n',
                 "[sanitizer] skip.memcheck", "'AddCorrectness.Larg/*' matches no correctness test of lab01_solution",
                 id="sanitizer-skip-matches-nothing"),
    pytest.param(LAB_TOML + '\n[sanitizer]\ntools = ["memcheck"]\nskip = { memcheck = ["-AddPerf*"] }\n',
                 "[sanitizer] skip.memcheck", "is not a test glob", id="sanitizer-skip-not-a-glob"),
    pytest.param(LAB_TOML + '\n[geometry]\nblock = 256\nwarp = "32"\n', "[geometry] warp",
                 "'32' is not a size", id="geometry-not-a-size"),
    pytest.param(LAB_TOML + '\n[sanitizer]\ntools = ["memcheck"]\nskip = ["AddCorrectness.Large/*"]\n',
                 "[sanitizer] skip", "is not a table of tool = [test globs]", id="sanitizer-skip-not-a-table"),
]


@pytest.mark.parametrize(("toml", "key", "fragment"), BROKEN)
def test_each_problem_is_reported_with_file_and_key(tmp_path: Path, toml: str, key: str, fragment: str) -> None:
    result = check(tmp_path, make_tree(tmp_path, toml=toml))
    assert has(result, key, fragment), keyed(result)
    assert f"{FILE}: {key}: " in format_checks([result], instructor_tree=True)


def test_every_problem_is_reported_not_only_the_first(tmp_path: Path) -> None:
    toml = (LAB_TOML.replace("points = 40", "points = 35", 1).replace('task = "large"', 'task = "nope"')
            + '\n[sanitizer]\ntools = ["leakcheck"]\n')
    result = check(tmp_path, make_tree(tmp_path, toml=toml))
    assert {k for k, _ in keyed(result)} >= {"points", '[[perf]] "AddPerf.Fast/*" task', "[sanitizer] tools"}


def test_a_test_no_task_claims(tmp_path: Path) -> None:
    tests = add_tests() + [{"name": "AddCorrectness.Negative/3", "do": "pass"},
                           {"name": "AddOtherPerf.Slow/1", "do": "pass"}]
    result = check(tmp_path, make_tree(tmp_path, tests=tests))
    assert keyed(result) == [
        ("tests", "AddCorrectness.Negative/3 (lab01_solution): no task claims it, so it earns no points"),
        ("tests", "AddOtherPerf.Slow/1 (lab01_solution): no task or [[perf]] entry claims it, so it earns no points"),
    ]


def test_not_built_says_so_and_checks_the_rest(tmp_path: Path) -> None:
    bin_dir = make_tree(tmp_path, toml=LAB_TOML.replace("points = 40", "points = 35", 1), built=())
    result = check(tmp_path, bin_dir)
    assert keyed(result) == [("points", "add up to 95 (tasks 75 + perf 20), not 100: [[task]] points (hidden tasks "
                                        "included) + [[perf]] points + [sanitizer] points make a lab's 100")]
    assert result.notes == ["public tests not checked: neither lab01_solution nor lab01_student is built in "
                            "build/ci/bin (python3 -m grader build 01)"]
    assert "note: public tests not checked" in format_checks([result], instructor_tree=True)


def test_the_student_binary_lists_when_the_reference_is_not_built(tmp_path: Path) -> None:
    bin_dir = make_tree(tmp_path, toml=LAB_TOML.replace('"AddCorrectness.Small/*"', '"AddCorrectness.Smal/*"'),
                        built=("lab01_student",))
    assert keyed(check(tmp_path, bin_dir)) == [
        ('[[task]] "small" tests', "'AddCorrectness.Smal/*' matches no test of lab01_student"),
        ("tests", "AddCorrectness.Small/1 (lab01_student): no task claims it, so it earns no points"),
        ("tests", "AddCorrectness.Small/257 (lab01_student): no task claims it, so it earns no points"),
    ]


def test_a_binary_that_cannot_list_is_a_problem(tmp_path: Path) -> None:
    bin_dir = make_tree(tmp_path)
    make_binary(bin_dir / "lab01_solution", {**spec(add_tests()), "list_fails": True})
    result = check(tmp_path, bin_dir)
    assert [(p.file, p.key) for p in result.problems] == [("build/ci/bin/lab01_solution", "--gtest_list_tests")]
    assert "cannot list the tests" in result.problems[0].message


HIDDEN_TOML = LAB_TOML.replace("points = 40", "points = 30", 1) + """
[[task]]
id = "hidden"
title = "Hidden tests"
points = 10
tests = ["AddHidden*"]
hidden = true
"""
HIDDEN_TESTS = [{"name": "AddHiddenCorrectness.Odd/7", "do": "pass"},
                {"name": "AddHiddenCorrectness.Odd/9", "do": "pass"}]


def test_hidden_tasks_count_and_match_the_hidden_binary(tmp_path: Path) -> None:
    result = check(tmp_path, make_tree(tmp_path, toml=HIDDEN_TOML, hidden_tests=HIDDEN_TESTS))
    assert result.ok, result.problems
    assert result.points == "100 (tasks 70 + hidden tasks 10 + perf 20)" and result.tests == 7


def test_hidden_globs_only_see_hidden_tests(tmp_path: Path) -> None:
    """A hidden task scores only the hidden binary's tests, the others only the public binary's (scoring.py)."""
    tests = add_tests() + [{"name": "AddHiddenCorrectness.Odd/1", "do": "pass"}]  # in the public binary
    hidden = HIDDEN_TESTS + [{"name": "AddCorrectness.Small/5", "do": "pass"}]  # a public name in the hidden binary
    result = check(tmp_path, make_tree(tmp_path, toml=HIDDEN_TOML, tests=tests, hidden_tests=hidden))
    assert keyed(result) == [
        ("tests", "AddHiddenCorrectness.Odd/1 (lab01_solution): no task claims it, so it earns no points"),
        ("tests", "AddCorrectness.Small/5 (lab01_hidden_solution): no hidden task claims it, so it earns no points"),
    ]


def test_hidden_binary_not_built_is_a_note(tmp_path: Path) -> None:
    bin_dir = make_tree(tmp_path, toml=HIDDEN_TOML, hidden_tests=HIDDEN_TESTS)
    (bin_dir / "lab01_hidden_solution").unlink()
    result = check(tmp_path, bin_dir)
    assert result.ok and result.notes == [
        "hidden tests not checked: neither lab01_hidden_solution nor lab01_hidden_student is built in build/ci/bin "
        "(python3 -m grader build 01)"]


def test_a_student_release_may_count_fewer_points(tmp_path: Path) -> None:
    """A release has no solutions/ and dropped its hidden tasks: 90 points is right there, 110 is not."""
    fewer = LAB_TOML.replace("points = 40", "points = 30", 1)
    bin_dir = make_tree(tmp_path, toml=fewer, built=("lab01_student",), release=True)
    assert not (tmp_path / "solutions").exists()
    result = check(tmp_path, bin_dir)
    assert result.ok and result.points == "90 (tasks 70 + perf 20)"
    assert "a student release (no solutions/)" in format_checks([result], instructor_tree=False)
    (tmp_path / "labs" / "01-add" / "lab.toml").write_text(LAB_TOML.replace("points = 40", "points = 50", 1))
    assert has(check(tmp_path, bin_dir), "points", "add up to 110 (tasks 90 + perf 20), more than 100")


def test_a_solution_missing_a_student_file(tmp_path: Path) -> None:
    bin_dir = make_tree(tmp_path)
    (tmp_path / "solutions" / "01-add" / "add.cu").unlink()
    assert keyed(check(tmp_path, bin_dir)) == [
        ("[lab] student_files", "add.cu does not exist in solutions/01-add/, so the reference is never built")]


def test_the_topic_needs_its_test_file(tmp_path: Path) -> None:
    bin_dir = make_tree(tmp_path)
    (tmp_path / "labs" / "01-add" / "test_add.cu").unlink()
    assert keyed(check(tmp_path, bin_dir)) == [
        ("[lab] student_files", "the first file names the topic 'add', but labs/01-add/test_add.cu does not exist")]


@pytest.mark.parametrize(("glob", "why"), [
    ("*cub*", ""), ("cuda[A-Z]*", ""), ("operator new(unsigned long)", ""), ("", "an empty glob"),
    ("**", "'**' matches every name"), ("x[", "'x[' has a '[' without its ']'"), (3, "3 is not a string"),
])
def test_glob_problem(glob: object, why: str) -> None:
    assert glob_problem(glob) == why


# --- the verb -----------------------------------------------------------------------------------------------


def test_check_verb_exit_codes(tmp_path: Path, capsys) -> None:
    make_tree(tmp_path)
    assert cli.main(["--root", str(tmp_path), "check", "--preset", "ci"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split()[:2] == ["01-add", "ok"] and "check: 1 lab(s), 0 problem(s)" in out
    (tmp_path / "labs" / "01-add" / "lab.toml").write_text(LAB_TOML.replace("points = 40", "points = 35", 1))
    assert cli.main(["--root", str(tmp_path), "check", "--preset", "ci", "01"]) == 1
    out = capsys.readouterr().out
    assert f"{FILE}: points: add up to 95" in out and "1 problem(s)" in out
    assert cli.main(["--root", str(tmp_path), "check", "--preset", "ci", "07"]) == 2
    assert "no lab matches '07'" in capsys.readouterr().err


def test_check_verb_finds_a_lab_the_grader_cannot_load(tmp_path: Path, capsys) -> None:
    """`list` stops at a broken lab.toml; `check` reports it and goes on to the other labs."""
    make_tree(tmp_path, toml="[lab\n")
    write_lab(tmp_path, "02-other")
    (tmp_path / "labs" / "02-other" / "test_add.cu").write_text("// tests\n")
    assert cli.main(["--root", str(tmp_path), "check", "--no-tests"]) == 1
    out = capsys.readouterr().out
    assert "labs/01-add/lab.toml: file: not valid TOML" in out
    assert "02-other  ok" in out and "tests not checked (not asked to list them)" in out


def test_a_lab_directory_named_wrong(tmp_path: Path, capsys) -> None:
    make_tree(tmp_path)
    write_lab(tmp_path, "stencil")
    assert cli.main(["--root", str(tmp_path), "check", "--no-tests"]) == 1
    assert "labs/stencil: directory: a lab directory is named NN-slug, like 03-vector-add" in capsys.readouterr().out


def test_check_agrees_with_load_lab(tmp_path: Path) -> None:
    """A lab.toml the grader refuses to load is never passed by the check."""
    from grader.model.labs import LabError, load_lab

    for toml in [p.values[0] for p in BROKEN]:
        make_tree(tmp_path, toml=toml)
        try:
            load_lab(tmp_path / "labs" / "01-add", tmp_path)
        except LabError:
            assert not check(tmp_path, None).ok, toml


# --- the real labs ------------------------------------------------------------------------------------------


def _real_bin_dir() -> Path | None:
    """The build of the real labs that holds their binaries (make test builds build/ci without a GPU)."""
    return next((d for d in (REPO / "build" / p / "bin" for p in ("ci", "default"))
                 if any(d.glob("lab[0-9][0-9]_solution"))), None)


def test_every_real_lab_passes() -> None:
    bin_dir = _real_bin_dir()
    checks = check_labs(REPO, [], bin_dir)
    assert len(checks) >= 11
    problems: list[Problem] = [p for c in checks for p in c.problems]
    assert problems == []
    assert all(c.points.startswith("100 (") for c in checks)
    if bin_dir is not None:  # listed where built: every lab's public tests, and lab 03's hidden ones too
        assert all(c.tests > 0 for c in checks)


def test_a_labs_own_hints_are_checked(tmp_path: Path) -> None:
    bin_dir = make_tree(tmp_path)
    hints_file = tmp_path / "labs" / "01-add" / "hints.toml"
    hints_file.write_text('[[hint]]\ncategory = "wrong_answer"\ntask = "small"\ntext = "fine"\n\n'
                          '[[hint]]\ncategory = "wrong_answer"\ntask = "tiny"\ntext = "no such task"\n\n'
                          '[[hint]]\ncategory = "wrong_answer"\ntask = ["small", "tinier"]\ntext = "one of two"\n')
    problems = [(p.file, p.key, p.message) for p in check(tmp_path, bin_dir).problems]
    assert problems == [("labs/01-add/hints.toml", "hint #2 task", "'tiny' is not a public task of this lab"),
                        ("labs/01-add/hints.toml", "hint #3 task", "'tinier' is not a public task of this lab")]
    hints_file.write_text('[[hint]]\ncategory = "wrong answer"\ntext = "x"\n')
    problems = [(p.file, p.key, p.message) for p in check(tmp_path, bin_dir).problems]
    assert problems[0][:2] == ("labs/01-add/hints.toml", "file") and "hint #1" in problems[0][2]


def test_a_hints_causes_must_be_declared(tmp_path: Path) -> None:
    """A hint's causes are ids of a [causes] table (the lab's or the grader's): a typo is a problem, not a
    cause that silently never matches a mutant's."""
    bin_dir = make_tree(tmp_path)
    hints_file = tmp_path / "labs" / "01-add" / "hints.toml"
    hints_file.write_text('[causes]\ncarry = "the carry between tiles is lost"\n\n'
                          '[[hint]]\ncategory = "wrong_answer"\ntext = "a"\ncauses = ["carry", "missing-barrier"]\n\n'
                          '[[hint]]\ncategory = "wrong_answer"\ntext = "b"\ncauses = ["cary"]\n')
    problems = [(p.file, p.key, p.message) for p in check(tmp_path, bin_dir).problems]
    assert problems == [("labs/01-add/hints.toml", "hint #2 causes",
                         "cary declared in no [causes] table (this file's or grader/score/hints.toml's)")]
    hints_file.write_text('[causes]\n"Bad Id" = "x"\n')
    problems = [(p.file, p.key) for p in check(tmp_path, bin_dir).problems]
    assert problems == [("labs/01-add/hints.toml", "causes")]


@pytest.mark.parametrize("param, ok", [("257", True), ("w33_h7", True), ("r31_c33_off5", True), ("m17_n33_k65", True),
                                       ("n1000_grid4_block256", True), ("block32x4", True), ("grid4x2x1_block8x8x1", True),
                                       ("Uniform_1000", True), ("33x7", False), ("n1000_4x256", False)])
def test_a_tests_input_names_each_dimension(tmp_path: Path, param: str, ok: bool) -> None:
    """One convention for every lab (issue 29: lab 04's 1x7 was width x height, lab 05's r31_c33 rows first):
    a bare number, or a letter for each number; `grader check` refuses a name like 33x7."""
    tests = [{**t, "name": t["name"].replace("Small/257", f"Small/{param}")} for t in add_tests()]
    result = check(tmp_path, make_tree(tmp_path, tests=tests))
    assert has(result, "tests", "does not say which number is which") is (not ok)


def test_a_tasks_checkpoints_are_checked(tmp_path: Path) -> None:
    toml = LAB_TOML.replace('tests = ["AddCorrectness.Small/*"]', '''tests = ["AddCorrectness.Small/*"]
checkpoints = [
  { title = "one block", tests = ["AddCorrectness.Small/*"], max_n = 256 },
  { title = "", tests = ["AddCorrectness.Smal/*"], max_n = 0, weight = 2 },
]''')
    result = check(tmp_path, make_tree(tmp_path, toml=toml))
    got = {(k, m) for k, m in keyed(result)}
    assert ('[[task]] "small" checkpoint #2', "unknown key(s) weight (title, tests, max_n)") in got
    assert ('[[task]] "small" checkpoint #2 title', "missing or empty: the report shows it as the step's name") in got
    assert ('[[task]] "small" checkpoint #2 max_n', "0 is not a size (a whole number of at least 1)") in got
    assert any(k == '[[task]] "small" checkpoint #2 tests' and "'AddCorrectness.Smal/*' matches no test" in m for k, m in got)
    assert not any("checkpoint #1" in k for k, _ in got)
