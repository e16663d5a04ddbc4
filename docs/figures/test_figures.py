"""The chapter figures: well-formed, self-contained SVG, shown in their chapters, and true to the code.

Run with `python3 -m pytest docs/figures` from the repository root.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SCRIPT = HERE / "make_figures.py"
SVG = "{http://www.w3.org/2000/svg}"


def _load_script():
    spec = importlib.util.spec_from_file_location("make_figures", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["make_figures"] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


mf = _load_script()
MADE = [fig.path().relative_to(ROOT) for fig in mf.FIGURES]
COMMITTED = sorted(p.relative_to(ROOT) for p in (ROOT / "labs").glob("*/figures/*.svg"))


def test_the_chapters_have_their_figures() -> None:
    """The figures the chapters were promised, by lab and name."""
    wanted = {("02", "global-id-1d"), ("02", "image-grid-2d"), ("04", "pitched-rows"), ("05", "tile-walk"),
              ("05", "smem-banks"), ("06", "reduction-tree"), ("07", "hillis-steele"), ("07", "blelloch"),
              ("07", "lookback"), ("08", "privatization"), ("09", "pipeline"), ("10", "tiles"),
              ("10", "grid-sync"), ("11", "bitonic-network"), ("11", "quicksort-tree")}
    assert wanted <= {(fig.lab, fig.name) for fig in mf.FIGURES}
    assert len(set(MADE)) == len(MADE), "two figures would write the same file"


def test_every_constant_the_figures_read_is_in_the_labs_code() -> None:
    """A figure drawn from a fallback value no longer follows the code: rename the constant in the script too."""
    mf.WARNINGS.clear()
    mf.render_all()
    assert mf.WARNINGS == []


@pytest.mark.parametrize("rel", COMMITTED, ids=str)
def test_svg_is_well_formed_and_self_contained(rel: Path) -> None:
    text = (ROOT / rel).read_text(encoding="utf-8")
    root = ET.fromstring(text)  # raises on malformed XML
    assert root.tag == f"{SVG}svg"
    assert re.fullmatch(r"0 0 \d+(\.\d+)? \d+(\.\d+)?", root.get("viewBox", "")), "no viewBox"
    assert root.get("font-family") == "sans-serif"
    title = root.find(f"{SVG}title")
    desc = root.find(f"{SVG}desc")
    assert title is not None and (title.text or "").strip(), "no <title>"
    assert desc is not None and (desc.text or "").strip(), "no <desc>"
    for el in root.iter():
        tag = el.tag.split("}")[-1]
        assert tag not in ("script", "foreignObject", "image", "style", "a"), f"<{tag}> in a figure"
        for name, value in el.attrib.items():
            assert not name.split("}")[-1].startswith("on"), f"event handler {name}"
            if name.split("}")[-1] == "href":
                assert value.startswith("#"), f"external href {value}"
            assert "http" not in value or name == "xmlns", f"{name}={value}"
    # the only URL in the file is the SVG namespace itself
    assert re.findall(r"https?://[^\s\"'<>]+", text) == ["http://www.w3.org/2000/svg"]


def test_every_committed_figure_is_made_by_the_script() -> None:
    assert COMMITTED == sorted(MADE)


@pytest.mark.parametrize("fig", mf.FIGURES, ids=lambda f: f"{f.lab}-{f.name}")
def test_every_figure_is_shown_in_its_chapter(fig) -> None:
    """Referenced as ![alt](figures/NAME.svg), with alt text, and followed by a one-line italic caption."""
    readme = fig.path().parent.parent / "README.md"
    lines = readme.read_text(encoding="utf-8").splitlines()
    ref = f"](figures/{fig.name}.svg)"
    hits = [i for i, line in enumerate(lines) if ref in line]
    assert len(hits) == 1, f"{readme.relative_to(ROOT)} should show figures/{fig.name}.svg once"
    line = lines[hits[0]].strip()
    assert re.fullmatch(r"!\[[^\]]+\]\(figures/[\w.-]+\.svg\)", line), line
    after = [x.strip() for x in lines[hits[0] + 1:] if x.strip()]
    assert after and re.fullmatch(r"\*[^*].*[^*]\*", after[0]), f"no italic caption after {line}"


def test_check_mode_passes() -> None:
    proc = subprocess.run([sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True, timeout=120,
                          check=False)
    assert proc.returncode == 0, proc.stderr


def test_check_mode_notices_a_figure_that_drifted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--check fails on a changed, a missing and an extra figure (on a copy of labs/)."""
    shutil.copytree(ROOT / "labs", tmp_path / "labs", ignore=shutil.ignore_patterns("build", "__pycache__"))
    monkeypatch.setattr(mf, "ROOT", tmp_path)
    assert mf.check() == 0
    first = tmp_path / MADE[0]
    first.write_text(first.read_text(encoding="utf-8").replace("</svg>", "<!-- edited --></svg>"), encoding="utf-8")
    assert mf.check() == 1
    mf.write(tmp_path)
    (tmp_path / MADE[1]).unlink()
    assert mf.check() == 1
    mf.write(tmp_path)
    (tmp_path / MADE[1]).with_name("stray.svg").write_text("<svg/>", encoding="utf-8")
    assert mf.check() == 1


def test_a_changed_constant_changes_the_figure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The tile walk follows kMatTile in matmul.cu."""
    shutil.copytree(ROOT / "labs", tmp_path / "labs", ignore=shutil.ignore_patterns("build", "__pycache__"))
    cu = next((tmp_path / "labs").glob("05-*/matmul.cu"))
    text = cu.read_text(encoding="utf-8")
    assert "constexpr int kMatTile = " in text
    cu.write_text(re.sub(r"constexpr int kMatTile = \d+;", "constexpr int kMatTile = 16;", text), encoding="utf-8")
    monkeypatch.setattr(mf, "ROOT", tmp_path)
    monkeypatch.setattr(mf, "_CONSTANTS", {})
    svg = mf.fig_05_tile_walk().render()
    assert "T = 16" in svg and "T = 32" not in svg
    assert mf.check() == 1
