"""Class-level reports: the class summary page and the class gradebook over a batch of submissions."""

from __future__ import annotations

import csv
import io
from html.parser import HTMLParser
from pathlib import Path

import pytest

from grader.report import StudentOutcome, render_class_summary, render_gradebook_csv, write_batch_reports
from grader.report.batch import batch_labs, class_view, gradebook_columns
from grader.report.batch_sample import main as batch_sample_main
from grader.report.batch_sample import sample_outcomes
from grader.report.sample import sample_results
from grader.report.schemas import validate_class_gradebook
from grader.model.results import BuildResult, Results, Status
from grader.tests.test_report_html import check_structure

HOSTILE_NAME = "<img src=x onerror=alert(1)>"
FORMULA_NAME = '=HYPERLINK("http://evil","x")'
BROKEN_SCRIPT = "<script>alert(1)</script>\nsecond line of the error"


def _student(shuffle_ms: float, streams_ms: float | None, fail: tuple[str, ...] = ()) -> Results:
    """sample_results() with this student's timings: the reduce lab's Shuffle perf test and the
    streams Overlap test (None: not timed, skipped); tests named in fail fail."""
    r = sample_results()
    for lab in r.labs:
        for t in lab.tests:
            if t.name == "ReducePerf.Shuffle/268435456":
                assert t.perf is not None and t.perf.impl is not None
                t.perf.impl.median_ms = shuffle_ms
            if t.name == "StreamsPerf.Overlap/8":
                if streams_ms is None:
                    t.status, t.perf, t.message = Status.SKIPPED, None, "incorrect: not timed"
                else:
                    assert t.perf is not None and t.perf.impl is not None
                    t.perf.impl.median_ms = streams_ms
            if t.name in fail:
                t.status = Status.FAILED
    return r


@pytest.fixture()
def outcomes() -> list[StudentOutcome]:
    return [
        StudentOutcome("ada", _student(0.402, 4.21), report_dir="students/ada", seconds=200.0),
        StudentOutcome(
            HOSTILE_NAME,
            _student(0.30, 5.0, fail=("MatmulCorrectness.Naive/64",)),
            report_dir=f"students/{HOSTILE_NAME}",
            seconds=230.0,
        ),
        StudentOutcome(FORMULA_NAME, _student(0.50, None), report_dir="javascript:alert(1)", seconds=190.0),
        StudentOutcome("-bob", None, error="=1+1 is not a submission: no vector_add.cu", seconds=0.3),
        StudentOutcome("carol", None, error=BROKEN_SCRIPT, report_dir="students/carol"),
    ]


