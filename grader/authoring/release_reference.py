"""The reference solutions shipped compiled in a student release, so that a student's copy scores perf
points the way the instructor's tree does: against the reference, timed on the student's GPU in the same
run as the student's kernels.

`grader release` builds each lab's `labNN_solution_code` (the reference file as the shared library the
tests link against, exactly as the grader builds a student's file) for the release's GPU architectures
as machine code only (`<arch>-real`: SASS, no PTX), strips it and writes

  reference/NN-slug/liblabNN_solution_code.so    one per lab
  reference/MANIFEST.json                        the architectures, the toolkit, each library's sha256

cmake/CudaLab.cmake links the lab's tests against that library as `labNN_solution` when the tree has no
solutions/. What the copy then holds of a reference is what a `*_ref` binary holds: machine code and the
names of its kernels and contract functions. check_libraries() proves it: no PTX (the readable
intermediate form), no debug or line information, no path of the instructor's checkout, every file the
manifest names and nothing else.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import struct
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from grader.build.targets import (COMPILED_REFERENCE_DIR, COMPILED_REFERENCE_MANIFEST, archs_text,
                                  compiled_reference, compiled_reference_manifest)
from grader.host.toolkit import toolkit_root
from grader.model.errors import Exit, GraderError

if TYPE_CHECKING:
    from grader.model.labs import Lab

REFERENCE_DIR = COMPILED_REFERENCE_DIR
MANIFEST = COMPILED_REFERENCE_MANIFEST
# Turing to Blackwell: every architecture CUDA 13 compiles for that a course's students are likely to have.
DEFAULT_ARCHS = ("75", "80", "86", "89", "90", "100", "120")
FATBIN_MAGIC = 0xBA55ED50
_FATBIN_KINDS = {1: "ptx", 2: "sass"}
BUILD_TIMEOUT_S = 3600.0


class ReferenceError(GraderError):
    """The compiled references could not be built or are not what a release may ship."""

    def __init__(self, message: str, code: Exit = Exit.BUILD) -> None:
        super().__init__(message, code)


# --- what a library holds ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class FatbinEntry:
    kind: str  # "ptx", "sass" or "kind N"
    arch: int  # 90 for sm_90 / compute_90
    sha256: str  # of the payload as stored (compressed or not)


def fatbin_entries(data: bytes) -> list[FatbinEntry]:
    """The device code embedded in an object or library: every fat binary's entries. The layout (a 16-byte
    header: magic, version, header size, size; then entries of kind, version, header size, padded payload
    size, ..., the architecture at byte 28) is what nvcc writes; a truncated one ends the walk."""
    out: list[FatbinEntry] = []
    magic = struct.pack("<I", FATBIN_MAGIC)
    at = data.find(magic)
    while at != -1 and at + 16 <= len(data):
        _, _, header, size = struct.unpack_from("<IHHQ", data, at)
        pos, end = at + header, min(at + header + size, len(data))
        while pos + 32 <= end:
            kind, _, entry_header, payload = struct.unpack_from("<HHIQ", data, pos)
            arch = struct.unpack_from("<I", data, pos + 28)[0]
            body = data[pos + entry_header:pos + entry_header + payload]
            out.append(FatbinEntry(_FATBIN_KINDS.get(kind, f"kind {kind}"), arch, hashlib.sha256(body).hexdigest()))
            if entry_header == 0:
                break
            pos += entry_header + payload
        at = data.find(magic, max(end, at + 4))
    return out


def elf_sections(data: bytes) -> list[str]:
    """The section names of a 64-bit little-endian ELF file ([] when it is not one)."""
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1 or len(data) < 64:
        return []
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    if not shoff or shentsize < 64 or shoff + shnum * shentsize > len(data) or shstrndx >= shnum:
        return []
    headers = [struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize) for i in range(shnum)]
    strtab_off, strtab_size = headers[shstrndx][4], headers[shstrndx][5]
    strtab = data[strtab_off:strtab_off + strtab_size]
    names = []
    for name_off, *_ in headers:
        stop = strtab.find(b"\0", name_off)
        names.append(strtab[name_off:stop if stop != -1 else None].decode("ascii", "replace"))
    return names


def toolkit_ptx() -> frozenset[str]:
    """The PTX the CUDA toolkit's own device runtime (libcudadevrt.a) carries: a lab with dynamic
    parallelism links it into its library, and that PTX is NVIDIA's, not the reference's."""
    root = toolkit_root()
    for place in ([root / "lib64", root / "targets" / "x86_64-linux" / "lib"] if root else []):
        try:
            data = (place / "libcudadevrt.a").read_bytes()
        except OSError:
            continue
        return frozenset(e.sha256 for e in fatbin_entries(data) if e.kind == "ptx")
    return frozenset()


def library_problems(path: Path, rel: str, source_root: Path | None = None,
                     allowed_ptx: frozenset[str] | None = None) -> list[str]:
    """Why this file may not ship as a compiled reference ([] when it may). allowed_ptx: payloads that
    are the toolkit's (toolkit_ptx(), the default)."""
    allowed_ptx = toolkit_ptx() if allowed_ptx is None else allowed_ptx
    data = path.read_bytes()
    sections = elf_sections(data)
    if not sections:
        return [f"{rel} is not a 64-bit ELF library"]
    problems = []
    entries = fatbin_entries(data)
    if not entries:
        problems.append(f"{rel} holds no device code")
    ptx = sorted({e.arch for e in entries if e.kind == "ptx" and e.sha256 not in allowed_ptx})
    if ptx:
        problems.append(f"{rel} holds PTX ({archs_text(ptx)}), the reference's device code in readable form")
    debug = sorted({s for s in sections if s.startswith((".debug", ".zdebug", ".nv_debug", ".gnu_debuglink"))})
    if debug:
        problems.append(f"{rel} holds debug information ({', '.join(debug)})")
    if source_root is not None and str(source_root.resolve()).encode() in data:
        problems.append(f"{rel} names the instructor's checkout ({source_root})")
    return problems


