"""`python3 -m grader release --out DIR`: the student copy of the workbook, and the proof that it works.

The copy holds the files git sees in the working tree (tracked, plus untracked files .gitignore does not
exclude; every file under the root when it is not a git checkout) minus the instructor's material:

  solutions/                  reference solutions and hidden tests (solutions/NN-slug/test_hidden_*.cu)
  test_hidden_* anywhere      hidden tests, wherever they are
  .notes/                     instructor notes
  docs/ (all but STUDENT_DOCS) the instructor guide, the architecture, authoring a lab, CI and Gradescope
  ci/gradescope/, ci/gpu-check, ci/gpu_summary.py,  course-staff tooling (needs solutions/)
  ci/release_perf_check.py,
  ci/course_demo.py,
  ci/multi-gpu-check, ci/slurm-check, ci/container/
  grader/tests/, .ci/         the grader's own tests and the repository's CI (they check solutions/)
  bench/                      the grading throughput benchmark (needs solutions/)
  grader/authoring/release_templates/   the student README and guide below, before they are filled in
  CHANGELOG.md                the project's history (it names the instructor's tools)

Each lab's reference goes in compiled for the release's GPUs (reference/, machine code only:
grader/authoring/release_reference.py), so that the copy scores perf points against it as the instructor's
tree does. Each lab.toml loses what would reveal its hidden tests: the [hidden] table, [[task]] entries with
hidden = true, and the [[perf]] / [[technique]] entries of those tasks, and the comment lines that point
at something the copy does not have. The copy's README.md and docs/getting-started.md are written for
students from grader/authoring/release_templates/ (what to edit, how to grade, what the report means), in place of
the instructor's. A RELEASE.md says what the copy is.

Then the copy is verified in a scratch directory (grader/authoring/release_verify.py; the release itself stays
pristine): it is checked for anything that leaks or needs solutions/, and for student-facing text that
links to or names something the copy does not have (grader/authoring/release_names.py); configured with the
preset for this machine ("ci" without a GPU), every student binary is built, and `make grade` must write
every report and exit 0, 1 or 4. Without a GPU that is 1 (the skeletons fail their technique checks,
which need none) or 4 (nothing could run).
"""

from __future__ import annotations

import fnmatch
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

from grader.authoring import release_names, release_reference
from grader.authoring.release_toml import ReleaseError, hidden_keys, strip_hidden  # noqa: F401 - release.strip_hidden
from grader.model.errors import Exit

if TYPE_CHECKING:
    from grader.model.labs import Lab

MARKER = "RELEASE.md"
TEMPLATES = Path(__file__).resolve().parent / "release_templates"
# The release's own README and guide, written from TEMPLATES: (template, path in the release).
WRITTEN = (("README.md", "README.md"), ("getting-started.md", "docs/getting-started.md"))
# The docs a release keeps (every other file under docs/ is for instructors and maintainers).
STUDENT_DOCS = ("docs/getting-started.md", "docs/timing.md")
DOCS_WHY = "documentation for instructors and maintainers (a release keeps only the students' docs)"
# Path prefixes (directories end in "/") and files left out of a release, with the reason.
EXCLUDED: tuple[tuple[str, str], ...] = (
    ("solutions/", "reference solutions and hidden tests"),
    (".notes/", "instructor notes"),
    ("docs/instructors.md", "the instructor guide"),
    ("docs/design.md", "the grader's architecture (maintainers)"),
    ("docs/authoring-a-lab.md", "how to write a lab (instructors)"),
    ("docs/ci.md", "grading pushes on GPU runners, and Gradescope (instructors)"),
    ("ci/gradescope/", "the Gradescope autograder bundle (course staff)"),
    ("ci/gpu-check", "the GPU check of the reference solutions (needs solutions/)"),
    ("ci/gpu_summary.py", "part of ci/gpu-check"),
    ("ci/release_perf_check.py", "part of ci/gpu-check (grades copies of solutions/ in a release)"),
    ("ci/course_demo.py", "part of ci/gpu-check (grades a copy of a reference solution)"),
    ("ci/multi-gpu-check", "the multi-GPU batch check (course staff; runs bench/, needs solutions/)"),
    ("ci/slurm-check", "the single-node Slurm check (course staff; grades copies of solutions/)"),
    ("ci/container/", "the grading image for a cluster (course staff)"),
    ("grader/tests/", "the grader's own tests (they check solutions/)"),
    (".ci/", "the repository's own CI (it checks solutions/)"),
    ("bench/", "the grading throughput benchmark (course staff; needs solutions/)"),
    ("grader/authoring/release_templates/", "the templates of the release's README and guide (the copy has them filled in)"),
    ("CHANGELOG.md", "the project's change history (maintainers; it names the instructor's tools)"),
)
HIDDEN_TEST_GLOB = "test_hidden_*"
# What a walk (no git) never copies: build outputs, caches, virtual environments.
_WALK_SKIP_DIRS = {".git", "build", ".venv", "reports", "__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache",
                   ".whl", ".gl", "node_modules"}
