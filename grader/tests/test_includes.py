"""The include checks (grader/inspect/includes.py): the files a lab file reads, as the preprocessor lists them
(nvcc -M, host and device passes), against what a lab file may read. The cases that hide an include
from a reader of the text (digraphs, macros, line splices, raw strings, device-only code) need nvcc."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from grader.host.toolkit import find_nvcc
from grader.inspect.includes import (
    IncludePolicy,
    PreprocessError,
    check_dependencies,
    dependency_command,
    list_dependencies,
    parse_depfile,
)
from grader.model.labs import discover

from grader.tests.compile_helpers import compile_command

ROOT = Path(__file__).resolve().parents[2]
LABS = {lab.name: lab for lab in discover(ROOT)}
LAB03 = LABS["03-vector-add"]
NEEDS_NVCC = pytest.mark.skipif(find_nvcc() is None, reason="nvcc lists the dependencies")


def test_parse_depfile() -> None:
    text = "x.o: a.cu /usr/include/stdio.h \\\n  /tmp/with\\ space.h b.h \\\n b.h\n"
    assert parse_depfile(text) == ["a.cu", "/usr/include/stdio.h", "/tmp/with space.h", "b.h"]


def test_dependency_command_drops_outputs() -> None:
    cmd = ["nvcc", "-O3", "-c", "a.cu", "-o", "a.o", "-MD", "-MT", "a.o", "-MF", "a.o.d", "-Xcompiler=-save-temps=obj"]
    assert dependency_command(cmd, Path("/tmp/d")) == ["nvcc", "-O3", "a.cu", "-M", "-o", "/tmp/d"]


def test_dependency_command_keeps_no_intermediate_files() -> None:
    """The object compiles beside the listing and keeps its intermediate files (the PTX the technique checks
    read): a listing that kept its own into the same folder would overwrite them mid-compile."""
    cmd = ["nvcc", "-c", "a.cu", "-o", "a.o", "--keep", "--keep-dir=/b/k", "-keep", "-keep-dir", "/b/k",
           "--save-temps", "-Xcompiler=-save-temps=obj"]
    assert dependency_command(cmd, Path("/tmp/d")) == ["nvcc", "a.cu", "-M", "-o", "/tmp/d"]


def _policy(source: Path) -> IncludePolicy:
    return IncludePolicy(str(ROOT), str(LAB03.path), (str(source),), ("/cuda/include", "/cuda/include/cccl"),
                         ("/usr/include",), ("thrust/*", "cub/*"))


@pytest.mark.parametrize("path, why", [
    (str(ROOT / "solutions/03-vector-add/vector_add.cu"), "solutions"),
    (str(ROOT / "labs/03-vector-add/test_vector_add.cu"), "tests"),
    (str(ROOT / "labs/06-reduce/reduce.cuh"), "only the lab's own header"),
    (str(ROOT / "common/include/cudalab/compare.hpp"), "belongs to the tests"),
    ("/usr/include/gtest/gtest.h", "GoogleTest"),
    ("/cuda/include/cccl/thrust/sort.h", "forbids the library (thrust)"),
    ("/etc/passwd", "may include only"),
    ("/dev/zero", "running system"),
    ("/proc/self/cwd/../../solutions/03-vector-add/vector_add.cu", "running system"),
])
def test_policy_refuses(path: str, why: str, tmp_path: Path) -> None:
    assert why in _policy(tmp_path / "vector_add.cu").problem(path)


@pytest.mark.parametrize("path", [
    str(ROOT / "labs/03-vector-add/vector_add.cuh"), str(ROOT / "common/include/cudalab/check.cuh"),
    "/usr/include/stdio.h", "/cuda/include/cuda_runtime.h", "/cuda/include/cccl/cuda/std/atomic",
])
def test_policy_allows(path: str, tmp_path: Path) -> None:
    assert _policy(tmp_path / "vector_add.cu").problem(path) == ""


HIDDEN = {
    "digraph": '%:include "../../../../../work-root/solutions/03-vector-add/vector_add.cu"\n',
    "macro": '#define SOLUTION "../../../../../work-root/solutions/03-vector-add/vector_add.cu"\n#include SOLUTION\n',
    "splice": '#inc\\\nlude "../../../../../work-root/solutions/03-vector-add/test_hidden_vector_add.cu"\n',
    "raw-string": 'static const char* s = R"(\n/*)";\n#include "../../../../../work-root/labs/03-vector-add/test_vector_add.cu"\n// */\n',
    "device-only": '#ifdef __CUDA_ARCH__\n#include "/etc/hostname"\n#endif\n',
}


@NEEDS_NVCC
@pytest.mark.parametrize("name", list(HIDDEN))
def test_the_preprocessor_sees_through_text_tricks(name: str, tmp_path: Path) -> None:
    src = tmp_path / "a" / "b" / "c" / "d" / "vector_add.cu"
    src.parent.mkdir(parents=True)
    (tmp_path / "work-root").symlink_to(ROOT)
    body = HIDDEN[name].replace("../../../../../work-root/", f"{tmp_path}/work-root/")
    src.write_text(body + (LAB03.solution_dir / "vector_add.cu").read_text())
    command = compile_command(LAB03, src, src.with_suffix(".o"))
    deps = list_dependencies(command, src.parent)
    policy = IncludePolicy.for_lab(LAB03, [src], find_nvcc(), command)
    problems = " ".join(p.line() for p in check_dependencies(deps, policy))
    assert problems, f"{name}: nothing refused among {deps[:5]}"


@NEEDS_NVCC
def test_an_endless_include_is_stopped(tmp_path: Path) -> None:
    src = tmp_path / "vector_add.cu"
    src.write_text('#include "/dev/zero"\n')
    with pytest.raises(PreprocessError):
        list_dependencies(compile_command(LAB03, src, src.with_suffix(".o")), tmp_path)


@NEEDS_NVCC
def test_every_solution_and_skeleton_includes_only_what_it_may(tmp_path: Path) -> None:
    problems = []
    for lab in LABS.values():
        for base in (lab.path, lab.solution_dir):
            src = base / lab.student_files[0]
            if not src.is_file():
                continue
            command = compile_command(lab, src, tmp_path / "x.o")
            deps = list_dependencies(command, tmp_path)
            problems += [f"{src}: {p.line()}" for p in
                         check_dependencies(deps, IncludePolicy.for_lab(lab, [src], find_nvcc(), command))]
    assert not problems, "\n".join(problems[:10])
    assert shutil.which("c++")
