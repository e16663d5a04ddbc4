"""The machinery of a batch (grader/course/batch/runner.py): the pristine build, the build slots, the GPU pool, and the
grade of one student in a slot.

- The pristine tree (reference binaries, the GPU health probe) is built once in build/<preset>, before
  any student.
- Each worker slot w has a build directory of its own, build/<preset>-batch-<w>, configured once with
  CUDALAB_SUBMISSION_DIR = build/<preset>-batch-<w>-staging. A student's files are staged there (the
  skeleton stands in for a missing file, so what CMake saw at configure time stays true); the slot's
  old student objects and binaries are deleted, and only the student's file compiles and links: the
  test objects of the slot are reused. Slots build side by side (a thread each).
- Test runs are serialized per GPU (clean timings) by the GPU pool (grader/course/batch/gpus.py): without
  --gpus one GPU, unpinned; with --gpus each chosen GPU, and a student's whole grade runs on the one
  GPU it took, pinned with CUDA_VISIBLE_DEVICES. The reference's timings are measured once per lab and
  GPU (grader/course/batch/reference.py), on first use there.
- A student's grade is the grade's own two halves (grader/grade/): prepare (build and inspect, in the
  slot) and finish (run, sanitize, score, under the GPU's lock), with the pristine reference builds
  handed to prepare as they are.
- A compile check (compile_only) builds and runs the static checks as usual, then starts the test
  binaries with no GPU visible (CUDA_VISIBLE_DEVICES=""), so every test says "no CUDA device" at once
  and nothing of the student's code is timed or graded.
- stop (a threading.Event) is set when the batch is interrupted: a student whose grade is under way
  then raises Interrupted before the next step, and the batch records nothing of them.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from grader.build.cmake import Builder, CMakeBuilder
from grader.build.stages import Builders
from grader.build.targets import binary_sets, build_targets
from grader.course.batch.gpus import GpuPool
from grader.course.batch.reference import ReferenceTimings, reference_file
from grader.course.batch.students import Student, fingerprint, stage
from grader.execute.health import PROBE_TARGET
from grader.grade.options import RunOptions
from grader.grade.pipeline import assemble, grade_labs, open_grade
from grader.grade.prepare import prepare
from grader.host.environment import GpuDevice, GpuProbe
from grader.intake.staging import StagedSubmission, StagingError
from grader.model.errors import Exit, GraderError
from grader.model.labs import Lab, LabError, discover
from grader.model.progress import Progress
from grader.model.results import BuildResult, Results

SlotBuilderFactory = Callable[[int, Path], Builder]  # (slot, staging root) -> the slot's builder
COMPILE_ONLY_REASON = "compile check only: the tests were not run"
HIDE_GPU = {"CUDA_VISIBLE_DEVICES": ""}  # the test binaries of a compile check see no GPU


class Interrupted(Exception):
    """The batch was interrupted while this student was being graded: nothing of them is recorded."""


@dataclass
class Graded:
    results: Results | None
    fingerprint: str = ""
    error: str = ""  # why there are no results, or a note about the results
    build_s: float = 0.0
    run_s: float = 0.0
    gpu: GpuDevice | None = None  # the GPU the runs were pinned to (--gpus)


class BatchGrader:
    """The pristine build, the build slots and the GPU pool of one batch. main_builder and slot_builder
    replace the CMake builders (the tests use fake ones). gpus: the GPUs of --gpus (None: the one GPU
    the runtime picks, unpinned)."""

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
        compile_only: bool = False,
        perf: bool = True,
        gpu_runs: int = 1,
        sanitize_failing: bool = True,
        gpus: list[GpuDevice] | None = None,
        stop_at_first_failure: bool = False,
    ) -> None:
        self.root = root
        self.work_dir = work_dir or root / "build"  # where the slots' build and staging folders live
        self.labs = labs
        self.compile_only = compile_only
        self.perf = perf  # False: correctness only (the mutation gate)
        self.gpu = GpuProbe(False, reason=COMPILE_ONLY_REASON) if compile_only else gpu
        self.stop = threading.Event()  # set when the batch is interrupted
        self.discarded: list[str] = []  # the students whose grade the interrupt cut short
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
        # Test runs at a time on the GPU: one wherever a time is scored (perf tests share nothing); a
        # correctness-only batch (the mutation gate) may run several side by side.
        self.gpu_runs = 1 if perf else max(1, gpu_runs)
        # A compile check runs nothing on a GPU: --gpus means nothing there.
        self.devices: list[GpuDevice] | None = list(gpus) if gpus and not compile_only else None
        self.pool = GpuPool(list(self.devices) if self.devices else [None], self.gpu_runs)
        self.sanitize_failing = sanitize_failing
        self.stop_at_first_failure = stop_at_first_failure
        self.pristine: dict[str, BuildResult] = {}
        self.references: ReferenceTimings | None = None  # without --gpus; with it, per GPU: references_for()
        self._references: dict[int, ReferenceTimings] = {}
        self._reference_setup: tuple[dict[str, float], Path | None, bool] | None = None
        self._references_lock = threading.Lock()
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
        from grader.build.submission import SubmissionBuilder

        pristine = getattr(self.main, "build_dir", None)  # its test objects are built before any slot's
        return SubmissionBuilder(
            self.root, self.preset, self.build_jobs, submission_dir=staging, directory=self.slot_dir(slot),
            reuse_from=Path(pristine) if pristine is not None else None,
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
        self._reference_setup = (timeouts, out_dir, force)
        if self.devices is None:
            self.references = self._new_references(None)

    def _new_references(self, device: GpuDevice | None) -> ReferenceTimings:
        timeouts, out_dir, force = self._reference_setup or ({}, None, False)
        return ReferenceTimings(
            self.main.bin_dir,
            timeouts,
            device.probe(self.gpu) if device is not None and self.gpu.available else self.gpu,
            out_dir / reference_file(device.index if device else None) if out_dir is not None else None,
            force=force,
            progress=self.progress,
            env=device.env if device is not None else None,
            device=device.label if device is not None else "",
        )

    def references_for(self, device: GpuDevice | None) -> ReferenceTimings | None:
        """The reference's timings on this GPU, made on its first student (timed there, under its lock)."""
        if device is None or self._reference_setup is None:
            return self.references
        with self._references_lock:
            if device.index not in self._references:
                self._references[device.index] = self._new_references(device)
            return self._references[device.index]

    def time_references_ahead(self) -> None:
        """Each GPU of the batch times the references now, in a thread holding that GPU, while the slots
        build the first students: otherwise every GPU idles through its first student's build and then
        times them inside that student's grade. Nothing to time in a correctness-only batch or without a
        GPU."""
        if not self.perf or not self.gpu.available or self._reference_setup is None:
            return

        def time_on(device: GpuDevice | None) -> None:
            try:
                with self.pool.take(device):
                    references = self.references_for(device)
                    for target in list(references or ()):
                        if self.stop.is_set():
                            return
                        references.get(target)  # type: ignore[union-attr]
            except Exception as err:  # noqa: BLE001 - the first student's grade times them instead
                self.progress.fail(f"timing the references ahead failed ({type(err).__name__}: {err}); "
                                   "each GPU's first student times them")

        for device in self.devices or [None]:  # daemon threads: nothing waits for them but the GPU they hold
            threading.Thread(target=time_on, args=(device,), daemon=True,
                             name=f"cudalab-references-{device.index if device else 'gpu'}").start()

    @property
    def reference_timings(self) -> list[ReferenceTimings]:
        """Every reference timing of this batch: the one without --gpus, or one per GPU used."""
        return [self.references] if self.references is not None else list(self._references.values())

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
        from grader.build.compiledb import CompileDb

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
        from grader.build.compiledb import CompileDb

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

    def _go_on(self) -> None:
        """Raise Interrupted once the batch was interrupted: no next step for this student."""
        if self.stop.is_set():
            raise Interrupted("the batch was interrupted")

    def grade(self, student: Student, slot: int, log: TextIO) -> Graded:
        """Stage, build in the slot (in parallel with other slots), then run on a GPU of the pool, all the
        student's labs on that one. Raises Interrupted when the batch is interrupted before the runs start."""
        self._go_on()
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
        builders = Builders(main=self.main, code=builder, mode="student", jobs=self.build_jobs, main_built=True)
        prepared = prepare(self.labs, builders, staged=staged, checks=self.real, progress=progress,
                           references=self.pristine)
        build_s = time.monotonic() - start
        self._go_on()  # an interrupted build is no compile error
        with self.pool.take() as device:
            self._go_on()
            if device is not None:
                progress.heading(f"running {student.id} on {device.label}")
            start = time.monotonic()
            gpu = device.probe(self.gpu) if device is not None and self.gpu.available else self.gpu
            options = self._run_options(student, staged, builder, device)
            grade = open_grade(self.root, self.labs, builders, gpu, options, progress)
            results = assemble(grade, grade_labs(grade, self.labs, options, progress, prepared), options)
            run_s = time.monotonic() - start
        if device is not None:
            results.run.gpu.update(device.facts())  # after the binaries' own facts: the report names its GPU
        if self.compile_only:
            results.run.gpu_available, results.run.gpu_reason = False, COMPILE_ONLY_REASON
            results.run.notes.insert(0, COMPILE_ONLY_REASON)
        return Graded(results, fp, note, build_s, run_s, gpu=device)

    def _run_options(self, student: Student, staged: StagedSubmission, builder: Builder,
                     device: GpuDevice | None) -> RunOptions:
        """The runs of one student's grade; pinned to device (every test binary, the health probe)."""
        env = dict(HIDE_GPU) if self.compile_only else (device.env if device is not None else {})
        return RunOptions(
            mode="student",
            build=True,
            reference=True,
            timeout_s=self.timeout_s,
            submission=str(student.path),
            reference_timings=self.references_for(device),
            staged=staged,
            student_builder=builder,
            max_seconds=self.max_seconds,
            sanitizer_tools=self.sanitizer_tools,
            sandbox="auto" if self.sandbox else "off",
            checks=self.real,
            health=self.real and self.gpu.available,
            confine=self.confine,
            host_memory_mib=self.host_memory_mib,
            env=env,
            perf=self.perf,
            sanitize_failing=self.sanitize_failing,
            stop_at_first_failure=self.stop_at_first_failure,
        )
