"""The references a student release ships compiled (grader/authoring/release_reference.py): what the
checks read in real nvcc output, what they refuse, and a real build of two labs' references."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from grader.authoring import release_reference as rr
from grader.model.errors import GraderError
from grader.model.labs import discover

ROOT = Path(__file__).resolve().parents[2]
KERNEL = "__global__ void twice(float* x) { x[threadIdx.x] *= 2.f; }\n" \
         "void run_twice(float* x) { twice<<<1, 32>>>(x); }\n"
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc (the CUDA toolkit) on the PATH")


def compile_library(tmp_path: Path, *gencode: str, extra: tuple[str, ...] = ()) -> Path:
    src = tmp_path / "twice.cu"
    src.write_text(KERNEL)
    out = tmp_path / "libtwice.so"
    subprocess.run(["nvcc", "-shared", "-Xcompiler=-fPIC", *gencode, *extra, str(src), "-o", str(out)],
                   check=True, capture_output=True)
    return out


@needs_nvcc
def test_machine_code_only_passes(tmp_path: Path) -> None:
    lib = compile_library(tmp_path, "-gencode", "arch=compute_90,code=sm_90", "-gencode", "arch=compute_80,code=sm_80")
    entries = rr.fatbin_entries(lib.read_bytes())
    assert {(e.kind, e.arch) for e in entries} == {("sass", 90), ("sass", 80)}
    assert rr.library_problems(lib, "reference/x.so", allowed_ptx=frozenset()) == []


@needs_nvcc
def test_ptx_is_refused(tmp_path: Path) -> None:
    """-arch=sm_90 embeds compute_90 PTX beside the SASS: the kernel's code in readable form."""
    lib = compile_library(tmp_path, "-arch=sm_90")
    assert ("ptx", 90) in {(e.kind, e.arch) for e in rr.fatbin_entries(lib.read_bytes())}
    problems = rr.library_problems(lib, "reference/x.so", allowed_ptx=frozenset())
    assert problems == ["reference/x.so holds PTX (sm_90), the reference's device code in readable form"]


@needs_nvcc
def test_debug_information_and_the_checkout_path_are_refused(tmp_path: Path) -> None:
    lib = compile_library(tmp_path, "-gencode", "arch=compute_90,code=sm_90", extra=("-g",))
    problems = rr.library_problems(lib, "reference/x.so", source_root=tmp_path, allowed_ptx=frozenset())
    assert any("holds debug information (.debug_" in p for p in problems)
    assert any(f"names the instructor's checkout ({tmp_path})" in p for p in problems)


@needs_nvcc
def test_the_toolkit_device_runtime_ptx_is_known() -> None:
    """A dynamic-parallelism lab links libcudadevrt.a, which carries NVIDIA's PTX: that much is allowed."""
    assert rr.toolkit_ptx(), "libcudadevrt.a not found beside nvcc"


def test_not_an_elf_file_and_no_device_code(tmp_path: Path) -> None:
    junk = tmp_path / "x.so"
    junk.write_bytes(b"#!/bin/sh\necho reference\n")
    assert rr.library_problems(junk, "reference/x.so", allowed_ptx=frozenset()) == [
        "reference/x.so is not a 64-bit ELF library"]
    assert rr.fatbin_entries(b"\x50\xed\x55\xba\x01\x00") == []  # a truncated header ends the walk


def test_the_manifest_must_list_exactly_what_ships(tmp_path: Path) -> None:
    lib = tmp_path / "reference" / "01-add" / "liblab01_solution_code.so"
    lib.parent.mkdir(parents=True)
    lib.write_bytes(b"not a library")
    assert rr.check_libraries(tmp_path)[0] == f"{rr.MANIFEST} is missing or not JSON"
    (tmp_path / rr.MANIFEST).write_text(json.dumps({"archs": [90], "libraries": {
        "reference/01-add/liblab01_solution_code.so": {"sha256": "0" * 64},
        "reference/02-gone/liblab02_solution_code.so": {"sha256": "0" * 64}}}))
    (tmp_path / "reference" / "notes.txt").write_text("the answers")
    problems = rr.check_libraries(tmp_path)
    assert "reference/01-add/liblab01_solution_code.so is not the library reference/MANIFEST.json lists " \
           "(sha256 differs)" in problems
    assert "reference/notes.txt is not a compiled reference reference/MANIFEST.json lists" in problems
    assert "reference/MANIFEST.json lists reference/02-gone/liblab02_solution_code.so, which is not in the " \
           "release" in problems
    assert rr.check_libraries(tmp_path / "nothing") == []


def test_parse_archs() -> None:
    assert rr.parse_archs("90,sm_80; 90-real") == ["80", "90"]
    assert rr.parse_archs("none") == []
    with pytest.raises(GraderError, match="'hopper' is not a GPU architecture"):
        rr.parse_archs("hopper")


@needs_nvcc
def test_two_references_of_this_repository_compile_clean(tmp_path: Path) -> None:
    """Lab 01, and lab 11 (relocatable device code, the device runtime linked in), for sm_90: machine
    code only, nothing of the checkout's path, the manifest's hashes right."""
    labs = [lab for lab in discover(ROOT) if lab.number in (1, 11)]
    written = rr.build(ROOT, tmp_path, labs, ["90"], jobs=2)
    assert written == ["reference/01-hello/liblab01_solution_code.so",
                       "reference/11-quicksort/liblab11_solution_code.so", rr.MANIFEST]
    assert rr.check_libraries(tmp_path, ROOT) == []
    data = rr.compiled_reference_manifest(tmp_path)
    assert data["archs"] == [90]
    for rel in written[:2]:
        body = (tmp_path / rel).read_bytes()
        assert data["libraries"][rel]["sha256"] == hashlib.sha256(body).hexdigest()
        assert {e.arch for e in rr.fatbin_entries(body) if e.kind == "sass"} >= {90}
        assert b"solutions/" not in body.replace(b"cudalab/solutions/", b"")  # only the shortened names
