"""The CUDA toolkit's tools and bubblewrap: where they are on this machine (None when they are not)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path


def find_nvcc() -> str | None:
    for candidate in (os.environ.get("CUDACXX"), shutil.which("nvcc"), "/usr/local/cuda/bin/nvcc"):
        if candidate and Path(candidate).is_file():
            return candidate
    return None


def find_sanitizer() -> str | None:
    for candidate in (shutil.which("compute-sanitizer"), "/usr/local/cuda/bin/compute-sanitizer"):
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


def toolkit_root() -> Path | None:
    """The CUDA toolkit's folder: the one nvcc sits in (bin/nvcc), else /usr/local/cuda."""
    nvcc = find_nvcc()
    root = Path(nvcc).resolve().parent.parent if nvcc else Path("/usr/local/cuda")
    return root if root.is_dir() else None


def find_cupti() -> tuple[Path, Path] | None:
    """CUPTI's header and library in the CUDA toolkit (lab 02's tests link it): (cupti.h, libcupti.so)."""
    root = toolkit_root()
    if root is None:
        return None
    headers = [root / "include" / "cupti.h", root / "extras" / "CUPTI" / "include" / "cupti.h"]
    libraries = [root / d / "libcupti.so" for d in ("lib64", "lib", "extras/CUPTI/lib64", "targets/x86_64-linux/lib",
                                                   "targets/sbsa-linux/lib")]
    header = next((h for h in headers if h.is_file()), None)
    library = next((lib for lib in libraries if lib.exists()), None)
    return (header, library) if header is not None and library is not None else None


def find_ncu(environ: dict[str, str] | None = None) -> str | None:
    """Nsight Compute: CUDALAB_NCU when set (and nothing else then), else ncu on the PATH, else the
    toolkit's bin/ncu."""
    environ = dict(os.environ if environ is None else environ)
    if environ.get("CUDALAB_NCU"):
        return environ["CUDALAB_NCU"] if Path(environ["CUDALAB_NCU"]).is_file() else None
    root = toolkit_root()
    for candidate in (shutil.which("ncu", path=environ.get("PATH")), root / "bin" / "ncu" if root else None):
        if candidate and Path(candidate).is_file():
            return str(candidate)
    return None


def find_bwrap() -> str | None:
    return shutil.which("bwrap")
