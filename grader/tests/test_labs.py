"""Lab discovery, lab.toml validation and selectors."""

from __future__ import annotations

from pathlib import Path

import pytest

from grader.model import labs
from grader.model.labs import ROOT_ENV, LabError, discover, find_root, is_lab_tree, load_lab, select

from grader.tests.conftest import LAB_TOML, write_lab


@pytest.fixture
def root(tmp_path: Path) -> Path:
    write_lab(tmp_path, "03-vector-add")
    write_lab(tmp_path, "06-reduce")
    write_lab(tmp_path, "11-quicksort")
    (tmp_path / "labs" / "README.md").write_text("not a lab")
    (tmp_path / "labs" / "99-draft").mkdir()  # no lab.toml: not a lab yet
    return tmp_path


@pytest.mark.parametrize("selector", ["3", "03", "vector-add", "03-vector-add", "labs/03-vector-add/", "VECTOR-ADD"])
def test_selectors(root: Path, selector: str) -> None:
    assert [lab.name for lab in select(discover(root), [selector])] == ["03-vector-add"]


def test_select_all_in_order_and_no_duplicates(root: Path) -> None:
    labs = discover(root)
    assert [lab.number for lab in select(labs, [])] == [3, 6, 11]
    assert [lab.number for lab in select(labs, ["11", "3", "03"])] == [11, 3]


@pytest.mark.parametrize("selector", ["4", "vector", "12-x", "03-reduce"])
def test_unknown_selector(root: Path, selector: str) -> None:
    with pytest.raises(LabError, match="Known labs: 03-vector-add, 06-reduce, 11-quicksort"):
        select(discover(root), [selector])


def test_lab_properties(root: Path) -> None:
    lab = discover(root)[0]
    assert lab.target_prefix == "lab03" and lab.topic == "add" and lab.total_points == 100
    assert lab.task_for_test("AddCorrectness.Small/1").id == "small"
    assert lab.perf_goal("AddPerf.Fast/1").points == 20
    assert lab.timeout_s == 20


@pytest.mark.parametrize(
    ("toml", "error"),
    [
        ("[lab\n", "not valid TOML"),
        ('[lab]\nstudent_files = ["a.cu"]\n', "missing key 'title'"),
        ('[lab]\ntitle = "x"\nstudent_files = []\n', "student_files is empty"),
        (LAB_TOML.replace('task = "large"', 'task = "nope"'), "unknown task 'nope'"),
        (LAB_TOML.replace("zero_at = 0.5", "zero_at = 0.95"), "zero_at must be below full_at"),
        (LAB_TOML + '\n[[technique]]\ntask = "small"\nkind = "magic"\npattern = "x"\n', "technique kind"),
    ],
)
def test_bad_lab_toml(tmp_path: Path, toml: str, error: str) -> None:
    path = write_lab(tmp_path, "01-bad", toml=toml)
    with pytest.raises(LabError, match=error):
        load_lab(path, tmp_path)


def test_bad_directory_name(tmp_path: Path) -> None:
    path = tmp_path / "labs" / "hello"
    path.mkdir(parents=True)
    with pytest.raises(LabError, match="NN-slug"):
        load_lab(path, tmp_path)


def test_real_labs_load() -> None:
    root = Path(__file__).resolve().parents[2]
    labs = {lab.name: lab for lab in discover(root)}
    lab = labs["03-vector-add"]
    assert lab.title and lab.student_files == ("vector_add.cu",) and lab.total_points == 100


# --- where the lab tree is -------------------------------------------------------------------------------


def test_find_root_takes_the_explicit_root_then_the_environment(root: Path, tmp_path_factory) -> None:
    other = tmp_path_factory.mktemp("elsewhere")
    assert find_root(str(other), environ={ROOT_ENV: str(root)}, cwd=root) == other.resolve()
    assert find_root(None, environ={ROOT_ENV: str(root)}, cwd=other) == root.resolve()


@pytest.mark.parametrize("start", [".", "labs", "labs/06-reduce", "labs/99-draft"])
def test_find_root_looks_from_the_current_directory_upwards(root: Path, start: str) -> None:
    assert find_root(None, environ={}, cwd=root / start) == root.resolve()


def test_find_root_falls_back_to_the_checkout_then_says_what_to_do(root: Path, tmp_path_factory, monkeypatch) -> None:
    nowhere = tmp_path_factory.mktemp("nowhere")
    monkeypatch.setattr(labs, "PACKAGE_CHECKOUT", root)
    assert find_root(None, environ={}, cwd=nowhere) == root
    monkeypatch.setattr(labs, "PACKAGE_CHECKOUT", nowhere)  # an installed grader: no checkout around it
    with pytest.raises(LabError, match=r"no lab tree in .* or above it .* --root DIR or CUDALAB_ROOT=DIR"):
        find_root(None, environ={}, cwd=nowhere)


def test_the_checkout_is_a_lab_tree() -> None:
    assert is_lab_tree(labs.PACKAGE_CHECKOUT) and not is_lab_tree(labs.PACKAGE_CHECKOUT / "grader")
