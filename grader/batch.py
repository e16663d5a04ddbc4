"""Grade a whole class: `python3 -m grader batch DIR --out OUT [LAB...]`.

DIR holds one submission per student: a folder (a student's repository, or the student files alone)
or an archive (.zip, .tar.gz, ...); the student's id is the name without the archive suffix. OUT gets
each student's reports in OUT/<student>/ (grader/report: results.json, report.html, ...), the class
summary OUT/class-summary.html and the gradebook OUT/gradebook.csv (grader/report/batch.py).

How it is fast:
- The pristine tree (reference binaries, the GPU health probe) is built once in build/<preset>, before
  any student.
- Each worker slot w has a build directory of its own, build/<preset>-batch-<w>, configured once with
  CUDALAB_SUBMISSION_DIR = build/<preset>-batch-<w>-staging. A student's files are staged there (the
  skeleton stands in for a missing file, so what CMake saw at configure time stays true); the slot's
  old student objects and binaries are deleted, and only the student's file compiles and links: the
  test objects of the slot are reused. Slots build side by side (a thread each).
- Test runs are serialized by one lock (one GPU, clean timings). The reference's timings are measured
  once per lab (and kept in OUT/.reference-timings.json while the reference binary and the GPU stay
  the same) instead of once per student (pipeline.RunOptions.reference_timings).

Resumable: OUT/<student>/.batch.json records a fingerprint of what was graded (the staged student
files, refusals included, and the lab selection); a student whose fingerprint is unchanged and whose
results.json is there is not graded again unless --force. A broken submission (an unreadable or unsafe
archive, a build directory that does not configure, an internal error) gets an outcome with the error
and a gradebook row; the batch goes on. Exit 0 when the batch ran to the end, whatever the scores.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import queue
import shutil
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TextIO

from . import __version__, runs
from .cmake import Builder, CMakeBuilder
from .environment import GpuProbe, choose_preset, now_iso, probe_gpu
from .errors import Exit, GraderError
from .health import PROBE_TARGET
from .labs import Lab, LabError, discover, select
from . import static_checks
from .pipeline import PERF_FILTER, RunOptions, binary_sets, build_targets, run_labs
from .progress import Progress
from .context import COMPILE_MEMORY_MIB, COMPILE_TIMEOUT_S
from .results import BuildResult, Category, PerfSeries, Results, ResultsError, Status
from .sandbox import StagedSubmission, StagingError, stage_submission
from .submission import archive_suffix, open_submission, submission_name
from .text import truncate

STATE_FILE = ".batch.json"
REFERENCE_FILE = ".reference-timings.json"
LOG_FILE = "grade.log"
CLASS_FILES = ("class-summary.html", "gradebook.csv")
DEFAULT_WORKERS = 4  # enough build slots to keep one GPU busy; each slot compiles the test objects once

SlotBuilderFactory = Callable[[int, Path], Builder]  # (slot, staging root) -> the slot's builder


# --- the students ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Student:
    id: str  # the folder or archive name without its archive suffix
    path: Path


def find_students(batch_dir: Path, exclude: Path | None = None) -> tuple[list[Student], list[str]]:
    """Every folder and archive directly in batch_dir (dotfiles skipped), by id; and the names of the
    other files, which are ignored. Raises GraderError (usage) when two entries share an id."""
    try:
        names = sorted(os.listdir(batch_dir))
    except FileNotFoundError:
        raise GraderError(f"{batch_dir}: no such directory", Exit.USAGE) from None
    except NotADirectoryError:
        raise GraderError(
            f"{batch_dir} is not a directory (batch takes a folder of submissions)", Exit.USAGE
        ) from None
    except OSError as err:
        raise GraderError(f"{batch_dir}: {err.strerror or err}", Exit.USAGE) from None
    skip = exclude.resolve() if exclude is not None else None
    students: dict[str, Student] = {}
    ignored: list[str] = []
    for name in names:
        path = batch_dir / name
        if name.startswith(".") or (skip is not None and path.resolve() == skip):
            continue
        if path.is_dir():
            sid = name
        elif path.is_file() and archive_suffix(name):
            sid = submission_name(name)
        else:
            ignored.append(name)
            continue
        if sid in students:
            raise GraderError(
                f"{students[sid].path.name} and {name} are both student {sid!r}: keep one submission per student",
                Exit.USAGE,
            )
        if sid in CLASS_FILES:
            raise GraderError(
                f"{name}: the student id {sid!r} is the name of a class report; rename it", Exit.USAGE
            )
        students[sid] = Student(sid, path)
    return list(students.values()), ignored


def stage(
    student: Student, labs: list[Lab], staging: Path, scratch: Path, all_labs: list[Lab]
) -> StagedSubmission:
    """Open the student's submission (scratch: where an archive is extracted) and stage its student
    files into staging. Raises SubmissionError / StagingError."""
    opened = open_submission(student.path, scratch, all_labs)
    staged = stage_submission(labs, opened, staging)
    staged.source = student.path  # reports name the submission, not a scratch folder
    return staged


def fingerprint(staged: StagedSubmission, labs: list[Lab]) -> str:
    """sha256 over the lab selection and, per lab, each student file's content (or that it was missing,
    or why it was refused)."""
    h = hashlib.sha256()
    h.update(json.dumps([lab.name for lab in labs]).encode())
    for lab in labs:
        s = staged.lab(lab.name)
        h.update(f"\0lab {lab.name}\0".encode())
        if s is None:
            continue
        for file in lab.student_files:
            if file in s.files and file not in s.missing:
                h.update(f"file {file}\0".encode())
                h.update(hashlib.sha256(staged.path_of(lab, file).read_bytes()).digest())
            elif file in s.missing:
                h.update(f"missing {file}\0".encode())
        for error in s.errors:
            h.update(f"refused {error}\0".encode())
    return h.hexdigest()


def format_eta(seconds: float | None) -> str:
    """mm:ss, or h:mm:ss from an hour on; '--:--' when unknown."""
    if seconds is None or not math.isfinite(seconds) or seconds < 0:
        return "--:--"
    total = round(seconds)
    h, rest = divmod(total, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m:02d}:{s:02d}"


# --- what a finished student leaves in OUT ----------------------------------------------------------------


def _report_files() -> tuple[str, ...]:
    try:
        from .report import FILES
    except ImportError:  # pragma: no cover - grader/report is part of the package
        return ("results.json",)
    return tuple(FILES.values())


def load_prior(student_dir: Path) -> tuple[dict[str, Any], Results] | None:
    """The state and results a previous batch left for this student, or None."""
    try:
        state = json.loads((student_dir / STATE_FILE).read_text())
        results = Results.load(student_dir / "results.json")
    except (OSError, ValueError, ResultsError):
        return None
    return (state, results) if isinstance(state, dict) else None


def clear_reports(student_dir: Path) -> None:
    """Remove a student's earlier reports, so a broken submission leaves no stale grade behind."""
    for name in (*_report_files(), STATE_FILE):
        try:
            (student_dir / name).unlink()
        except FileNotFoundError:
            pass


