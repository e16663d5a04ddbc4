"""compile_commands.json of a build directory: how CMake compiles each file for each target, and where
the object goes. The static checks replay a compile from it (the preprocessor's dependency list) and
find the object they read; batch uses it to clear a slot's student objects."""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class CompileDb:
    build_dir: Path
    entries: list[dict] = field(default_factory=list)

    @classmethod
    def load(cls, build_dir: Path | None) -> CompileDb | None:
        if build_dir is None:
            return None
        try:
            data = json.loads((Path(build_dir) / "compile_commands.json").read_text())
        except (OSError, ValueError):
            return None
        return cls(Path(build_dir), [e for e in data if isinstance(e, dict)]) if isinstance(data, list) else None

    def entry(self, source: Path, target: str) -> dict | None:
        """The entry that compiles source for target (its object lies in <target>.dir/)."""
        src = str(Path(source).resolve())
        for e in self.entries:
            if str(Path(str(e.get("file", ""))).resolve()) == src and f"/{target}.dir/" in output_of(e):
                return e
        return None

    def command(self, entry: dict) -> list[str]:
        if isinstance(entry.get("arguments"), list):
            return [str(a) for a in entry["arguments"]]
        return shlex.split(str(entry.get("command", "")))

    def directory(self, entry: dict) -> Path:
        return Path(str(entry.get("directory", self.build_dir)))

    def object_of(self, entry: dict) -> Path | None:
        out = output_of(entry)
        if not out:
            return None
        path = Path(out)
        return path if path.is_absolute() else self.directory(entry) / path


def output_of(entry: dict) -> str:
    if entry.get("output"):
        return str(entry["output"])
    args = entry["arguments"] if isinstance(entry.get("arguments"), list) else shlex.split(str(entry.get("command", "")))
    for i, a in enumerate(args):
        if a == "-o" and i + 1 < len(args):
            return str(args[i + 1])
    return ""
