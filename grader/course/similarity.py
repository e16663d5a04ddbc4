"""Similarity of a class's submissions, per lab: `grader similarity SUBMISSIONS_OR_OUT [--lab NN]` and
`grader batch` (on by default, --no-similarity turns it off).

For each lab and each of its student files, every two students' files are compared with copydetect
(https://github.com/blingenf/copydetect, a maintained implementation of winnowing, Schleimer, Wilkerson
and Aiken, "Winnowing: local algorithms for document fingerprinting", SIGMOD 2003, the method of
MOSS): the code is tokenized (pygments; identifiers become one symbol each, comments and whitespace
go), fingerprinted by k-grams and winnowed. The skeleton's own code (labs/NN-slug/<file> of the lab
tree) is boilerplate: its fingerprints are removed from every file, so the code every student was
given makes no match. A student whose file is missing (the skeleton was graded) or unchanged is not
compared. A pair's similarity is the larger of the two shares of each file's remaining code that the
other one also has; pairs at or above the threshold (default 0.5) with at least `min_overlap` matching
tokens are flagged. Independent correct solutions of these labs share well below half (the tests
measure it); a copy with renamed variables, reordered functions and new comments shares nearly all.

The result is OUT/similarity.html (grader/report/similarity.py: the top pairs side by side, overlap
highlighted) and OUT/similarity.json (the numbers the class summary links and counts). It informs, it
never changes a grade: nothing here touches a student's results or the gradebooks. Without copydetect
installed (pip install copydetect), it says so and is skipped; a batch still succeeds.
"""

from __future__ import annotations

import argparse
import io
import json
import logging
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from grader.course.batch.students import STATE_FILE, Student, find_students, stage
from grader.host.environment import now_iso
from grader.model.errors import Exit, GraderError
from grader.model.similarity import DEFAULT_THRESHOLD, LabReport, Options, Pair, SimilarityReport
from grader.model.labs import Lab, LabError, discover, select
from grader.intake.submission import SubmissionError

REPORT_FILE = "similarity.html"
SUMMARY_FILE = "similarity.json"
INSTALL_HINT = "pip install copydetect (or pip install -r requirements.txt)"


@dataclass
class Source:
    """One student's file of one lab."""

    student: str
    file: str  # the student file's name, as lab.toml lists it
    text: str


def missing_library() -> str:
    """'' when copydetect imports, else why not (what to install)."""
    try:
        import copydetect  # noqa: F401
    except ImportError as err:
        return f"the similarity report needs the copydetect package ({err}); {INSTALL_HINT}"
    return ""


# --- comparing ------------------------------------------------------------------------------------


def _fingerprint(name: str, text: str, options: Options, boilerplate: Any = None) -> Any:
    from copydetect import CodeFingerprint

    return CodeFingerprint(name, options.noise, options.window, boilerplate=boilerplate, fp=io.StringIO(text))


def _ranges(slices: Any) -> list[tuple[int, int]]:
    """copydetect's 2xN array of [starts; ends] as sorted, merged (start, end) ranges."""
    try:
        starts, ends = slices[0], slices[1]
        pairs = sorted((int(s), int(e)) for s, e in zip(starts, ends, strict=True) if int(e) > int(s))
    except (IndexError, TypeError, ValueError):
        return []
    merged: list[tuple[int, int]] = []
    for s, e in pairs:
        if merged and s <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], e))
        else:
            merged.append((s, e))
    return merged


def compare_lab(lab: Lab, sources: list[Source], skeleton: dict[str, str], options: Options) -> LabReport:
    """Every pair of students' same-named files of one lab, the skeleton's fingerprints removed."""
    import numpy as np
    from copydetect import compare_files

    report = LabReport(lab.name, lab.number, lab.title)
    report.compared = len({s.student for s in sources})
    for file in lab.student_files:
        mine = sorted((s for s in sources if s.file == file), key=lambda s: s.student)
        if len(mine) < 2:
            continue
        base = skeleton.get(file, "")
        given = _fingerprint(file, base, Options(noise=options.noise)).hashes if base else set()
        boilerplate = np.unique(np.array(sorted(given))) if given else None
        prints = [_fingerprint(file, s.text, options, boilerplate) for s in mine]
        for i, left in enumerate(mine):
            for j in range(i + 1, len(mine)):
                right = mine[j]
                overlap, (share_a, share_b), (slices_a, slices_b) = compare_files(prints[i], prints[j])
                pair = Pair(lab.name, file, left.student, right.student, float(share_a), float(share_b),
                            int(overlap))
                report.highest = max(report.highest, pair.similarity)
                if pair.similarity >= options.threshold and pair.overlap >= options.min_overlap:
                    pair.slices_a, pair.slices_b = _ranges(slices_a), _ranges(slices_b)
                    report.pairs.append(pair)
    report.pairs.sort(key=lambda p: (-p.similarity, -p.overlap, p.a, p.b))
    return report