def write_state(student_dir: Path, state: dict[str, Any]) -> None:
    path = student_dir / STATE_FILE
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(state, indent=2) + "\n")
    tmp.replace(path)


# --- builds that already happened --------------------------------------------------------------------------


class Prebuilt:
    """A builder whose targets were built already: build() hands back a copy of that result and
    configure() does nothing; everything else (bin_dir, build_dir, ...) is the inner builder's."""

    def __init__(self, inner: Builder, built: Mapping[str, BuildResult]) -> None:
        self.inner = inner
        self.built = built

    @property
    def bin_dir(self) -> Path:
        return self.inner.bin_dir

    def configure(self, labs: list[str]) -> None:
        return None

    def build(self, target: str, **limits: Any) -> BuildResult:
        done = self.built.get(target)
        return replace(done) if done is not None else self.inner.build(target, **limits)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


# --- reference timings, once per batch -------------------------------------------------------------------


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


class ReferenceTimings(Mapping[str, Mapping[str, PerfSeries]]):
    """The perf series of each reference binary ({target: {test: impl series}}), measured on first use
    (inside the pipeline, so under the batch's GPU lock) and reused for every student. Kept in
    cache_file while the binary's sha256 and the GPU's name are the same; --force measures again."""

    def __init__(
        self,
        bin_dir: Path,
        timeouts: Mapping[str, float],
        gpu: GpuProbe,
        cache_file: Path | None,
        force: bool = False,
        progress: Progress | None = None,
    ) -> None:
        self.bin_dir = Path(bin_dir)
        self.timeouts = dict(timeouts)  # reference target -> its lab's run timeout
        self.gpu = gpu
        self.cache_file = cache_file
        self.progress = progress or Progress(quiet=True)
        self.measured: list[str] = []  # targets timed by this batch (the others came from the cache)
        self._known: dict[str, dict[str, PerfSeries]] = {}
        self._lock = threading.Lock()
        self._disk: dict[str, Any] = {} if force else self._load()

    def _load(self) -> dict[str, Any]:
        if self.cache_file is None:
            return {}
        try:
            data = json.loads(self.cache_file.read_text())
        except (OSError, ValueError):
            return {}
        if (
            not isinstance(data, dict)
            or data.get("gpu") != self.gpu.name
            or not isinstance(data.get("targets"), dict)
        ):
            return {}
        return data["targets"]

    def _save(self) -> None:
        if self.cache_file is None:
            return
        self.cache_file.parent.mkdir(parents=True, exist_ok=True)
        data = {"gpu": self.gpu.name, "targets": self._disk}
        tmp = self.cache_file.with_name(self.cache_file.name + ".tmp")
        tmp.write_text(json.dumps(data, indent=2) + "\n")
        tmp.replace(self.cache_file)

    def __getitem__(self, target: str) -> Mapping[str, PerfSeries]:
        got = self.get(target)
        if got is None:
            raise KeyError(target)
        return got

    def __iter__(self) -> Iterator[str]:
        return iter(list(self.timeouts))

    def __len__(self) -> int:
        return len(self.timeouts)

    def get(self, target: str, default: Any = None) -> Any:  # type: ignore[override]
        """The target's series; None (the pipeline then times it itself) for an unknown target or no GPU."""
        if target not in self.timeouts or not self.gpu.available:
            return default
        with self._lock:
            if target not in self._known:
                self._known[target] = self._from_disk(target) or self._measure(target)
            return self._known[target]

    def _from_disk(self, target: str) -> dict[str, PerfSeries] | None:
        entry = self._disk.get(target)
        path = self.bin_dir / target
        if (
            not isinstance(entry, dict)
            or not path.is_file()
            or entry.get("binary_sha256") != _sha256_file(path)
        ):
            return None
        try:
            return {name: PerfSeries(**s) for name, s in entry.get("series", {}).items()}
        except TypeError:
            return None

    def _measure(self, target: str) -> dict[str, PerfSeries]:
        path = self.bin_dir / target
        self.progress.step(f"timing the reference {target} once for the whole batch")
        run = runs.run_binary(path, None, self.timeouts[target], label="solution", gtest_filter=PERF_FILTER)
        series = {
            t.name: t.perf.impl
            for t in run.tests
            if t.status is Status.PASSED and t.perf is not None and t.perf.impl is not None
        }
        self.measured.append(target)
        if series and path.is_file():
            self._disk[target] = {
                "binary_sha256": _sha256_file(path),
                "measured": now_iso(),
                "series": {name: vars(s) for name, s in series.items()},
            }
            self._save()
        return series


