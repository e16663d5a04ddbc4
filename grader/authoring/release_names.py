"""What a student release must not point at: the files it leaves out, and what only works with them.

A release's student-facing text (every Markdown file, each lab.toml, the CI templates) is read for
  - Markdown links to files the release does not have;
  - the names of what it leaves out (solutions/, bench/, ci/gpu-check, docs/instructors.md, ...: the
    release's exclusion table), and of what needs them (`make demo` and `--solution` grade the reference
    solutions; test_hidden_* files are hidden tests);
  - repository paths in backquotes (`docs/x.md`, `ci/y`) that the release does not have.
Code (C++, CMake, Python, shell, the Makefile) is not read: it names solutions/ and hidden tests on
purpose, to build them where they exist and to skip them where they do not.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

# Student-facing text: what a student reads. Globs on the path relative to the release.
TEXT_GLOBS = ("*.md", "labs/*/lab.toml", "ci/*.yml", "ci/*/*.yml", "ci/*/.gitlab-ci.yml",
              ".github/workflows/*.yml")
# Top-level folders whose paths, in backquotes, must exist in the release.
PATH_ROOTS = ("labs", "docs", "ci", "common", "grader", "cmake", "solutions", "bench")
# Placeholders that make a backquoted path a pattern rather than a file (labs/NN-slug/<topic>.cu).
_PLACEHOLDER = re.compile(r"NN|<|>|\*|\{|\}|\.\.\.|\$|…")


@dataclass(frozen=True)
class Absent:
    pattern: re.Pattern[str]
    name: str  # as the problem names it
    why: str


# Names that are not files but work only with what a release leaves out.
_NO_REFERENCE = "it grades the reference solutions, which a release does not have"
_ALSO_ABSENT = (
    (r"(?<![\w-])make demo\b", "make demo", _NO_REFERENCE),
    (r"(?<![\w-])--solution\b", "--solution", _NO_REFERENCE),
    (r"(?<![\w-])test_hidden_", "test_hidden_*", "hidden tests are never in a release"),
)


def absent_names(excluded: Iterable[tuple[str, str]]) -> list[Absent]:
    """The names a release must not use: each left-out path of excluded ((prefix, why) pairs; a prefix
    ending in "/" is a folder), and the names in _ALSO_ABSENT. A left-out Markdown file under docs/ is
    matched with or without its docs/ (docs link to each other by file name)."""
    names: list[Absent] = []
    for prefix, why in excluded:
        if prefix.endswith("/"):
            body = re.escape(prefix)  # a folder: named with its slash ("solutions/"), not the bare word
        elif prefix.startswith("docs/") and prefix.endswith(".md"):
            body = r"(?:docs/)?" + re.escape(prefix[len("docs/"):]) + r"(?![\w.-])"
        else:
            body = re.escape(prefix) + r"(?![\w.-])"
        # not inside a longer path (common/bench/...), but after ./ or ../ it is the same name
        start = r"(?:(?<=\./)|(?<![\w./-]))"
        names.append(Absent(re.compile(start + body), prefix, f"left out of a release: {why}"))
    names += [Absent(re.compile(p), n, w) for p, n, w in _ALSO_ABSENT]
    return names


def is_text(rel: str) -> bool:
    """Whether the file at this release-relative path is student-facing text that the check reads."""
    return any(fnmatch.fnmatchcase(rel, g) for g in TEXT_GLOBS)


_LINK = re.compile(r"\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_CODE = re.compile(r"`([^`\n]+)`")


def _dangling_link(md: Path, target: str, out: Path) -> bool:
    target = target.split("#", 1)[0]
    if not target or "://" in target or target.startswith("mailto:"):
        return False
    base = out if target.startswith("/") else md.parent
    return not (base / target.lstrip("/")).exists()


def _missing_paths(line: str, out: Path) -> list[str]:
    """Repository paths in backquotes on this line that the release does not have."""
    found = []
    for span in _CODE.findall(line):
        for token in span.split():
            token = token.strip("\"',;:()")
            if "/" not in token or token.split("/", 1)[0] not in PATH_ROOTS or _PLACEHOLDER.search(token):
                continue
            if not (out / token.rstrip("/")).exists():
                found.append(token)
    return found


def missing_references(out: Path, excluded: Iterable[tuple[str, str]]) -> list[str]:
    """Every place in the released tree's student-facing text that links to or names something the
    release does not contain ([] when there is none), one line each: file:line and what it names."""
    names = absent_names(excluded)
    problems: list[str] = []
    for path in sorted(p for p in out.rglob("*") if p.is_file() and not p.is_symlink()):
        rel = path.relative_to(out).as_posix()
        if not is_text(rel):
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        for number, line in enumerate(text.splitlines(), start=1):
            named = [a for a in names if a.pattern.search(line)]
            problems += [f"{rel}:{number} names {a.name} ({a.why})" for a in named]
            if rel.endswith(".md"):
                problems += [f"{rel}:{number} links to {t}, which the release does not have"
                             for t in _LINK.findall(line) if _dangling_link(path, t, out)
                             and not any(a.pattern.search(t) for a in named)]
            problems += [f"{rel}:{number} names {t}, which the release does not have"
                         for t in _missing_paths(line, out) if not any(a.pattern.search(t) for a in named)]
    return problems


def drop_comment_lines(text: str, excluded: Iterable[tuple[str, str]]) -> str:
    """A TOML (or shell) text without the whole-line comments that name something a release leaves out
    (a lab.toml's pointer to an instructor guide, say). Only comment lines go: values stay, so a value
    that names something left out is still found by missing_references."""
    names = absent_names(excluded)
    kept = [line for line in text.splitlines(keepends=True)
            if not (line.lstrip().startswith("#") and any(a.pattern.search(line) for a in names))]
    return "".join(kept)