# --- reading the class ----------------------------------------------------------------------------


def is_batch_out(path: Path) -> bool:
    """Whether path is a folder `grader batch` wrote (student folders with .batch.json), not one of
    submissions."""
    if (path / "class-summary.html").is_file():
        return True
    try:
        return any((entry / STATE_FILE).is_file() for entry in path.iterdir() if entry.is_dir())
    except OSError:
        return False


def students_of(path: Path) -> tuple[list[Student], list[str]]:
    """The students to compare: a folder of submissions as `batch` reads it, or a batch's OUT, whose
    student folders name their submission in .batch.json ('source'). Returns (students, notes)."""
    if not is_batch_out(path):
        students, _ = find_students(path)
        return students, []
    students, notes = [], []
    for entry in sorted(path.iterdir()):
        state_path = entry / STATE_FILE
        if entry.name.startswith(".") or not state_path.is_file():
            continue
        try:
            state = json.loads(state_path.read_text(encoding="utf-8"))
            source = Path(str(state["source"]))
        except (OSError, ValueError, KeyError, TypeError) as err:
            notes.append(f"{entry.name}: {STATE_FILE} names no submission ({err})")
            continue
        if not source.exists():
            notes.append(f"{entry.name}: the submission {source} is gone")
            continue
        students.append(Student(entry.name, source))
    return students, notes


def collect(
    students: list[Student], labs: list[Lab], all_labs: list[Lab]
) -> tuple[dict[str, list[Source]], dict[str, list[str]], list[str]]:
    """Each student's own files, staged as the grader stages them (only lab.toml's student files).
    Returns ({lab: sources}, {lab: skipped}, notes about students that could not be read)."""
    sources: dict[str, list[Source]] = {lab.name: [] for lab in labs}
    skipped: dict[str, list[str]] = {lab.name: [] for lab in labs}
    notes: list[str] = []
    with tempfile.TemporaryDirectory(prefix="cudalab-similarity-") as tmp:
        for n, student in enumerate(students):
            work = Path(tmp) / str(n)
            try:
                staged = stage(student, labs, work / "staging", work / "scratch", all_labs)
            except (SubmissionError, GraderError, OSError, ValueError) as err:
                notes.append(f"{student.id}: not compared ({err})")
                continue
            except Exception as err:  # noqa: BLE001 - a StagingError, a broken archive: compare the rest
                notes.append(f"{student.id}: not compared ({type(err).__name__}: {err})")
                continue
            for lab in labs:
                s = staged.lab(lab.name)
                if s is None or s.refused:
                    skipped[lab.name].append(f"{student.id}: not staged" + (f" ({s.errors[0]})" if s else ""))
                    continue
                for file in lab.student_files:
                    if file in s.missing or file not in s.files:
                        skipped[lab.name].append(f"{student.id}: {file} missing (the skeleton was graded)")
                        continue
                    text = staged.path_of(lab, file).read_text(encoding="utf-8", errors="replace")
                    skeleton = lab.path / file
                    if skeleton.is_file() and text == skeleton.read_text(encoding="utf-8", errors="replace"):
                        skipped[lab.name].append(f"{student.id}: {file} is the unchanged skeleton")
                        continue
                    sources[lab.name].append(Source(student.id, file, text))
    return sources, skipped, notes


def analyze(
    students: list[Student], labs: list[Lab], all_labs: list[Lab], options: Options
) -> SimilarityReport:
    """Compare the class lab by lab (see the module docstring); never raises for one student's files."""
    report = SimilarityReport(options, generated=now_iso())
    report.unavailable = missing_library()
    if report.unavailable:
        return report
    sources, skipped, report.notes = collect(students, labs, all_labs)
    with _quiet():
        for lab in labs:
            skeleton = {f: (lab.path / f).read_text(encoding="utf-8", errors="replace")
                        for f in lab.student_files if (lab.path / f).is_file()}
            result = compare_lab(lab, sources[lab.name], skeleton, options)
            result.skipped = skipped[lab.name]
            report.labs.append(result)
            for s in sources[lab.name]:
                report.sources[(lab.name, s.student, s.file)] = s.text
    return report


@contextmanager
def _quiet() -> Iterator[None]:
    """copydetect logs a warning on the root logger for each file it cannot tokenize: not ours to print."""
    previous = logging.root.manager.disable
    logging.disable(logging.WARNING)
    try:
        yield
    finally:
        logging.disable(previous)


