"""Copies a Gradescope submission's lab files into this tree: python3 ci/gradescope/stage.py SUBMISSION.

Only the files each lab.toml names as student_files are taken: from labs/NN-slug/<file> in the
submission, else <file> at its top, else the first file of that name anywhere in it (links are never
followed). Prints the names of the labs it found, space-separated. --find SUBMISSION only prints them;
--expected prints the paths a submission may hold."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from grader.labs import discover


def main(argv: list[str]) -> int:
    labs = discover(ROOT)
    if argv[:1] == ["--expected"]:
        print(", ".join(f"labs/{lab.name}/{name}" for lab in labs for name in lab.student_files))
        return 0
    copy = argv[:1] != ["--find"]
    sub = Path(argv[-1])
    found: list[str] = []
    for lab in labs:
        for name in lab.student_files:
            candidates = [sub / "labs" / lab.name / name, sub / name]
            candidates += sorted(p for p in sub.rglob(name) if not p.is_symlink())
            source = next((p for p in candidates if p.is_file() and not p.is_symlink()), None)
            if source is None:
                continue
            if copy:
                shutil.copyfile(source, lab.path / name)
                print(f"submission: {source.relative_to(sub)} -> labs/{lab.name}/{name}", file=sys.stderr)
            if lab.name not in found:
                found.append(lab.name)
    print(" ".join(found))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
