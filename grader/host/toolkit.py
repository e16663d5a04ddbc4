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


def find_bwrap() -> str | None:
    return shutil.which("bwrap")