def check_libraries(out: Path, source_root: Path | None = None) -> list[str]:
    """What under reference/ a release may not ship: see library_problems(); a manifest that does not
    match the files; anything that is not a manifest entry."""
    base = out / REFERENCE_DIR
    if not base.exists():
        return []
    data = compiled_reference_manifest(out)
    listed = data.get("libraries", {}) if isinstance(data.get("libraries"), dict) else {}
    problems = [] if data else [f"{MANIFEST} is missing or not JSON"]
    allowed_ptx = toolkit_ptx()
    for path in sorted(p for p in base.rglob("*") if p.is_file() or p.is_symlink()):
        rel = path.relative_to(out).as_posix()
        if rel == MANIFEST:
            continue
        entry = listed.get(rel)
        if path.is_symlink() or entry is None:
            problems.append(f"{rel} is not a compiled reference {MANIFEST} lists")
            continue
        if hashlib.sha256(path.read_bytes()).hexdigest() != entry.get("sha256"):
            problems.append(f"{rel} is not the library {MANIFEST} lists (sha256 differs)")
        problems += library_problems(path, rel, source_root, allowed_ptx)
    problems += [f"{MANIFEST} lists {rel}, which is not in the release" for rel in listed if not (out / rel).is_file()]
    return problems


# --- building them ------------------------------------------------------------------------------------------


def _run(cmd: list[str], cwd: Path, what: str) -> None:
    try:
        proc = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              errors="replace", timeout=BUILD_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise ReferenceError(f"{what}: {err}") from None
    if proc.returncode != 0:
        tail = "\n".join(proc.stdout.splitlines()[-30:])
        raise ReferenceError(f"{what} failed (exit {proc.returncode}):\n{tail}")