_WALK_SKIP_FILES = ("*.pyc", "*.pyo", "*.tmp")
REPORT_FILES = ("results.json", "report.html", "junit.xml", "gradescope.json", "grades.csv")




# --- what goes in ----------------------------------------------------------------------------------------


def exclusion(rel: str) -> str | None:
    """Why the file at this repository-relative path stays out of a release (None: it goes in)."""
    for prefix, why in EXCLUDED:
        if (rel.startswith(prefix) if prefix.endswith("/") else rel == prefix):
            return why
    if fnmatch.fnmatchcase(Path(rel).name, HIDDEN_TEST_GLOB):
        return "a hidden test"
    if rel.startswith("docs/") and rel not in STUDENT_DOCS:
        return DOCS_WHY
    return None


def _git_files(root: Path) -> list[str] | None:
    """Tracked files plus untracked ones .gitignore does not exclude; None when root is not a git checkout."""
    if not (root / ".git").exists() or shutil.which("git") is None:
        return None
    try:
        proc = subprocess.run(
            ["git", "-C", str(root), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            capture_output=True, timeout=60, check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode != 0:
        return None
    return sorted({p for p in proc.stdout.decode("utf-8", "surrogateescape").split("\0") if p})


def _walk_files(root: Path, skip: Path | None = None) -> list[str]:
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        dirnames[:] = sorted(d for d in dirnames if d not in _WALK_SKIP_DIRS and (skip is None or here / d != skip))
        for name in filenames:
            if not any(fnmatch.fnmatchcase(name, g) for g in _WALK_SKIP_FILES):
                found.append((here / name).relative_to(root).as_posix())
    return sorted(found)


def untracked_files(root: Path) -> list[str]:
    """Files a release would take that git does not track yet (not committed: worth a warning)."""
    if not (root / ".git").exists() or shutil.which("git") is None:
        return []
    proc = subprocess.run(["git", "-C", str(root), "ls-files", "-z", "--others", "--exclude-standard"],
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=60, check=False)
    return sorted(p for p in proc.stdout.decode("utf-8", "surrogateescape").split("\0") if p and exclusion(p) is None)


@dataclass
class Plan:
    files: list[str]  # repository-relative paths to copy
    left_out: dict[str, list[str]] = field(default_factory=dict)  # reason -> paths
    source: str = "git"  # "git" or "walk"


def plan(root: Path, out: Path | None = None) -> Plan:
    listed = _git_files(root)
    source = "git"
    if listed is None:
        listed, source = _walk_files(root, skip=out), "walk"
    files: list[str] = []
    left_out: dict[str, list[str]] = {}
    for rel in listed:
        if not (root / rel).is_file() or (root / rel).is_symlink():
            continue  # deleted in the working tree, a directory (a submodule) or a link: nothing to copy
        why = exclusion(rel)
        if why is None:
            files.append(rel)
        else:
            left_out.setdefault(why, []).append(rel)
    return Plan(files, left_out, source)


# lab.toml without its hidden entries: grader/authoring/release_toml.py (strip_hidden, hidden_keys).


# --- making the copy -------------------------------------------------------------------------------------------


def _commit(root: Path) -> str:
    if shutil.which("git") is None or not (root / ".git").exists():
        return ""
    proc = subprocess.run(["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"], stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL, text=True, check=False)
    dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, check=False)
    commit = proc.stdout.strip()
    return commit + (" with uncommitted changes" if commit and dirty.stdout.strip() else "")


def _prepare_out(root: Path, out: Path, force: bool) -> None:
    root, out = root.resolve(), out.resolve()
    if out == root or root.is_relative_to(out):
        raise ReleaseError(f"--out {out} would contain the repository itself", Exit.USAGE)
    if out.is_relative_to(root / "solutions"):
        raise ReleaseError(f"--out {out} is inside solutions/", Exit.USAGE)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        if not force:
            raise ReleaseError(f"{out} exists and is not empty (--force replaces an earlier release)", Exit.USAGE)
        if not (out / MARKER).is_file():
            raise ReleaseError(f"{out} is not an earlier release (no {MARKER}); --force replaces only those. "
                               "Remove it yourself if it should go.", Exit.USAGE)
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)