# --- grading one student in a slot -----------------------------------------------------------------------


@dataclass
class Graded:
    results: Results | None
    fingerprint: str = ""
    error: str = ""  # why there are no results, or a note about the results
    build_s: float = 0.0
    run_s: float = 0.0


class BatchGrader:
    """The pristine build, the build slots and the GPU lock of one batch. main_builder and slot_builder
    replace the CMake builders (the tests use fake ones)."""

    def __init__(
        self,
        root: Path,
        labs: list[Lab],
        gpu: GpuProbe,
        preset: str,
        *,
        workers: int = 1,
        timeout_s: float | None = None,
        max_seconds: float | None = None,
        sanitizer_tools: list[str] | None = None,
        sandbox: bool = True,
        confine: bool = True,
        host_memory_mib: float | None = None,
        main_builder: Builder | None = None,
        slot_builder: SlotBuilderFactory | None = None,
        progress: Progress | None = None,
        work_dir: Path | None = None,
    ) -> None:
        self.root = root
        self.work_dir = work_dir or root / "build"  # where the slots' build and staging folders live
        self.labs = labs
        self.gpu = gpu
        self.preset = preset
        self.workers = max(1, workers)
        cores = os.cpu_count() or 1
        self.build_jobs = max(1, cores // self.workers)
        self.timeout_s = timeout_s
        self.max_seconds = max_seconds
        self.sanitizer_tools = sanitizer_tools
        self.sandbox = sandbox
        self.confine = confine
        self.host_memory_mib = host_memory_mib
        self.main = main_builder or CMakeBuilder(root, preset, cores)
        self.real = isinstance(self.main, CMakeBuilder)
        self._slot_factory = slot_builder or self._cmake_slot
        self.progress = progress or Progress()
        self.gpu_lock = threading.Lock()
        self.pristine: dict[str, BuildResult] = {}
        self.references: ReferenceTimings | None = None
        self._slots: dict[int, Builder] = {}
        self._slots_lock = threading.Lock()
        self._configured: set[int] = set()
        self._lock_handle: TextIO | None = None
        self._all_labs: list[Lab] | None = None

    # --- slots ---

    def slot_dir(self, slot: int) -> Path:
        return self.work_dir / f"{self.preset}-batch-{slot}"

    def staging_dir(self, slot: int) -> Path:
        return self.work_dir / f"{self.preset}-batch-{slot}-staging"

    def _cmake_slot(self, slot: int, staging: Path) -> Builder:
        from .sandbox import SubmissionBuilder

        return SubmissionBuilder(
            self.root, self.preset, self.build_jobs, submission_dir=staging, directory=self.slot_dir(slot)
        )

    def slot(self, slot: int) -> Builder:
        with self._slots_lock:
            if slot not in self._slots:
                self._slots[slot] = self._slot_factory(slot, self.staging_dir(slot))
            return self._slots[slot]

    @property
    def all_labs(self) -> list[Lab]:
        """Every lab of the tree: a flat submission's file names are matched against all of them."""
        if self._all_labs is None:
            try:
                self._all_labs = discover(self.root)
            except (LabError, OSError):
                self._all_labs = list(self.labs)
        return self._all_labs

    def lock_slots(self) -> TextIO:
        """Hold build/<preset>-batch.lock for this process's life: two batches of one preset at once
        would share the slots' build folders. Raises GraderError when another batch holds it."""
        import fcntl

        self.work_dir.mkdir(parents=True, exist_ok=True)
        handle = open(self.work_dir / f"{self.preset}-batch.lock", "w")  # noqa: SIM115 - held until exit
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.close()
            raise GraderError(
                f"another batch with preset {self.preset} is running (it holds {handle.name}); "
                "wait for it, or use another --preset",
                Exit.USAGE,
            ) from None
        self._lock_handle = handle
        return handle

    def unlock_slots(self) -> None:
        handle, self._lock_handle = self._lock_handle, None
        if handle is not None:
            handle.close()

    # --- before the first student ---

    def prepare(self, out_dir: Path | None, force: bool = False) -> None:
        """Configure and build the pristine tree once: every reference binary and, with a GPU, the
        health probe. Raises GraderError when the project does not configure."""
        self.progress.step(f"configuring the pristine build (preset {self.preset})")
        self.main.configure([lab.name for lab in self.labs])
        targets = [t for lab in self.labs for t in build_targets(lab, "solution")]
        if self.real and self.gpu.available:
            targets.append(PROBE_TARGET)
        for target in targets:
            self.progress.step(f"building {target}")
            result = self.main.build(target)
            self.pristine[target] = result
            (self.progress.ok if result.ok else self.progress.fail)(
                f"{target}: " + (f"built ({result.seconds:.1f} s)" if result.ok else result.message)
            )
        timeouts = {
            bs.reference: self.timeout_s or lab.timeout_s
            for lab in self.labs
            for bs in binary_sets(lab)
            if bs.reference and self.pristine.get(bs.reference, BuildResult(bs.reference, False)).ok
        }
        self.references = ReferenceTimings(
            self.main.bin_dir,
            timeouts,
            self.gpu,
            out_dir / REFERENCE_FILE if out_dir is not None else None,
            force=force,
            progress=self.progress,
        )

    # --- one student ---

    def fingerprint_of(self, student: Student) -> str:
        """Stage the student's files in a scratch folder and fingerprint them. Raises SubmissionError."""
        with tempfile.TemporaryDirectory(prefix="cudalab-batch-") as tmp:
            staged = stage(student, self.labs, Path(tmp) / "staging", Path(tmp) / "opened", self.all_labs)
            return fingerprint(staged, self.labs)

    def _fill_in(self, staged: StagedSubmission) -> None:
        """Put the skeleton where the submission has no file (or a refused one), so the slot's CMake
        configuration, which saw every file there, never goes stale. A missing file's skeleton is
        graded from the staging tree (Guard.sources), a refused one is not built at all. Labs outside
        the selection get their skeleton too: an earlier batch may have configured the slot for them."""
        selected = {lab.name for lab in self.labs}
        for lab in [*self.labs, *(x for x in self.all_labs if x.name not in selected)]:
            s = staged.lab(lab.name)
            for file in lab.student_files:
                dest = staged.path_of(lab, file)
                if dest.exists() or not (lab.path / file).is_file():
                    continue
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(lab.path / file, dest)
                if s is not None and not s.refused and file in s.missing and file not in s.files:
                    s.files.append(file)

    def _configure_slot(self, builder: Builder, staging: Path) -> None:
        """Configure the slot (a no-op when it already is) and check that each selected lab's student
        targets compile the file from the staging tree; when a configuration made without it says
        otherwise, configure the slot afresh (its objects stay, so only what changed compiles)."""
        names = [lab.name for lab in self.labs]
        builder.configure(names)
        build_dir = getattr(builder, "build_dir", None)
        if build_dir is None or not (Path(build_dir) / "compile_commands.json").is_file():
            return
        from .compiledb import CompileDb

        db = CompileDb.load(Path(build_dir))
        files = {str(Path(str(e.get("file", ""))).resolve()) for e in db.entries} if db else set()
        wanted = [staging / "labs" / lab.name / f"{lab.topic}.cu" for lab in self.labs]
        if all(str(w.resolve()) in files for w in wanted):
            return
        (Path(build_dir) / "CMakeCache.txt").unlink(missing_ok=True)
        builder.configure(names)

    def _clean_slot(self, builder: Builder, staging: Path, targets: list[str]) -> None:
        """Delete the previous student's binaries and objects: whatever happens, nothing of theirs is
        linked or run, and the new files compile whatever their timestamps."""
        build_dir = getattr(builder, "build_dir", None)
        for target in targets:
            stale = [Path(builder.bin_dir) / target]
            if build_dir is not None and target.endswith("_student"):
                stale.append(Path(build_dir) / "lib" / f"lib{target}_code.so")
            for path in stale:
                try:
                    path.unlink()
                except FileNotFoundError:
                    pass
        if build_dir is None:
            return
        from .compiledb import CompileDb

        db = CompileDb.load(Path(build_dir))
        if db is None:
            return
        prefix = str(staging.resolve()) + os.sep
        for entry in db.entries:
            if str(Path(str(entry.get("file", ""))).resolve()).startswith(prefix):
                obj = db.object_of(entry)
                if obj is not None:
                    try:
                        obj.unlink()
                    except FileNotFoundError:
                        pass

    def _build(self, builder: Builder, staged: StagedSubmission, progress: Progress) -> dict[str, BuildResult]:
        """The student's targets, as the grade's static checks want them: the pristine test objects first,
        then what each lab's file includes (a refusal stops that lab before its file is compiled), then
        the student objects within the compile limits, then the binaries. With CMake each step is one
        `cmake --build --target A B ...`, so the slot compiles side by side; when one fails, target by
        target, for each one's own log."""
        built: dict[str, BuildResult] = {}
        labs = [lab for lab in self.labs if not staged.labs[lab.name].refused]
        if isinstance(builder, CMakeBuilder):
            tests = [t for lab in labs for t in static_checks.test_object_targets(lab)]
            if tests:
                builder.run_build(*tests, jobs=max(self.build_jobs, len(tests)))
            for lab in labs:
                sources = [staged.path_of(lab, f) for f in lab.student_files if f.endswith(".cu")]
                lines, error = static_checks.include_problems(lab, sources, builder.build_dir,
                                                              f"{lab.target_prefix}_student_object")
                s = staged.labs[lab.name]
                if lines:
                    s.errors, s.category = [builder.unstaged(x) for x in lines], Category.FORBIDDEN_CALL
                elif error:
                    obj = f"{lab.target_prefix}_student_object"
                    built[obj] = BuildResult(target=obj, ok=False, category=Category.COMPILE_ERROR,
                                             message=f"compile error: {builder.unstaged(error)}")
            labs = [lab for lab in labs if not staged.labs[lab.name].refused
                    and f"{lab.target_prefix}_student_object" not in built]
            objects = [f"{lab.target_prefix}_student_object" for lab in labs]
            built.update(self._build_together(builder, objects, progress, limited=True))
            labs = [lab for lab in labs if built[f"{lab.target_prefix}_student_object"].ok]
        targets = [bs.target for lab in labs for bs in binary_sets(lab)]
        built.update(self._build_together(builder, targets, progress))
        return built

    def _build_together(self, builder: Builder, targets: list[str], progress: Progress,
                        limited: bool = False) -> dict[str, BuildResult]:
        built: dict[str, BuildResult] = {}
        if not targets:
            return built
        limits: dict[str, float] = {}
        if limited:
            limits = {"timeout_s": COMPILE_TIMEOUT_S, "memory_mib": COMPILE_MEMORY_MIB}
        if len(targets) > 1 and isinstance(builder, CMakeBuilder):
            progress.step(f"building {', '.join(targets)}")
            start = time.monotonic()
            together = {"timeout_s": limits["timeout_s"] * len(targets), "memory_mib": limits["memory_mib"]} if limited else {}
            code, output = builder.run_build(*targets, jobs=max(self.build_jobs, len(targets)), **together)
            if code == 0:
                seconds = time.monotonic() - start
                log = truncate(output, builder.log_limit)
                for target in targets:
                    built[target] = BuildResult(target=target, ok=True, seconds=seconds, log=log)
                progress.ok(f"built {', '.join(targets)} ({seconds:.1f} s)")
                return built
        for target in targets:
            progress.step(f"building {target}")
            built[target] = result = builder.build(target, **limits) if limits else builder.build(target)
            (progress.ok if result.ok else progress.fail)(
                f"{target}: " + (f"built ({result.seconds:.1f} s)" if result.ok else result.message)
            )
        return built

    def grade(self, student: Student, slot: int, log: TextIO) -> Graded:
        """Stage, build in the slot (in parallel with other slots), then run under the GPU lock."""
        progress = Progress(stream=log, color=False)
        builder = self.slot(slot)
        staging = self.staging_dir(slot)
        with tempfile.TemporaryDirectory(prefix="cudalab-batch-") as tmp:
            try:
                staged = stage(student, self.labs, staging, Path(tmp), self.all_labs)
            except StagingError as err:  # SubmissionError included
                return Graded(None, error=str(err))
        fp = fingerprint(staged, self.labs)
        note = ""
        if not any(s.files or s.errors for s in staged.labs.values()):
            note = (
                "the submission has none of the student files of "
                + ", ".join(lab.name for lab in self.labs)
                + ": the unchanged skeletons were graded"
            )
        self._fill_in(staged)
        start = time.monotonic()
        progress.heading(f"building {student.id} in slot {slot}")
        if slot not in self._configured:  # once per slot and batch: the staging path never changes
            self._configure_slot(builder, staging)
            self._configured.add(slot)
        targets = [
            bs.target for lab in self.labs if not staged.labs[lab.name].refused for bs in binary_sets(lab)
        ]
        self._clean_slot(builder, staging, targets)
        built = self._build(builder, staged, progress)
        build_s = time.monotonic() - start
        options = RunOptions(
            mode="student",
            build=True,
            reference=True,
            timeout_s=self.timeout_s,
            submission=str(student.path),
            reference_timings=self.references,
            staged=staged,
            student_builder=Prebuilt(builder, built),
            max_seconds=self.max_seconds,
            sanitizer_tools=self.sanitizer_tools,
            sandbox="auto" if self.sandbox else "off",
            checks=self.real,
            health=self.real and self.gpu.available,
            confine=self.confine,
            host_memory_mib=self.host_memory_mib,
        )
        with self.gpu_lock:
            start = time.monotonic()
            results = run_labs(
                self.root, self.labs, Prebuilt(self.main, self.pristine), self.gpu, options, progress
            )
            run_s = time.monotonic() - start
        return Graded(results, fp, note, build_s, run_s)


# --- the batch ----------------------------------------------------------------------------------------------


@dataclass
class _Tally:
    total: int
    to_grade: int
    done: int = 0
    graded: int = 0
    started: float = field(default_factory=time.monotonic)

    def eta(self) -> float | None:
        if self.graded == 0:
            return None
        left = self.to_grade - self.graded
        return (time.monotonic() - self.started) / self.graded * left


def _score(results: Results | None) -> str:
    if results is None:
        return "broken"
    from .report._format import fmt_points

    return f"{fmt_points(results.score)}/{fmt_points(results.max_score)}"


def _log(student_dir: Path, text: str) -> None:
    student_dir.mkdir(parents=True, exist_ok=True)
    with open(student_dir / LOG_FILE, "a", encoding="utf-8") as f:
        f.write(text if text.endswith("\n") else text + "\n")


def _grade_one(grader: BatchGrader, student: Student, out_dir: Path, free_slots: queue.Queue[int]) -> Any:
    """In a worker thread: grade one student in a free slot and write their reports. Never raises."""
    from .report import StudentOutcome, write_reports

    student_dir = out_dir / student.id
    student_dir.mkdir(parents=True, exist_ok=True)
    slot = free_slots.get()
    graded: Graded
    try:
        with open(student_dir / LOG_FILE, "w", encoding="utf-8") as log:
            log.write(f"{now_iso()} grading {student.path} (slot {slot})\n")
            try:
                graded = grader.grade(student, slot, log)
            except GraderError as err:
                graded = Graded(None, error=str(err))
            except Exception as err:  # noqa: BLE001 - a broken submission (or a grader bug) never stops the batch
                log.write(traceback.format_exc())
                graded = Graded(None, error=f"internal error while grading: {type(err).__name__}: {err}")
            if graded.error:
                log.write(("error: " if graded.results is None else "note: ") + graded.error + "\n")
    finally:
        free_slots.put(slot)
    seconds = graded.build_s + graded.run_s
    if graded.results is None:
        clear_reports(student_dir)
        return StudentOutcome(
            student.id, None, error=graded.error, report_dir=student.id, seconds=seconds
        ), graded
    try:
        write_reports(graded.results, student_dir)
        write_state(
            student_dir,
            {
                "student": student.id,
                "source": str(student.path),
                "fingerprint": graded.fingerprint,
                "labs": [lab.name for lab in grader.labs],
                "seconds": round(seconds, 3),
                "build_s": round(graded.build_s, 3),
                "run_s": round(graded.run_s, 3),
                "note": graded.error,
                "graded": now_iso(),
                "finished_unix": round(time.time(), 3),
                "grader_version": __version__,
            },
        )
    except Exception as err:  # noqa: BLE001  # pragma: no cover - a full disk, a report bug: still a gradebook row
        _log(student_dir, traceback.format_exc())
        return StudentOutcome(
            student.id,
            None,
            error=f"the reports could not be written: {err}",
            report_dir=student.id,
            seconds=seconds,
        ), graded
    return StudentOutcome(
        student.id, graded.results, error=graded.error, report_dir=student.id, seconds=seconds
    ), graded


def run_batch(
    root: Path,
    batch_dir: Path,
    out_dir: Path,
    selectors: list[str],
    *,
    force: bool = False,
    jobs: int | None = None,
    preset: str | None = None,
    timeout_s: float | None = None,
    max_seconds: float | None = None,
    sanitizer_tools: list[str] | None = None,
    sandbox: bool = True,
    quiet: bool = False,
    confine: bool = True,
    host_memory_mib: float | None = None,
    stdout: TextIO | None = None,
    progress: Progress | None = None,
    gpu: GpuProbe | None = None,
    main_builder: Builder | None = None,
    slot_builder: SlotBuilderFactory | None = None,
) -> Exit:
    """Grade every submission of batch_dir into out_dir (see the module docstring)."""
    from .report import StudentOutcome, write_batch_reports

    stdout = stdout or sys.stdout
    progress = progress or Progress(quiet=quiet)
    batch_dir, out_dir = Path(batch_dir), Path(out_dir)
    try:
        labs = select(discover(root), selectors)
    except LabError as err:
        raise GraderError(str(err), Exit.USAGE) from None
    except FileNotFoundError:
        raise GraderError(f"{root}/labs: no such directory (is --root right?)", Exit.USAGE) from None
    if out_dir.resolve() == batch_dir.resolve():
        raise GraderError("--out must not be the folder of submissions", Exit.USAGE)
    students, ignored = find_students(batch_dir, exclude=out_dir)
    if not students:
        raise GraderError(
            f"{batch_dir}: no submissions (one folder or .zip/.tar.gz archive per student)", Exit.USAGE
        )
    if jobs is not None and jobs < 1:
        raise GraderError("-j must be at least 1", Exit.USAGE)
    gpu = probe_gpu() if gpu is None else gpu
    preset = choose_preset(gpu, preset)
    cores = os.cpu_count() or 1
    workers = max(1, min(jobs or DEFAULT_WORKERS, cores))
    grader = BatchGrader(
        root,
        labs,
        gpu,
        preset,
        workers=workers,
        timeout_s=timeout_s,
        max_seconds=max_seconds,
        sanitizer_tools=sanitizer_tools,
        sandbox=sandbox,
        confine=confine,
        host_memory_mib=host_memory_mib,
        main_builder=main_builder,
        slot_builder=slot_builder,
        progress=progress,
    )
    out_dir.mkdir(parents=True, exist_ok=True)
    lab_names = [lab.name for lab in labs]
    progress.note(gpu.brief())
    if ignored:
        progress.note(
            f"ignored (not a folder or an archive): {', '.join(ignored[:10])}"
            + (" ..." if len(ignored) > 10 else "")
        )

    # Who needs grading: a changed (or new) submission, or every one with --force.
    outcomes: dict[str, StudentOutcome] = {}
    todo: list[Student] = []
    kept = broken = 0
    tally = _Tally(total=len(students), to_grade=0)
    for student in students:
        student_dir = out_dir / student.id
        try:
            fp = grader.fingerprint_of(student)
        except StagingError as err:
            clear_reports(student_dir)
            _log(student_dir, f"{now_iso()} {student.path}: error: {err}")
            outcomes[student.id] = StudentOutcome(student.id, None, error=str(err), report_dir=student.id)
            broken += 1
            tally.done += 1
            progress.fail(f"[{tally.done}/{tally.total}] {student.id}: broken: {err}")
            continue
        prior = None if force else load_prior(student_dir)
        if prior is not None and prior[0].get("fingerprint") == fp and prior[0].get("labs") == lab_names:
            state, results = prior
            outcomes[student.id] = StudentOutcome(
                student.id,
                results,
                error=str(state.get("note", "")),
                report_dir=student.id,
                seconds=float(state.get("seconds", 0.0)),
            )
            kept += 1
            tally.done += 1
            progress.ok(
                f"[{tally.done}/{tally.total}] {student.id}: {_score(results)}, unchanged since the last batch (kept)"
            )
            continue
        todo.append(student)
    tally.to_grade = len(todo)
    progress.note(
        f"batch: {len(students)} student(s): {len(todo)} to grade, {kept} unchanged, {broken} broken; "
        f"labs {', '.join(lab_names)}; {min(workers, max(1, len(todo)))} build slot(s), test runs one at a time"
    )

    interrupted = False
    paths: dict[str, Path] = {}
    prepared = 0.0
    started = time.monotonic()
    try:
        if todo:
            grader.lock_slots()
            grader.prepare(out_dir, force=force)
            prepared = time.monotonic() - started
            slots = min(workers, len(todo))
            free: queue.Queue[int] = queue.Queue()
            for w in range(slots):
                free.put(w)
            tally.started = time.monotonic()
            with ThreadPoolExecutor(max_workers=slots, thread_name_prefix="cudalab-batch") as pool:
                pending: dict[Future, Student] = {
                    pool.submit(_grade_one, grader, s, out_dir, free): s for s in todo
                }
                try:
                    while pending:
                        done, _ = wait(pending, return_when=FIRST_COMPLETED)
                        for fut in done:
                            student = pending.pop(fut)
                            outcome, graded = fut.result()
                            outcomes[student.id] = outcome
                            tally.done += 1
                            tally.graded += 1
                            eta = format_eta(tally.eta()) if tally.graded < tally.to_grade else "00:00"
                            timing = f"build {graded.build_s:.1f} s, run {graded.run_s:.1f} s"
                            if outcome.results is None:
                                progress.fail(
                                    f"[{tally.done}/{tally.total}] {student.id}: broken: {outcome.error}; ETA {eta}"
                                )
                            else:
                                progress.ok(
                                    f"[{tally.done}/{tally.total}] {student.id}: {_score(outcome.results)} "
                                    f"({timing}), ETA {eta}"
                                )
                except KeyboardInterrupt:
                    interrupted = True
                    for fut in pending:
                        fut.cancel()
                    raise
    finally:
        grader.unlock_slots()
        ordered = [outcomes[s.id] for s in students if s.id in outcomes]
        if ordered:
            title = f"cudalab class summary: {batch_dir.resolve().name}"
            paths = write_batch_reports(ordered, out_dir, title=title)
            if interrupted:
                stdout.write(
                    f"interrupted: {len(ordered)} of {len(students)} student(s) in {paths['html']}; "
                    "run the same command again to continue\n"
                )
    elapsed = time.monotonic() - started
    graded_outcomes = [o for o in ordered if o.results is not None]
    from .report._format import fmt_points

    mean = (sum(o.results.score for o in graded_outcomes) / len(graded_outcomes)) if graded_outcomes else 0.0
    broken_now = sum(1 for o in ordered if o.results is None)
    per = f" (pristine build {prepared:.1f} s), {elapsed / len(todo):.1f} s per submission" if todo else ""
    stdout.write(
        f"batch: {len(ordered)} student(s): {len(todo)} graded now, {kept} kept, {broken_now} broken; "
        f"mean {fmt_points(mean)}; {format_eta(elapsed)} elapsed{per}\n"
        f"class summary: {paths['html']}\ngradebook: {paths['csv']}\n"
    )
    return Exit.OK


# The `batch` verb (cli.py): run_batch with the test seams (builders, probe) left at their defaults.
cmd_batch = run_batch


__all__ = [
    "BatchGrader",
    "Prebuilt",
    "ReferenceTimings",
    "Student",
    "cmd_batch",
    "find_students",
    "fingerprint",
    "format_eta",
    "load_prior",
    "run_batch",
]
