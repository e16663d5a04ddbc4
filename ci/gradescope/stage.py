"""Finds a Gradescope submission's lab files: python3 ci/gradescope/stage.py SUBMISSION DEST.

Only the files each lab.toml names as student_files are taken: from labs/NN-slug/<file> in the
submission, else <file> at its top, else the first file of that name anywhere in it (links are never
followed). Each is copied to DEST/labs/NN-slug/<file>, the layout `grader grade --submission DEST`
reads; nothing is written into this tree. Prints the names of the labs it found, space-separated.
--find SUBMISSION only prints them; --expected prints the paths a submission may hold."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from grader.model.labs import Lab, discover  # noqa: E402


def find(labs: list[Lab], sub: Path) -> list[tuple[Lab, str, Path]]:
    """(lab, student file name, where it is in the submission) for every student file found."""
    found = []
    for lab in labs:
        for name in lab.student_files:
            candidates = [sub / "labs" / lab.name / name, sub / name]
            candidates += sorted(p for p in sub.rglob(name) if not p.is_symlink())
            source = next((p for p in candidates if p.is_file() and not p.is_symlink()), None)
            if source is not None:
                found.append((lab, name, source))
    return found


def main(argv: list[str]) -> int:
    labs = discover(ROOT)
    if argv[:1] == ["--expected"]:
        print(", ".join(f"labs/{lab.name}/{name}" for lab in labs for name in lab.student_files))
        return 0
    if argv[:1] == ["--find"] and len(argv) == 2:
        sub, dest = Path(argv[1]), None
    elif len(argv) == 2 and not argv[0].startswith("-"):
        sub, dest = Path(argv[0]), Path(argv[1])
    else:
        print(__doc__.splitlines()[0], file=sys.stderr)
        return 2
    names: list[str] = []
    for lab, name, source in find(labs, sub):
        if dest is not None:
            target = dest / "labs" / lab.name / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)
            print(f"submission: {source.relative_to(sub)} -> labs/{lab.name}/{name}", file=sys.stderr)
        if lab.name not in names:
            names.append(lab.name)
    print(" ".join(names))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
