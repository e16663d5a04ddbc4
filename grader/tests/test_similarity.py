"""The similarity report (grader/course/similarity.py, grader/report/similarity.py) on generated submissions of
lab 03: a disguised copy is found, independent correct solutions are not, the skeleton alone matches
nothing, the page is self-contained and escapes code; without copydetect it says so and skips."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from grader.cli import args as cli
from grader.course import similarity
from grader.model.errors import Exit
from grader.model.labs import discover, select
from grader.authoring.patching import apply_patch
from grader.report import StudentOutcome, write_batch_reports
from grader.report.sample import sample_results
from grader.course.similarity import Options, Source, compare_lab

from grader.tests.conftest import FIXTURES
from grader.tests.test_report_batch import parse

REPO = Path(__file__).resolve().parents[2]
LAB = "03-vector-add"
FILE = "vector_add.cu"
SKELETON = (REPO / "labs" / LAB / FILE).read_text()
REFERENCE = (REPO / "solutions" / LAB / FILE).read_text()
ALTERNATIVE = (FIXTURES / "similarity" / "vector_add_alt.cu").read_text()  # written independently

HOSTILE = 'zed"><img src=x onerror=alert(1)>'  # a folder name is a student id
needs_copydetect = pytest.mark.skipif(bool(similarity.missing_library()), reason="copydetect is not installed")


def disguise(code: str) -> str:
    """What a student who copied does: new comments, renamed variables, the functions reordered."""
    code = re.sub(r"//[^\n]*", "", code)
    for old, new in [("d_a", "dev_x"), ("d_b", "dev_y"), ("d_c", "dev_z"), ("bytes", "nbytes"),
                     ("stride", "jump"), ("blocks", "nblk"), ("h_pinned", "host_mem"), ("va", "ra"), ("vb", "rb")]:
        code = re.sub(rf"\b{old}\b", new, code)
    pinned = re.search(r"float\* allocate_pinned.*?\n}\n\nvoid free_pinned.*?\n}\n", code, re.S)
    assert pinned is not None
    code = code.replace(pinned.group(0), "")
    code = code.replace("constexpr int kBlock = 256;", "/* my own work */\n" + pinned.group(0) + "\nconstexpr int kBlock = 256;")
    assert code.count("allocate_pinned") == 1 and "d_a" not in code
    return code


def lab03():
    return select(discover(REPO), ["03"])[0]


def compare(**files: str) -> similarity.LabReport:
    sources = [Source(student, FILE, text) for student, text in files.items()]
    return compare_lab(lab03(), sources, {FILE: SKELETON}, Options())


def pair(report: similarity.LabReport, a: str, b: str) -> similarity.Pair | None:
    return next((p for p in report.pairs if {p.a, p.b} == {a, b}), None)


# --- what is found, what is not -------------------------------------------------------------------


@needs_copydetect
def test_a_disguised_copy_is_found() -> None:
    report = compare(ada=REFERENCE, bob=disguise(REFERENCE), cy=ALTERNATIVE)
    found = pair(report, "ada", "bob")
    assert found is not None and found.similarity >= 0.9, report
    assert found.overlap >= Options().min_overlap and found.slices_a and found.slices_b
    assert pair(report, "ada", "cy") is None and pair(report, "bob", "cy") is None  # cy did their own work


@needs_copydetect
def test_independent_correct_solutions_are_not_flagged() -> None:
    report = compare(ref=REFERENCE, alt=ALTERNATIVE)
    assert report.pairs == [] and report.highest < Options().threshold
    assert report.highest > 0.05  # same contract, same idioms: some overlap, far from a copy


@needs_copydetect
def test_the_reference_with_one_function_rewritten_is_still_a_copy() -> None:
    # the mutation suite's correct alternatives are the reference with a few lines changed: a student who
    # handed one in copied the rest, and the report says so
    patch = (REPO / "solutions" / LAB / "mutants" / "ok-host-one-allocation.patch").read_text()
    report = compare(ref=REFERENCE, mutant=apply_patch(REFERENCE, patch, "ok-host-one-allocation"))
    assert pair(report, "ref", "mutant") is not None


@needs_copydetect
def test_the_skeleton_alone_matches_nothing() -> None:
    report = compare(ann=SKELETON, ben=SKELETON, cat=SKELETON + "\n// a comment of mine\n")
    assert report.pairs == [] and report.highest == 0.0


@needs_copydetect
def test_the_same_two_line_idiom_is_no_copy() -> None:
    todo = "// TODO(student): global index of this thread; add one element if it is inside the array (about 2 lines).\n}"
    assert todo in SKELETON
    a = SKELETON.replace(todo, "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) c[i] = a[i] + b[i];\n}")
    b = SKELETON.replace(todo, "  int k = blockIdx.x * blockDim.x + threadIdx.x;\n  if (k < n) c[k] = a[k] + b[k];\n}")
    report = compare(ann=a, ben=b)
    assert report.highest >= 0.9 and report.pairs == []  # all of very little: below min_overlap


@needs_copydetect
def test_the_threshold_is_an_option() -> None:
    sources = [Source("ref", FILE, REFERENCE), Source("alt", FILE, ALTERNATIVE)]
    low = compare_lab(lab03(), sources, {FILE: SKELETON}, Options(threshold=0.1))
    assert [(p.a, p.b) for p in low.pairs] == [("alt", "ref")]


# --- the class: folders, archives, OUT, the page --------------------------------------------------


def submissions(tmp_path: Path) -> Path:
    d = tmp_path / "subs"
    for student, text in {"ada": REFERENCE, "bob": disguise(REFERENCE), "cy": ALTERNATIVE, "dee": SKELETON}.items():
        (d / student / "labs" / LAB).mkdir(parents=True)
        (d / student / "labs" / LAB / FILE).write_text(text)
    (d / "eve").mkdir()  # nothing handed in: the skeleton is graded, never compared
    evil = REFERENCE.replace("// Task 1 + 2", "// </pre><script>alert('x')</script> & <b>bold</b>")
    (d / "mal" / "labs" / LAB).mkdir(parents=True)
    (d / "mal" / "labs" / LAB / FILE).write_text(evil)
    (d / HOSTILE / "labs" / LAB).mkdir(parents=True)
    (d / HOSTILE / "labs" / LAB / FILE).write_text(disguise(ALTERNATIVE.replace("kThreads", "kT")))
    return d


@needs_copydetect
def test_the_verb_writes_a_self_contained_page(tmp_path: Path, capsys) -> None:
    subs = submissions(tmp_path)
    code = cli.main(["--root", str(REPO), "similarity", str(subs), "--lab", "03", "--out", str(tmp_path / "out")])
    out = capsys.readouterr().out
    assert code == Exit.OK, out
    listed = [line for line in out.splitlines() if line.startswith("  lab 03")]
    assert any("ada ~ bob" in line for line in listed) and any(f"cy ~ {HOSTILE}" in line for line in listed)
    assert not any("cy" in line and ("ada" in line or "bob" in line) for line in listed)
    page = (tmp_path / "out" / "similarity.html").read_text()
    parse(page)  # well-formed: every element closed
    assert "changes no grade" in page and "<mark" in page
    assert "<img" not in page and "zed&#34;&gt;&lt;img" in page  # cy's copier, escaped
    for external in ("<script", "<link", "<img", "http://", "https://", "@import", "url("):
        assert external not in page, external
    assert "&lt;/pre&gt;&lt;script&gt;" in page and "&lt;b&gt;bold&lt;/b&gt;" in page
    assert "dee: vector_add.cu is the unchanged skeleton" in page and "eve: vector_add.cu missing" in page
    summary = json.loads((tmp_path / "out" / "similarity.json").read_text())
    assert summary["threshold"] == 0.5 and summary["flagged"] == 4  # ada, bob, mal: one reference; cy, zed
    assert {tuple(sorted((t["a"], t["b"]))) for t in summary["labs"][0]["top"]} == {
        ("ada", "bob"), ("ada", "mal"), ("bob", "mal"), ("cy", HOSTILE)}


@needs_copydetect
def test_a_batch_out_is_read_through_its_records(tmp_path: Path, capsys) -> None:
    subs = submissions(tmp_path)
    out = tmp_path / "out"
    for student in ("ada", "bob", "cy"):
        (out / student).mkdir(parents=True)
        (out / student / ".batch.json").write_text(json.dumps({"source": str(subs / student)}))
    (out / "gone").mkdir()
    (out / "gone" / ".batch.json").write_text(json.dumps({"source": str(tmp_path / "nowhere")}))
    assert similarity.is_batch_out(out) and not similarity.is_batch_out(subs)
    assert cli.main(["--root", str(REPO), "similarity", str(out), "--lab", "3", "--threshold", "60%"]) == Exit.OK
    text = capsys.readouterr().out
    assert "ada ~ bob" in text and "gone: the submission" in text
    assert (out / "similarity.html").is_file()


def test_the_class_summary_links_the_report(tmp_path: Path) -> None:
    (tmp_path / "similarity.json").write_text(json.dumps({
        "generated": "2026-03-01T10:00:00+00:00", "threshold": 0.5, "unavailable": "", "flagged": 2,
        "labs": [{"lab": LAB, "number": 3, "flagged": 2}, {"lab": "05-tiled-matmul", "number": 5, "flagged": 0}]}))
    paths = write_batch_reports([StudentOutcome("ada", sample_results())], tmp_path)
    page = paths["html"].read_text()
    parse(page)
    assert 'href="similarity.html"' in page and "2 pairs of files at or above 50 %" in page and "lab 03: 2" in page
    (tmp_path / "similarity.json").unlink()
    assert "similarity.html" not in write_batch_reports([StudentOutcome("ada", sample_results())], tmp_path)[
        "html"].read_text()


def test_without_copydetect_it_says_so_and_skips(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setitem(sys.modules, "copydetect", None)  # import copydetect now raises ImportError
    assert "pip install copydetect" in similarity.missing_library()
    subs = submissions(tmp_path)
    lab = lab03()
    line = similarity.for_batch(REPO, [similarity.Student("ada", subs / "ada")], [lab], tmp_path / "o")
    assert line.startswith("similarity: skipped:") and "pip install copydetect" in line
    assert not (tmp_path / "o" / "similarity.html").exists()
    code = cli.main(["--root", str(REPO), "similarity", str(subs), "--out", str(tmp_path / "o")])
    assert code == Exit.ENVIRONMENT and "not run" in capsys.readouterr().out


def test_usage_errors(tmp_path: Path, capsys) -> None:
    subs = submissions(tmp_path)
    assert cli.main(["--root", str(REPO), "similarity", str(subs)]) == Exit.USAGE  # no --out for SUBMISSIONS
    assert "--out" in capsys.readouterr().err
    with pytest.raises(SystemExit) as err:
        cli.main(["--root", str(REPO), "similarity", str(subs), "--out", "x", "--threshold", "1.5"])
    assert err.value.code == Exit.USAGE
    assert cli.main(["--root", str(REPO), "similarity", str(tmp_path / "nope"), "--out", "x"]) == Exit.USAGE


def test_segments_cover_the_text_in_order() -> None:
    from grader.report.similarity import segments

    text = "int a;\n  int b = a;\n\n  // why\n  return b;\nint c;\n"
    # copydetect's ranges land inside words ("nt b = a;\n\n  re"): whole lines are marked, without
    # their indentation; a blank line or a comment alone is not
    start = text.index("nt b")
    pieces = segments(text, [(start, text.index("turn")), (text.index("c;"), 200)])
    assert "".join(p["text"] for p in pieces) == text
    assert [p["text"] for p in pieces if p["hl"]] == ["int b = a;", "return b;", "int c;"]
    assert segments(text, []) == [{"text": text, "hl": False}]
    long = "\n".join(f"line {i}" for i in range(1000))
    folded = segments(long, [(long.index("line 500"), long.index("line 501"))])
    assert any("lines …" in p["text"] for p in folded) and any(p["hl"] and "line 500" in p["text"] for p in folded)


def test_cli_batch_similarity_flags() -> None:
    parser = cli.build_parser()
    args = parser.parse_args(["batch", "subs", "--out", "o"])
    assert args.similarity is True and args.similarity_threshold is None
    args = parser.parse_args(["batch", "subs", "--out", "o", "--no-similarity", "--similarity-threshold", "0.7"])
    assert args.similarity is False and args.similarity_threshold == pytest.approx(0.7)


# --- in a batch -----------------------------------------------------------------------------------

from grader.tests.test_batch import batch, class_dir, fakes  # noqa: E402,F401 - the fake machine of the batch tests


@needs_copydetect
def test_a_batch_writes_the_report_and_links_it(lab_root: Path, tmp_path: Path, fakes: dict) -> None:  # noqa: F811
    class_dir(tmp_path)
    code, out, _ = batch(lab_root, fakes, tmp_path)
    assert code == Exit.OK
    assert "similarity: 0 pair(s)" in out and "LMS gradebooks:" in out
    summary = (tmp_path / "out" / "class-summary.html").read_text()
    assert (tmp_path / "out" / "similarity.html").is_file() and 'href="similarity.html"' in summary
    book = (tmp_path / "out" / "gradebook.csv").read_text()
    (tmp_path / "out" / "similarity.html").unlink()
    (tmp_path / "out" / "similarity.json").unlink()
    code, out, _ = batch(lab_root, fakes, tmp_path, similarity=False)
    assert code == Exit.OK and "similarity" not in out
    assert not (tmp_path / "out" / "similarity.html").exists()
    assert (tmp_path / "out" / "gradebook.csv").read_text() == book  # it never changes a grade


def test_a_batch_without_copydetect_still_succeeds(lab_root: Path, tmp_path: Path, fakes: dict,  # noqa: F811
                                                   monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "copydetect", None)
    class_dir(tmp_path)
    code, out, _ = batch(lab_root, fakes, tmp_path)
    assert code == Exit.OK and "similarity: skipped:" in out and "pip install copydetect" in out
    assert not (tmp_path / "out" / "similarity.html").exists()