def _toolkit() -> str:
    try:
        proc = subprocess.run(["nvcc", "--version"], capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return next((line.strip() for line in proc.stdout.splitlines() if "release" in line), "")


def build(root: Path, out: Path, labs: Sequence[Lab], archs: Sequence[str], jobs: int | None = None,
          step: Callable[[str], None] | None = None) -> list[str]:
    """Compile each lab's reference in root into out/reference/ (module docstring); returns the
    release-relative paths written, the manifest last. Labs without a solution are skipped."""
    step = step or (lambda _msg: None)
    labs = [lab for lab in labs if all((lab.solution_dir / f).is_file() for f in lab.student_files)]
    if not labs or not archs:
        return []
    if shutil.which("cmake") is None or shutil.which("nvcc") is None:
        raise ReferenceError("compiling the references needs cmake and nvcc on the PATH "
                             "(or leave them out: --reference-archs none)")
    root = root.resolve()
    scratch = Path(tempfile.mkdtemp(prefix="cudalab-reference-"))
    # Compiled from a copy: nvcc names each source in the fat binary, and the instructor's checkout
    # should not be named. Host and device preprocessing both go through the host compiler, so the
    # prefix map shortens __FILE__ (asserts, error messages) to cudalab/...
    source = scratch / "cudalab"
    binary = scratch / "build"
    prefix_map = f"-ffile-prefix-map={source}=cudalab"
    try:
        shutil.copytree(root, source, symlinks=True, ignore=shutil.ignore_patterns(
            ".git", "build", ".venv", "reports", "__pycache__", ".pytest_cache", REFERENCE_DIR))
        configure = ["cmake", "-S", str(source), "-B", str(binary), "-DCMAKE_BUILD_TYPE=Release",
                     "-DCMAKE_CUDA_ARCHITECTURES=" + ";".join(f"{a}-real" for a in archs),
                     f"-DCUDALAB_LABS={';'.join(lab.name for lab in labs)}", "-DCUDALAB_BUILD_SOLUTIONS=ON", "-DCUDALAB_LINEINFO=OFF",
                     f"-DCMAKE_CUDA_FLAGS=-Xcompiler={prefix_map}", f"-DCMAKE_CXX_FLAGS={prefix_map}"]
        if shutil.which("ninja"):
            configure += ["-G", "Ninja"]
        step(f"compiling {len(labs)} reference(s) for {archs_text(archs)}")
        _run(configure, source, "configuring the reference build")
        targets = [f"{lab.target_prefix}_solution_code" for lab in labs]
        _run(["cmake", "--build", str(binary), "--target", *targets, "-j", str(jobs or os.cpu_count() or 2)],
             source, "compiling the references")
        written, libraries = [], {}
        for lab in labs:
            built = binary / "lib" / compiled_reference(out, lab).name
            dest = compiled_reference(out, lab)
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(built, dest)
            if shutil.which("strip"):
                _run(["strip", "--strip-unneeded", str(dest)], out, f"stripping {dest.name}")
            rel = dest.relative_to(out).as_posix()
            libraries[rel] = {"lab": lab.name, "sha256": hashlib.sha256(dest.read_bytes()).hexdigest()}
            written.append(rel)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    (out / MANIFEST).write_text(json.dumps({
        "what": "the reference solutions as machine code for these GPUs (no source, no PTX)",
        "archs": [int(a) for a in archs], "toolkit": _toolkit(), "libraries": libraries,
    }, indent=2) + "\n", encoding="utf-8")
    problems = check_libraries(out, root)
    if problems:
        raise ReferenceError("the compiled references may not ship: " + "; ".join(problems))
    return written + [MANIFEST]


def parse_archs(text: str) -> list[str]:
    """--reference-archs: "90", "80,90", "sm_90", or "none" (ship no compiled reference)."""
    if text.strip().lower() in ("none", "off", ""):
        return []
    archs = []
    for part in text.replace(";", ",").split(","):
        part = part.strip().lower().removeprefix("sm_").removesuffix("-real")
        if not part.isdigit() or not 50 <= int(part) <= 200:
            raise GraderError(f"--reference-archs: '{part}' is not a GPU architecture (like 90 or sm_90)", Exit.USAGE)
        archs.append(part)
    return sorted(set(archs), key=int)
