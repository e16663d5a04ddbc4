"""The HTML report: well formed, escaped, complete (GPU, scores, every test, a chart per timed test)."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest

from grader.model import results as model
from grader.report import render_html
from grader.report.html import view
from grader.report.sample import HOSTILE, no_gpu_results, sample_results
from grader.report.svg import nice_ticks, parse_mismatch_map, parse_timeline
from grader.model.results import Perf, PerfSeries, Results, Status

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


class Structure(HTMLParser):
    """Every element closes in order; collects script bodies and ids."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.errors: list[str] = []
        self.scripts: list[str] = []
        self.ids: list[str] = []
        self.in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.ids += [v for k, v in attrs if k == "id" and v]
        if tag == "script":
            self.in_script = True
            self.scripts.append("")
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.ids += [v for k, v in attrs if k == "id" and v]

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self.in_script = False
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes <{self.stack[-1] if self.stack else 'nothing'}>")
            return
        self.stack.pop()

    def handle_data(self, data: str) -> None:
        if self.in_script:
            self.scripts[-1] += data


def check_structure(html: str) -> Structure:
    parser = Structure()
    parser.feed(html)
    parser.close()
    assert parser.errors == [], parser.errors[:5]
    assert parser.stack == [], f"unclosed: {parser.stack}"
    assert len(parser.ids) == len(set(parser.ids)), "duplicate ids"
    return parser


@pytest.fixture(scope="module")
def results() -> Results:
    return sample_results()


@pytest.fixture(scope="module")
def html(results: Results) -> str:
    return render_html(results)


def test_well_formed_with_one_script_of_ours(html: str) -> None:
    parser = check_structure(html)
    assert html.startswith("<!DOCTYPE html>")
    assert len(parser.scripts) == 1 and "beforeprint" in parser.scripts[0]
    assert html.count("<script") == 1


def test_student_text_is_escaped(html: str) -> None:
    assert "<script>alert(1)" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "]]&gt;" in html and "&amp;amp;" in html
    assert "<b>before</b>" not in html  # hints are text too
    assert not CONTROL.search(html)
    assert "\\x07\\x00" in html  # control characters shown, not dropped silently
    assert "\x1b" not in html and "[31m" not in html  # ANSI colors stripped
    html.encode("utf-8")  # no lone surrogates left


def test_self_contained(html: str) -> None:
    assert not re.search(r"""<(link|img|iframe)\b""", html)
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", html)
    assert "@import" not in html and "url(" not in html


def test_header_and_scores(results: Results, html: str) -> None:
    for text in (
        "NVIDIA H100 80GB HBM3",
        "9.0 (sm_90)",
        "132",
        "1980 MHz",
        "13.0",
        "V13.0.48",
        "bd0eca2f5c1e",
        "2025-11-22 10:15 UTC",
        "student",
        "195.2",
        "/ 400",
    ):
        assert text in html, text
    for lab in results.labs:
        assert f'id="lab-{lab.number:02d}"' in html
        assert f"{lab.score:g} / {lab.max_score:g}" in html


def test_every_test_is_listed(results: Results, html: str) -> None:
    for lab in results.labs:
        for t in lab.tests:
            suite, _, rest = t.name.partition(".")
            assert f'<span class="suite">{suite}.</span>{rest}' in html, t.name
    assert "technique missing" in html and "wrong answer" in html and "crash" in html
    assert "not run" in html and "lab03_student did not build" in html
    assert html.count('class="st st-failed"') >= 4


def test_compiler_log_in_details_escaped(html: str) -> None:
    block = html[html.index('<details class="build-log"') :]
    block = block[: block.index("</details>")]
    assert 'identifier "ceil_dvi" is undefined'.replace('"', "&#34;") in block
    assert "std::vector&lt;float&gt;&lt;int&gt;" in block
    assert "\x1b" not in block


def test_a_chart_per_timed_test(results: Results, html: str) -> None:
    timed = [(lab, t) for lab in results.labs for t in lab.tests if t.perf is not None]
    assert len(timed) == 7
    for lab, t in timed:
        anchor = f'id="perf-lab-{lab.number:02d}-{re.sub(r"[^A-Za-z0-9_-]+", "-", t.name)}"'
        card = html[html.index(anchor) :]
        card = card[: card.index("</figure>")]
        assert '<svg xmlns="http://www.w3.org/2000/svg" class="chart bars"' in card, t.name
        assert "you (impl)" in card
        if t.perf.reference is not None:
            assert "reference" in card and "vs reference" in card
        if t.perf.floor_ms:
            assert "floor" in card
    # one progression for the five reduce steps at N = 2^28; the lone matmul perf test has none
    assert html.count("Progression at") == 1 and "Progression at N = 2^28" in html