@dataclass
class Release:
    out: Path
    files: list[str]
    left_out: dict[str, list[str]]
    stripped: list[str]  # lab.toml files that lost hidden entries
    commit: str
    untracked: list[str] = field(default_factory=list)
    compiled: list[str] = field(default_factory=list)  # reference/ files: compiled references, manifest
    reference_archs: list[str] = field(default_factory=list)


def release_note(commit: str, verified: str = "") -> str:
    lines = [
        "# cudalab: student release",
        "",
        f"Made by `python3 -m grader release`{' from commit ' + commit if commit else ''}.",
        "",
        "This copy of the workbook holds the labs, the tests you can run, the common helpers and the grader.",
        "It has no reference solution source and no instructor material (reference/, when present, holds",
        "the references as machine code, to time your kernels against). Start with README.md and",
        "docs/getting-started.md; `make grade LAB=03` grades a lab, `make doctor` checks your machine.",
        "",
        "Your instructor may grade with more tests than this copy has (hidden tests on other inputs); they",
        "exercise the same functions, so code that is right for any input passes them too.",
    ]
    if verified:
        lines += ["", f"Verified: {verified}"]
    return "\n".join(lines) + "\n"


def make_release(root: Path, out: Path, force: bool = False, reference_archs: Sequence[str] = (),
                 jobs: int | None = None, step: Callable[[str], None] | None = None) -> Release:
    """Copy the student's part of root into out (see the module docstring), with each lab's reference
    compiled for reference_archs (none: no perf points in the copy). No verification."""
    root = root.resolve()
    out = out.resolve()
    _prepare_out(root, out, force)
    p = plan(root, out)
    stripped = []
    for rel in p.files:
        dest = out / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        if Path(rel).name == "lab.toml" and rel.startswith("labs/"):
            text = (root / rel).read_text(encoding="utf-8")
            new = strip_hidden(text, rel)
            if new != text:
                stripped.append(rel)
            dest.write_text(release_names.drop_comment_lines(new, EXCLUDED), encoding="utf-8")
            shutil.copymode(root / rel, dest)
        else:
            shutil.copy2(root / rel, dest)
    compiled = release_reference.build(root, out, _released_labs(root), reference_archs, jobs, step)
    written = write_student_docs(out, licence_section(root), reference_archs if compiled else ())
    commit = _commit(root)
    (out / MARKER).write_text(release_note(commit), encoding="utf-8")
    return Release(out, sorted(set(p.files) | set(written) | set(compiled)), p.left_out, stripped, commit,
                   untracked_files(root) if p.source == "git" else [], compiled=compiled,
                   reference_archs=list(reference_archs))


def _released_labs(out: Path) -> list[Lab]:
    from grader.model.labs import LabError, discover

    try:
        labs = discover(out)
    except (LabError, FileNotFoundError) as err:
        raise ReleaseError(f"the released labs do not load: {err}") from None
    if not labs:
        raise ReleaseError("the release holds no lab: labs/ is empty")
    return labs


def lab_table(labs: list[Lab]) -> str:
    """The Markdown table of the release's labs: each lab, its title, the file to edit, its points here."""
    rows = ["| lab | what it is about | the file you edit | points in this copy |", "|---|---|---|---|"]
    for lab in labs:
        files = ", ".join(f"`labs/{lab.name}/{f}`" for f in lab.student_files)
        title = lab.title.replace("|", "\\|")
        rows.append(f"| [{lab.name}](labs/{lab.name}) | {title} | {files} | {lab.total_points:g} |")
    return "\n".join(rows)


def licence_section(root: Path) -> str:
    """The licence section of the repository's README ("## Licence" or "## License" up to the next
    heading of that level), so that the student README says the same; "" when there is none."""
    try:
        text = (root / "README.md").read_text(encoding="utf-8")
    except OSError:
        return ""
    m = re.search(r"^## Licen[cs]e\b.*?(?=^## |\Z)", text, re.MULTILINE | re.DOTALL)
    return m.group(0).rstrip() + "\n" if m else ""


