"""Skeletons derive from solutions: markers, STUB lines, unbalanced markers; check and write."""

from __future__ import annotations

from pathlib import Path

import pytest

from grader.authoring import skeleton
from grader.model.labs import discover
from grader.authoring.skeleton import MarkerError, make_skeleton

from grader.tests.conftest import SOLUTION, write_lab


def test_markers_and_stub_lines() -> None:
    text = make_skeleton(SOLUTION)
    assert "return a + b;" not in text
    assert "BEGIN SOLUTION" not in text and "END SOLUTION" not in text
    assert "  return 0;\n" in text  # STUB: becomes code, with its indentation
    assert "// TODO(student): add (1 line)." in text  # TODO markers stay


def test_stub_without_space_and_crlf() -> None:
    assert make_skeleton("    //STUB:return nullptr;\n") == "    return nullptr;\n"
    assert make_skeleton("a\r\n// BEGIN SOLUTION\r\nb\r\n// END SOLUTION\r\nc\r\n") == "a\r\nc\r\n"


def test_reference_banner_is_removed() -> None:
    banner = (
        "// Reference solution. Regions between BEGIN/END SOLUTION are removed from the student's copy, and\n"
        '// "STUB:" lines become code there (python3 -m grader skeleton --write).\n'
    )
    assert make_skeleton("// Lab\n" + banner + "int x;\n") == "// Lab\nint x;\n"


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("// BEGIN SOLUTION\nx\n", "never closed"),
        ("x\n// END SOLUTION\n", "without BEGIN"),
        ("// BEGIN SOLUTION\n// BEGIN SOLUTION\n// END SOLUTION\n", "inside another"),
    ],
)
def test_unbalanced_markers(text: str, error: str) -> None:
    with pytest.raises(MarkerError, match=error):
        make_skeleton(text, "sol.cu")


def test_check_and_write(tmp_path: Path) -> None:
    write_lab(tmp_path)
    lab = discover(tmp_path)[0]
    assert all(d.ok for d in skeleton.check(lab))
    student = lab.path / "add.cu"
    student.write_text(student.read_text() + "// drift\n")
    diffs = skeleton.check(lab)
    assert not diffs[0].ok and "-// drift" in diffs[0].diff
    assert skeleton.write(lab) == [student]
    assert all(d.ok for d in skeleton.check(lab))
    assert skeleton.write(lab) == []


def test_lab_without_solution_has_nothing_to_check(tmp_path: Path) -> None:
    write_lab(tmp_path, solution=None)
    assert skeleton.check(discover(tmp_path)[0]) == []


def test_real_skeletons_match() -> None:
    root = Path(__file__).resolve().parents[2]
    lab = next(lab for lab in discover(root) if lab.name == "03-vector-add")
    assert [d.diff for d in skeleton.check(lab)] == [""]