def test_heatmap_and_timeline(html: str) -> None:
    assert html.count('class="chart heat"') == 1
    assert html.count('class="chart timeline"') == 1
    heat = html[html.index('class="chart heat"') :]
    heat = heat[: heat.index("</svg>")]
    assert heat.count('class="hm hm') == 24 * 24 + 6  # cells and legend
    assert "rows 0–40, cols 916–957: density 9/9 wrong" in heat


def test_svg_text_has_titles(html: str) -> None:
    for svg in re.findall(r"<svg.*?</svg>", html, flags=re.S):
        assert 'role="img"' in svg and "<title id=" in svg and "<desc id=" in svg


def test_no_gpu_run_says_so() -> None:
    results = no_gpu_results()
    html = render_html(results)
    check_structure(html)
    assert "No GPU was available" in html
    assert "no CUDA-capable device is detected" in html
    skipped = sum(lab.skipped for lab in results.labs)
    assert skipped > 0 and f"{skipped} tests could not run here" in html
    assert "Not graded: no GPU." in html and "there is no score until the tests run on a GPU" in html
    assert "chart bars" not in html  # nothing was timed
    assert html.count("no CUDA device (cudaGetDeviceCount") == skipped  # each skip shows its reason


def test_solution_mode_hides_reference_rows() -> None:
    results = sample_results()
    results.run.mode = "solution"
    html = render_html(results)
    check_structure(html)
    assert "solution mode" in html and "impl (solution)" in html
    assert "vs reference" not in html


def test_deterministic(results: Results, html: str) -> None:
    assert render_html(results) == html


def test_round_trip_through_json(results: Results, html: str) -> None:
    again = Results.from_dict(results.to_dict())
    assert render_html(again) == html


def test_edge_cases_render() -> None:
    results = sample_results()
    lab = results.labs[1]
    lab.tests.append(
        model.TestResult(
            "OddPerf.NothingMeasured",
            Status.PASSED,
            kind="perf",
            perf=Perf("GB/s", 1e9, [PerfSeries("impl", 0.0)], baseline="cub", floor_ms=-1),
        )
    )
    lab.tests.append(
        model.TestResult(
            "OddPerf.OnlyLibrary",
            Status.PASSED,
            kind="perf",
            perf=Perf("Gkeys/s", 1e9, [PerfSeries("thrust", 2.0)], baseline="thrust"),
        )
    )
    lab.tests.append(
        model.TestResult(
            "NoSuiteName",
            Status.FAILED,
            message="x",
            properties={"mismatch_shape": "axb", "mismatch_map": "12/3", "timeline": "bad"},
        )
    )
    html = render_html(results)
    check_structure(html)
    assert "OddPerf.NothingMeasured" in html and "not measured" in html
    empty = render_html(Results(run=results.run, labs=[]))
    check_structure(empty)
    assert "No labs were graded" in empty


def test_view_model_counts(results: Results) -> None:
    v = view(results)
    assert v["totals"] == {"passed": 41, "failed": 4, "skipped": 1, "not_run": 4}
    lab05 = next(lab for lab in v["labs"] if lab["number"] == "05")
    tiled = next(g for g in lab05["test_groups"] if g["title"] == "Shared-memory tiles")
    assert tiled["open"] and tiled["failed"] == 3
    naive = next(g for g in lab05["test_groups"] if g["title"].startswith("Naive"))
    assert not naive["open"]


def test_svg_parsers() -> None:
    assert parse_mismatch_map("4x6", "012/900") == (4, 6, [[0, 1, 2], [9, 0, 0]])
    assert parse_mismatch_map("4x6", "012/90") is None
    assert parse_mismatch_map("4by6", "0") is None
    assert parse_mismatch_map("4x6", "0a") is None
    spans = parse_timeline("h2d:0:0:0.5; kernel:0:0.5:0.7;junk;d2h:0:x:1;d2h:0:0.9:0.8")
    assert [(s.stage, s.chunk, s.start, s.end) for s in spans] == [
        ("h2d", "0", 0.0, 0.5),
        ("kernel", "0", 0.5, 0.7),
    ]
    assert nice_ticks(3025)[-1] == 3500 and nice_ticks(55.4)[-1] == 60 and nice_ticks(0) == [0.0, 1.0]


def test_hostile_fixture_is_really_hostile() -> None:
    assert "<script>" in HOSTILE and "]]>" in HOSTILE and "\x00" in HOSTILE and "\ud800" in HOSTILE
