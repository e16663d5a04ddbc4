"""The grader's shape: packages in layers (grader/__init__.py's LAYERS), no import cycle, small modules.

The import graph is read from the source (ast), every import counted: module level, inside functions,
and under TYPE_CHECKING alike, since a reader follows each of them."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import grader
from grader import LAYERS, TOP_LEVEL_MODULES

PACKAGE = Path(grader.__file__).resolve().parent
MAX_LINES = 450


def _modules() -> dict[str, Path]:
    """grader.x.y -> its file, the tests left out."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        if "tests" in rel.parts:
            continue
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


MODULES = _modules()


def _imports(name: str, path: Path) -> set[str]:
    """The grader modules this module imports (a name imported from a package counts as its module
    when it is one, else as the package)."""
    is_package = path.name == "__init__.py"
    package = name if is_package else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.split(".")[0] == "grader")
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if mod.split(".")[0] != "grader":
                continue
            for alias in node.names:
                sub = f"{mod}.{alias.name}"
                out.add(sub if sub in MODULES else mod)
    out.discard(name)
    return {m for m in out if m in MODULES}


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def layer_of(module: str) -> int | None:
    """The index of the module's package in LAYERS; None for the package root (grader, grader.__main__)."""
    parts = module.split(".")
    return LAYERS.index(parts[1]) if len(parts) > 1 and parts[1] in LAYERS else None


def test_every_package_is_declared() -> None:
    packages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file() and p.name != "tests"}
    assert packages == set(LAYERS), "grader/__init__.py's LAYERS must name every subpackage once"
    assert len(LAYERS) == len(set(LAYERS))


def test_few_top_level_modules() -> None:
    top = sorted(p.stem for p in PACKAGE.glob("*.py"))
    assert top == sorted(TOP_LEVEL_MODULES) and len(top) <= 4


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_module_is_too_long(module: str) -> None:
    lines = len(MODULES[module].read_text().splitlines())
    assert lines <= MAX_LINES, f"{module} has {lines} lines; split it by concern (at most {MAX_LINES})"


def test_imports_go_down_the_layers() -> None:
    wrong = []
    for module, deps in GRAPH.items():
        mine = layer_of(module)
        for dep in deps:
            theirs = layer_of(dep)
            if module.split(".")[1:2] == ["__main__"] or theirs is None:
                continue  # the entry point imports the CLI; grader itself (the version) is for all
            if mine is None:
                wrong.append(f"{module} (top level) imports {dep}")
            elif theirs > mine:
                wrong.append(f"{module} ({LAYERS[mine]}) imports {dep} ({LAYERS[theirs]}), a higher layer")
    assert not wrong, "\n".join(sorted(wrong))


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycle() -> None:
    assert _cycles(GRAPH) == []


def test_the_checks_can_fail() -> None:
    """The checks above see what they are for: a made-up cycle and an upward import."""
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert layer_of("grader.cli.args") > layer_of("grader.model.results")  # type: ignore[operator]
    assert "grader.model.results" in GRAPH["grader.grade.pipeline"]


def test_every_declared_stage_exists_and_is_drawn() -> None:
    """grader/grade/stages.py's list is true to the code, and docs/design.md draws each stage."""
    import importlib

    from grader.grade.stages import STAGES

    design = (PACKAGE.parent / "docs" / "design.md").read_text()
    drawing = design[design.index("```mermaid"):]
    drawing = drawing[: drawing.index("```", 3)]
    for stage in STAGES:
        module, _, function = stage.function.partition(":")
        assert callable(getattr(importlib.import_module(module), function)), stage
        assert f'{stage.name} ·' in drawing or f'"{stage.name}<br/>' in drawing, f"{stage.name} is not drawn"
    assert len({s.name for s in STAGES}) == len(STAGES)