def write(report: SimilarityReport, out_dir: Path, in_batch: bool | None = None) -> dict[str, Path]:
    """OUT/similarity.html and OUT/similarity.json; returns {"html": ..., "json": ...}. in_batch: the
    page links the class summary and the students' reports (default: when out_dir has a class summary)."""
    from grader.report.similarity import render_similarity

    out_dir.mkdir(parents=True, exist_ok=True)
    back = (out_dir / "class-summary.html").is_file() if in_batch is None else in_batch
    paths = {"html": out_dir / REPORT_FILE, "json": out_dir / SUMMARY_FILE}
    for key, text in (("html", render_similarity(report, back)),
                      ("json", json.dumps(report.summary(), indent=2, ensure_ascii=False) + "\n")):
        if paths[key].is_dir():  # a student's folder by that name: leave it alone
            raise GraderError(f"{paths[key]} is a folder; the similarity report was not written")
        tmp = paths[key].with_name(paths[key].name + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(paths[key])
    return paths


def line(report: SimilarityReport) -> str:
    """One line for the batch's output."""
    if report.unavailable:
        return f"similarity: skipped: {report.unavailable}"
    per_lab = ", ".join(f"lab {lab.number:02d}: {len(lab.pairs)}" for lab in report.labs if lab.pairs)
    return (f"similarity: {report.flagged} pair(s) at or above {report.options.threshold:.0%}"
            + (f" ({per_lab})" if per_lab else "") + " (it informs; no grade changes)")


def for_batch(root: Path, students: list[Student], labs: list[Lab], out_dir: Path,
              threshold: float | None = None) -> str:
    """What `grader batch` runs after grading: the report beside the class summary, and one line to
    print. Never raises: a similarity problem never fails a batch."""
    try:
        report = analyze(students, labs, discover(root), Options(threshold=threshold or DEFAULT_THRESHOLD))
        if not report.unavailable:
            write(report, out_dir, in_batch=True)
        where = "" if report.unavailable else f"\nsimilarity report: {out_dir / REPORT_FILE}"
        return line(report) + where
    except Exception as err:  # noqa: BLE001 - it informs; it never stops a batch
        return f"similarity: skipped after an error: {type(err).__name__}: {err}"


def threshold_arg(text: str) -> float:
    """argparse's type of --threshold: a share in (0, 1], or a percentage such as 60%."""
    try:
        value = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: give a share such as 0.5 or 50%") from None
    if not 0.0 < value <= 1.0:
        raise argparse.ArgumentTypeError(f"{text!r}: give a share between 0 and 1 (0.5) or 1% to 100%")
    return value


def cmd_similarity(root: Path, path: Path, selectors: list[str], out: Path | None = None,
                   threshold: float | None = None, stdout: TextIO | None = None) -> Exit:
    """The `similarity` verb: SUBMISSIONS (a folder of submissions) or OUT (a batch's folder); writes
    similarity.html and similarity.json into --out (default: OUT itself). Exit 0 (also when pairs were
    flagged: it informs), 2 usage, 4 when copydetect is missing."""
    stdout = stdout or sys.stdout
    path = Path(path)
    if not path.is_dir():
        raise GraderError(f"{path}: no such directory (a folder of submissions, or a batch's OUT)",
                          Exit.USAGE)
    options = Options(threshold=threshold or DEFAULT_THRESHOLD)
    if out is None:
        if not is_batch_out(path):
            raise GraderError(f"{path} is a folder of submissions: say where the report goes with --out",
                              Exit.USAGE)
        out = path
    try:
        all_labs = discover(root)
        labs = select(all_labs, selectors)
    except LabError as err:
        raise GraderError(str(err), Exit.USAGE) from None
    students, notes = students_of(path)
    if not students:
        raise GraderError(f"{path}: no submissions to compare", Exit.USAGE)
    report = analyze(students, labs, all_labs, options)
    report.notes = notes + report.notes
    if report.unavailable:
        stdout.write(f"similarity: not run: {report.unavailable}\n")
        return Exit.ENVIRONMENT
    paths = write(report, Path(out))
    stdout.write(line(report) + "\n")
    for lab in report.labs:
        for p in lab.pairs[:options.top]:
            stdout.write(f"  lab {lab.number:02d} {p.file}: {p.a} ~ {p.b}: {p.similarity:.0%} "
                         f"({p.share_a:.0%} of {p.a}'s code, {p.share_b:.0%} of {p.b}'s)\n")
    for note in report.notes:
        stdout.write(f"  note: {note}\n")
    stdout.write(f"similarity report: {paths['html']}\n")
    return Exit.OK


__all__ = [
    "DEFAULT_THRESHOLD",
    "REPORT_FILE",
    "SUMMARY_FILE",
    "LabReport",
    "Options",
    "Pair",
    "SimilarityReport",
    "Source",
    "analyze",
    "cmd_similarity",
    "collect",
    "compare_lab",
    "for_batch",
    "is_batch_out",
    "line",
    "missing_library",
    "students_of",
    "threshold_arg",
    "write",
]