class Page(HTMLParser):
    """Text content, hrefs, and the test names in document order."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.text: list[str] = []
        self.hrefs: list[str] = []
        self.svgs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "a" and a.get("href"):
            self.hrefs.append(a["href"] or "")
        if tag == "svg":
            self.svgs.append(a.get("class") or "")

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def parse(html: str) -> Page:
    check_structure(html)
    page = Page()
    page.feed(html)
    page.close()
    return page


# --- class summary -----------------------------------------------------------------------------------


def test_summary_parses_and_lists_every_student(outcomes: list[StudentOutcome]) -> None:
    html = render_class_summary(outcomes, title="CS 508")
    page = parse(html)
    text = "".join(page.text)
    for o in outcomes:
        assert o.student in text, o.student
    assert "CS 508" in text
    # header: labs, students, GPU and toolkit from the first results that have them, date
    assert "5 (3 graded, 2 broken)" in text
    assert "NVIDIA H100 80GB HBM3" in text and "release 13.0" in text and "2025-11-22" in text
    for lab in ("03 · Vector add", "05 · Tiled matrix multiply", "06 · Reduce", "09 · Streams"):
        assert lab in text
    # broken submissions are visible with their errors, never dropped
    assert "2 submissions could not be graded" in text
    assert "=1+1 is not a submission" in text and "second line of the error" in text
    view = class_view(outcomes)
    assert [r["student"] for r in view["roster"]] == ["-bob", HOSTILE_NAME, FORMULA_NAME, "ada", "carol"]
    assert [r["broken"] for r in view["roster"]] == [True, False, False, False, True]


def test_summary_escapes_everything(outcomes: list[StudentOutcome]) -> None:
    html = render_class_summary(outcomes, title="<b>title</b>")
    assert "<img" not in html
    assert "<script" not in html.lower()
    assert "<b>title" not in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    page = parse(html)
    for href in page.hrefs:  # in-page anchors or relative, quoted paths: no scheme, no markup
        assert href.startswith("#") or (":" not in href and "<" not in href and " " not in href), href
    assert "students/%3Cimg%20src%3Dx%20onerror%3Dalert%281%29%3E/report.html" in page.hrefs
    assert "javascript%3Aalert%281%29/report.html" in page.hrefs
    assert "students/carol/" in page.hrefs  # broken: a link to the folder, there is no report.html
    assert "students/ada/report.html" in page.hrefs


def test_histogram_with_mean_and_median(outcomes: list[StudentOutcome]) -> None:
    html = render_class_summary(outcomes)
    page = parse(html)
    assert page.svgs.count("chart hist") == 1
    dist = class_view(outcomes)["distribution"]
    scores = sorted(o.results.score for o in outcomes if o.results is not None)
    assert dist["n"] == 3 and dist["left_out"] == 2 and dist["unit"] == "points"
    assert dist["median"] == f"{scores[1]:.1f}".removesuffix(".0")
    assert f"mean {dist['mean']}" in html and f"median {dist['median']}" in html
    assert "2 submissions without a score (2 broken) are not in the chart" in html


def test_the_chart_says_why_rows_have_no_score(outcomes: list[StudentOutcome]) -> None:
    """A roster's missing student has no score either: the caption names each reason with its count."""
    html = render_class_summary([*outcomes, StudentOutcome("eve", None, missing=True)])
    assert "3 submissions without a score (2 broken, 1 missing) are not in the chart" in html


def test_pass_rates_sorted_ascending_per_lab(outcomes: list[StudentOutcome]) -> None:
    view = class_view(outcomes)
    groups = {g["number"]: g for g in view["pass_rates"]}
    assert list(groups) == ["03", "05", "06", "09"]
    for g in groups.values():
        rows = g["rows"] + g["more"]
        keys = [(r["kind"] == "perf", r["rate"]) for r in rows]
        assert keys == sorted(keys), g["number"]
        assert all(r["rate"] < 1 for r in rows) and all(r["rate"] == 1 for r in g["all_passed"])
    matmul = {r["name"]: r for r in groups["05"]["rows"]}
    assert matmul["MatmulCorrectness.Tiled/1000"]["rate"] == 0
    assert (
        matmul["MatmulCorrectness.Naive/64"]["passed"],
        matmul["MatmulCorrectness.Naive/64"]["total"],
    ) == (2, 3)
    assert "wrong answer ×3" in matmul["MatmulCorrectness.Tiled/1000"]["why"]
    assert "MatmulCorrectness.Naive/1000" in {r["name"] for r in groups["05"]["all_passed"]}
    html = render_class_summary(outcomes)
    section = html[html.index('id="tests-05"') : html.index('id="tests-06"')]
    assert section.index(">Tiled/1000<") < section.index(">Naive/64<")
    assert "2 / 3" in section and "67 %" in section


def test_leaderboard_order(outcomes: list[StudentOutcome]) -> None:
    boards = {b["name"]: b for b in class_view(outcomes)["leaderboards"]}
    # only perf tests with speed points get a board
    assert set(boards) == {"ReducePerf.Shuffle/268435456", "StreamsPerf.Overlap/8"}
    reduce = boards["ReducePerf.Shuffle/268435456"]
    assert [r["student"] for r in reduce["rows"]] == [
        HOSTILE_NAME,
        "ada",
        FORMULA_NAME,
    ]  # GB/s, highest first
    assert [r["rank"] for r in reduce["rows"]] == [1, 2, 3]
    assert reduce["rows"][0]["value"].endswith("GB/s") and reduce["rows"][0]["ratio"] == "1.30×"
    assert not reduce["by_ratio"] and reduce["unit"] == "GB/s"
    streams = boards["StreamsPerf.Overlap/8"]
    # ms: lowest first; the student whose test was skipped is not ranked but counted
    assert [r["student"] for r in streams["rows"]] == ["ada", HOSTILE_NAME]
    assert streams["rows"][0]["value"] == "4.21 ms" and streams["unranked"] == 1
    html = render_class_summary(outcomes)
    board = html[html.index("StreamsPerf.Overlap/8</h4>") :]
    assert board.index(">ada<") < board.index("&lt;img src=x")