def example_lab(labs: list[Lab]) -> dict[str, str]:
    """The placeholders of the templates' examples, from lab 03 when the release has it, else its first lab."""
    lab = next((x for x in labs if x.number == 3), labs[0])
    return {"LAB": f"{lab.number:02d}", "LAB_NUMBER": str(lab.number), "LAB_SLUG": lab.slug, "LAB_NAME": lab.name,
            "LAB_FILE": f"labs/{lab.name}/{lab.student_files[0]}", "TARGET": f"{lab.target_prefix}_student"}


def reference_text(archs: Sequence[str]) -> str:
    """What the student docs say of speed points: scored against the compiled references, or not at all."""
    if archs:
        return ("This copy holds each lab's reference compiled for " + release_reference.archs_text(archs)
                + " (machine code in `reference/`, no source), so speed points are scored here as in your "
                "instructor's grade, against the reference timed on your GPU. On a GPU it was not compiled "
                "for, the report says so and leaves those points out.")
    return ("This copy has no reference solution, so your report shows your timings next to the library's "
            "but cannot score speed points (\"perf points cannot be scored\"). Your instructor's grade "
            "includes them.")


def write_student_docs(out: Path, licence: str = "", reference_archs: Sequence[str] = ()) -> list[str]:
    """Write the release's README and student guide from TEMPLATES (in place of the instructor's copies),
    with the lab table, the examples, what speed points mean here and the licence section filled in;
    returns their release-relative paths."""
    labs = _released_labs(out)
    values = {**example_lab(labs), "LABS": lab_table(labs), "REFERENCE": reference_text(reference_archs)}
    written = []
    for template, rel in WRITTEN:
        text = (TEMPLATES / template).read_text(encoding="utf-8")
        text = re.sub(r"\n*\{\{LICENCE\}\}\n*", lambda _m: "\n\n" + licence if licence else "\n", text)
        text = re.sub(r"\{\{([A-Z_]+)\}\}", lambda m: values.get(m.group(1), m.group(0)), text)
        if (left := re.search(r"\{\{[A-Z_]+\}\}", text)) is not None:
            raise ReleaseError(f"{TEMPLATES / template}: unknown placeholder {left.group(0)}", Exit.USAGE)
        dest = out / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(text, encoding="utf-8")
        written.append(rel)
    return written


# --- checking and verifying the copy ------------------------------------------------------------------------


def check_tree(out: Path, source_root: Path | None = None) -> list[str]:
    """What in a released tree leaks instructor material or depends on it ([] when nothing does)."""
    problems = []
    if (out / "solutions").exists():
        problems.append("solutions/ is in the release")
    for path in sorted(out.rglob(HIDDEN_TEST_GLOB)):
        problems.append(f"{path.relative_to(out)} is a hidden test")
    for path in sorted(out.rglob("answers.toml")):
        problems.append(f"{path.relative_to(out)} holds reference answers to a chapter's questions")
    for path in sorted((out / "labs").glob("*/lab.toml")):
        rel = path.relative_to(out)
        try:
            problems += [f"{rel} {p}" for p in hidden_keys(path.read_text(encoding="utf-8"))]
        except tomllib.TOMLDecodeError as err:
            problems.append(f"{rel} is not valid TOML: {err}")
    for prefix, _ in EXCLUDED:
        if (out / prefix.rstrip("/")).exists():
            problems.append(f"{prefix} is in the release")
    problems += [f"docs/{p.name} is in the release: {DOCS_WHY}" for p in sorted((out / "docs").glob("*"))
                 if f"docs/{p.name}" not in STUDENT_DOCS]
    problems += release_names.missing_references(out, EXCLUDED)
    problems += release_reference.check_libraries(out, source_root)
    if source_root is not None:
        needle = str(source_root.resolve()).encode()
        for path in sorted(p for p in out.rglob("*") if p.is_file() and not p.is_symlink()):
            try:
                if needle in path.read_bytes():
                    problems.append(f"{path.relative_to(out)} names the instructor's checkout ({source_root})")
            except OSError:
                continue
    try:
        from grader.model.labs import LabError, discover

        labs = discover(out)
        if not labs:
            problems.append("labs/ holds no lab")
    except (LabError, FileNotFoundError) as err:
        problems.append(f"the labs do not load: {err}")
    return problems


def dangling_links(out: Path) -> list[str]:
    """Student-facing text in the release that links to or names something the release does not have
    (grader/authoring/release_names.py). check_tree() counts these as problems, so a verified release has none."""
    return release_names.missing_references(out, EXCLUDED)
