"""Which tests and kernels each compute-sanitizer tool runs over: lab.toml's [sanitizer] skip (per tool),
the labs' own skips, and racecheck and synccheck limited to the graded file's kernels."""

from __future__ import annotations

import fnmatch
import io
import shlex
from pathlib import Path

from grader.execute import sanitizer
from grader.grade.options import RunOptions
from grader.grade.pipeline import run_labs
from grader.model.labs import discover
from grader.model.progress import Progress
from grader.model.results import Status
from grader.tests.conftest import FakeBuilder, add_tests, spec
from grader.tests.test_sanitizer import GPU


def _lab_with(sanitizer_table: dict):
    from grader.model.labs import Lab

    return Lab(number=1, slug="x", path=Path("."), root=Path("."), title="x", student_files=("x.cu",), timeout_s=1,
               tasks=(), perf=(), sanitizer=sanitizer_table)


def test_a_tool_leaves_out_only_the_tests_its_lab_skips_for_it() -> None:
    lab = _lab_with({"tools": ["memcheck", "racecheck"], "skip": {"racecheck": ["Quicksort*", "Deep.*"]}})
    assert sanitizer.test_filter(lab, "racecheck") == "-*Perf.*:Quicksort*:Deep.*"
    assert sanitizer.test_filter(lab, "memcheck") == "-*Perf.*"
    assert sanitizer.test_filter(_lab_with({}), "racecheck") == "-*Perf.*"


def test_lab_11_runs_memcheck_only() -> None:
    """racecheck watches no kernel of a program that can launch from the device (probed on an H200: a
    host-launched race is missed once the program holds a device-side launch), so lab 11 runs memcheck,
    which follows device launches, over every correctness test."""
    labs = {lab.name: lab for lab in discover(Path(__file__).resolve().parents[2])}
    qs = labs["11-quicksort"]
    assert sanitizer.tools_for(qs) == ["memcheck"]
    assert sanitizer.test_filter(qs, "memcheck") == "-*Perf.*"


def test_lab_05_racecheck_leaves_out_only_the_tiled_kernels_largest_shapes() -> None:
    """The tiled kernel's four dearest shapes leave racecheck (memcheck and synccheck keep them); shapes
    with several tiles along k stay for every kernel, and the challenge kernel keeps all of its shapes."""
    labs = {lab.name: lab for lab in discover(Path(__file__).resolve().parents[2])}
    mm = labs["05-tiled-matmul"]
    globs = mm.sanitizer["skip"]["racecheck"]
    left_out = lambda name: any(fnmatch.fnmatchcase(name, g) for g in globs)  # noqa: E731
    for shape in ("m200_n192_k260", "m100_n75_k300", "m100_n75_k300_off1", "m129_n127_k257"):
        assert left_out(f"MatmulCorrectness.Tiled/{shape}") and not left_out(f"MatmulCorrectness.Fast/{shape}")
    for name in ("MatmulCorrectness.Tiled/m17_n33_k65", "MatmulCorrectness.Tiled/m1_n300_k70",
                 "MatmulCorrectness.Tiled/m129_n128_k40_off1", "MatmulExactCorrectness.Tiled/m300_n260_k12",
                 "TransposeCorrectness.Tiled/r96_c160"):
        assert not left_out(name)
    assert sanitizer.test_filter(mm, "memcheck") == sanitizer.test_filter(mm, "synccheck") == "-*Perf.*"


def test_the_stage_runs_each_tool_with_its_own_filter(lab_root: Path, monkeypatch) -> None:
    builder = FakeBuilder(lab_root / "build" / "bin", {"lab01_student": spec(add_tests()),
                                                       "lab01_solution": spec(add_tests())})
    toml = lab_root / "labs" / "01-add" / "lab.toml"
    toml.write_text(toml.read_text() + '\n[sanitizer]\ntools = ["memcheck", "racecheck"]\n'
                    'skip = { racecheck = ["AddCorrectness.Large/*"] }\n')
    seen: dict[str, str] = {}

    kernels_seen: dict[str, tuple[str, ...]] = {}

    def fake_run_tool(path, tool, binary, timeout_s, *, env, policy, label, gtest_filter, kernels=(),
                      own_files=()):
        seen[tool] = gtest_filter
        kernels_seen[tool] = tuple(kernels)
        result = sanitizer.not_run([tool], "stand-in")[0]
        result.status = Status.PASSED
        return sanitizer.ToolRun(tool, result, [])

    monkeypatch.setattr(sanitizer, "find_sanitizer", lambda: "/bin/true")
    monkeypatch.setattr(sanitizer, "run_tool", fake_run_tool)
    lab = run_labs(lab_root, discover(lab_root), builder, GPU, RunOptions(), Progress(stream=io.StringIO())).labs[0]
    assert seen == {"memcheck": "-*Perf.*", "racecheck": "-*Perf.*:AddCorrectness.Large/*"}
    assert kernels_seen == {"memcheck": (), "racecheck": ()}  # a stand-in build keeps no PTX: every kernel
    race = next(t for t in lab.tests if t.name == "sanitizer.racecheck")
    assert race.properties["sanitizer_left_out"] == "AddCorrectness.Large/*"
    assert "sanitizer_left_out" not in next(t for t in lab.tests if t.name == "sanitizer.memcheck").properties


def test_racecheck_and_synccheck_check_only_the_files_own_kernels(tmp_path: Path) -> None:
    """racecheck and synccheck get one exact --kernel-name filter per kernel of the graded file's PTX, so
    the tests' library kernels (cuBLAS, CUB, Thrust, the scribble) are not analysed; memcheck and initcheck
    check every kernel, and so does every tool when the file's kernels are unknown."""
    own = ["_Z17block_sort_kernelPKjPji", "_Z16partition_kernelPKjPjijPi", "_Z17block_sort_kernelPKjPji"]
    assert sanitizer.kernels_to_check("racecheck", own) == tuple(own[:2])
    assert sanitizer.kernels_to_check("synccheck", own) == tuple(own[:2])
    assert sanitizer.kernels_to_check("memcheck", own) == ()
    assert sanitizer.kernels_to_check("initcheck", own) == ()
    assert sanitizer.kernels_to_check("racecheck", None) == ()
    assert sanitizer.kernels_to_check("racecheck", []) == ()

    args = tmp_path / "args.txt"
    tool = tmp_path / "cs-args"
    tool.write_text(_stand_in_recording(args))
    tool.chmod(0o755)
    r = sanitizer.run_tool(str(tool), "racecheck", Path("/bin/true"), 10, kernels=own[:2]).result
    seen = args.read_text().split("\n")
    pairs = [seen[i + 1] for i, a in enumerate(seen) if a == "--kernel-name"]
    assert pairs == [f"kne={own[0]}", f"kne={own[1]}"]
    assert r.properties["sanitizer_kernels_checked"] == "2"
    sanitizer.run_tool(str(tool), "memcheck", Path("/bin/true"), 10)
    assert "--kernel-name" not in args.read_text().split("\n")


def _stand_in_recording(args: Path) -> str:
    """A stand-in compute-sanitizer that writes its arguments to ARGS, one a line, and a clean log."""
    return ("#!/bin/sh\n"
            f": > {shlex.quote(str(args))}\n"
            f'for a in "$@"; do printf "%s\\n" "$a" >> {shlex.quote(str(args))}; done\n'
            'log=""; while [ $# -gt 0 ]; do case "$1" in --log-file) log="$2"; shift;; esac; shift; done\n'
            'printf "========= COMPUTE-SANITIZER\\n========= ERROR SUMMARY: 0 errors\\n" > "$log"\n'
            "exit 0\n")