def test_leaderboard_across_gpus_ranks_by_ratio(outcomes: list[StudentOutcome]) -> None:
    other = outcomes[1].results
    assert other is not None
    other.run.gpu = {**other.run.gpu, "gpu_name": "NVIDIA H200"}
    for t in other.labs[2].tests:  # on a faster GPU: the highest GB/s, but slower than its reference
        if t.name == "ReducePerf.Shuffle/268435456":
            assert t.perf is not None and t.perf.impl is not None and t.perf.reference is not None
            t.perf.impl.median_ms, t.perf.reference.median_ms = 0.30, 0.20
    board = next(
        b for b in class_view(outcomes)["leaderboards"] if b["name"].startswith("ReducePerf.Shuffle")
    )
    assert board["by_ratio"]
    assert [r["student"] for r in board["rows"]] == ["ada", FORMULA_NAME, HOSTILE_NAME]
    assert "GPUs seen" in dict(class_view(outcomes)["meta"])


def test_lab_stats(outcomes: list[StudentOutcome]) -> None:
    stats = {s["number"]: s for s in class_view(outcomes)["lab_stats"]}
    assert stats["03"]["build_failed"] == 3 and stats["03"]["n"] == 3
    outcomes[0].results.labs[1].score = 30.0  # type: ignore[union-attr]
    stats = {s["number"]: s for s in class_view(outcomes)["lab_stats"]}
    assert (stats["05"]["mean"], stats["05"]["median"], stats["05"]["min"], stats["05"]["max"]) == (
        "38",
        "42",
        "30",
        "42",
    )
    assert stats["06"]["strip"] is not None
    tasks = {t["id"]: t for t in stats["05"]["tasks"]}
    assert tasks["naive"]["points"] == "30" and tasks["naive"]["full"] == 3


def test_summary_is_deterministic(outcomes: list[StudentOutcome]) -> None:
    assert render_class_summary(outcomes) == render_class_summary(outcomes)


def test_summary_edge_cases() -> None:
    empty = render_class_summary([])
    parse(empty)
    assert "No labs were graded in this batch." in empty and "chart hist" not in empty
    broken = [StudentOutcome("x", None, error="boom"), StudentOutcome("y", None)]
    html = render_class_summary(broken)
    page = parse(html)
    assert "chart hist" not in html and "x" in page.text and "not graded" in "".join(page.text)
    # submissions graded on different labs: the distribution compares percentages
    one = sample_results()
    one.labs = one.labs[:1]
    mixed = [StudentOutcome("a", sample_results()), StudentOutcome("b", one)]
    assert class_view(mixed)["distribution"]["unit"] == "%"
    parse(render_class_summary(mixed))
    # a student who lacks a lab gets a dash there
    roster = {r["student"]: r for r in class_view(mixed)["roster"]}
    assert [c["text"] for c in roster["b"]["cells"]][1:] == ["–", "–", "–"]


# --- gradebook ----------------------------------------------------------------------------------------


def _csv(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text)))


def test_gradebook_rows_and_columns(outcomes: list[StudentOutcome]) -> None:
    text = render_gradebook_csv(outcomes)
    assert validate_class_gradebook(text) == []
    rows = _csv(text)
    header = rows[0]
    labs = ["03-vector-add", "05-tiled-matmul", "06-reduce", "09-streams"]
    assert header[:3] == ["student", "total", "max_total"]
    assert header[3:7] == labs
    assert header[-2:] == ["status", "notes"]
    assert (
        "05-tiled-matmul:tiled" in header and "06-reduce:shuffle" in header and "09-streams:events" in header
    )
    assert header == gradebook_columns(batch_labs(outcomes))
    assert len(rows) == 1 + len(outcomes)
    assert all(len(r) == len(header) for r in rows)
    by = {r[0]: dict(zip(header, r, strict=True)) for r in rows[1:]}
    # formula injection is guarded in every text cell
    assert set(by) == {"'-bob", HOSTILE_NAME, "'" + FORMULA_NAME, "ada", "carol"}
    assert by["'-bob"]["notes"].startswith("'=1+1 is not a submission")
    for cells in by.values():
        for value in cells.values():
            assert value[:1] not in ("=", "+", "-", "@", "\t", "\r"), value
    # broken: empty scores, status broken, the error in notes
    carol = by["carol"]
    assert carol["status"] == "broken" and carol["total"] == "" and carol["max_total"] == ""
    assert all(carol[h] == "" for h in header[1:-2])
    assert carol["notes"] == "<script>alert(1)</script> second line of the error"
    ada = by["ada"]
    assert ada["status"] == "graded" and ada["total"] == "195.2" and ada["max_total"] == "400"
    assert ada["05-tiled-matmul"] == "42" and ada["05-tiled-matmul:naive"] == "30"
    assert "03-vector-add: vector_add.cu does not compile" in ada["notes"]
    # a lab's task columns (speed points included) add up to the lab's score
    for cells in by.values():
        if cells["status"] != "graded":
            continue
        for lab in labs:
            tasks = [float(cells[h]) for h in header if h.startswith(lab + ":")]
            assert sum(tasks) == pytest.approx(float(cells[lab]), abs=1e-3), lab


def test_gradebook_edge_cases() -> None:
    assert _csv(render_gradebook_csv([])) == [["student", "total", "max_total", "status", "notes"]]
    rows = _csv(render_gradebook_csv([StudentOutcome("z", None)]))
    assert rows[1] == ["z", "", "", "broken", "not graded"]
    assert validate_class_gradebook(render_gradebook_csv([StudentOutcome("z", None)])) == []


# --- files and the sample ---------------------------------------------------------------------------


def test_write_batch_reports(tmp_path: Path, outcomes: list[StudentOutcome]) -> None:
    paths = write_batch_reports(outcomes, tmp_path / "class")
    assert set(paths) == {"html", "csv", "canvas", "moodle"}
    assert paths["html"].name == "class-summary.html" and paths["csv"].name == "gradebook.csv"
    assert paths["canvas"].name == "gradebook-canvas.csv" and paths["moodle"].name == "gradebook-moodle.csv"
    assert paths["html"].read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert paths["csv"].read_text(encoding="utf-8") == render_gradebook_csv(outcomes)
    assert not list((tmp_path / "class").glob("*.tmp"))


def test_batch_sample(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert batch_sample_main([str(tmp_path)]) == 0
    html = (tmp_path / "class-summary.html").read_text(encoding="utf-8")
    parse(html)
    assert "<script" not in html  # readable without JS: there is none
    assert "http://" not in html.replace("http://www.w3.org/2000/svg", "")  # nothing from the network
    outcomes = sample_outcomes()
    assert sum(o.results is None for o in outcomes) == 2
    assert validate_class_gradebook((tmp_path / "gradebook.csv").read_text(encoding="utf-8")) == []
    assert batch_sample_main([]) == 2


def test_gradebook_notes_say_each_problem_once() -> None:
    """A compile error breaks the student and the hidden binary with the same message: one note."""
    r = sample_results()
    lab = r.labs[0]
    message = "compile error: labs/03-vector-add/vector_add.cu(20): error: expected a \";\""
    lab.builds = [
        BuildResult(target="lab03_student", ok=False, message=message),
        BuildResult(target="lab03_hidden_student", ok=False, message=message),
    ]
    rows = list(csv.DictReader(io.StringIO(render_gradebook_csv([StudentOutcome("ada", r)]))))
    assert rows[0]["notes"].count("compile error") == 1
    assert rows[0]["notes"] == f"{lab.name}: {message}"
