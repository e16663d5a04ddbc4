"""`batch`: students from a folder, resume by fingerprint, broken submissions, parallel builds with
serialized runs, the reference timed once (fake builds and fake test binaries: no GPU, no nvcc). The last
test builds lab 01 for real and is opt-in (CUDALAB_SLOW_TESTS=1)."""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import tarfile
import threading
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from grader.course.batch import runner as batch_mod
from grader.course.batch import slots as batch_slots
from grader.cli import args as cli
from grader.execute import runs
from grader.course.batch.runner import (
    BatchGrader,
    Student,
    find_students,
    fingerprint,
    format_eta,
    run_batch,
)
from grader.build.cmake import failed_build
from grader.host.environment import GpuProbe
from grader.model.errors import Exit, GraderError
from grader.model.labs import discover
from grader.model.progress import Progress
from grader.model.results import BuildResult, Results
from grader.intake.staging import stage_submission

from grader.tests.conftest import NO_GPU_REASON, NO_GPU_ROOT, FakeBuilder, add_tests, make_binary, spec
from grader.tests.test_cmake import NVCC_ERROR

GPU = GpuProbe(True, "NVIDIA Fake", "9.0")
SOLUTION = "int add(int a, int b) { return a + b; }\n"
SLOW = "int add(int a, int b) { return a + b; }  // slow\n"
BROKEN = "int add(int a, int b) { return a + b }  // COMPILE ERROR\n"


def gpu_aware_binary(path: Path, tests: list[dict], machine_gpu: bool) -> None:
    """A fake test binary that, like the real ones, sees no GPU on a machine without one or when
    CUDA_VISIBLE_DEVICES is set and empty: then every test skips with "no CUDA device"."""
    skip = spec([{"name": t["name"], "do": "skip", "reason": NO_GPU_REASON} for t in tests], root=NO_GPU_ROOT)
    if not machine_gpu:
        make_binary(path, skip)
        return
    make_binary(path.with_name(path.name + ".gpu"), spec(tests))
    make_binary(path.with_name(path.name + ".nogpu"), skip)
    path.write_text(
        '#!/bin/sh\nif [ "${CUDA_VISIBLE_DEVICES+set}" = set ] && [ -z "$CUDA_VISIBLE_DEVICES" ]; then\n'
        f'  exec "{path}.nogpu" "$@"\nfi\nexec "{path}.gpu" "$@"\n'
    )
    path.chmod(0o755)


class FakeSlot:
    """A slot's builder: 'compiles' the staged add.cu into a fake test binary whose behaviour follows
    the file's text (the skeleton fails a test, 'COMPILE ERROR' does not build, 'slow' is slower).
    machine_gpu: whether the fake machine has a GPU; on_build(text): called before each build (the
    interruption tests)."""

    active = 0
    most = 0
    lock = threading.Lock()
    machine_gpu = True
    on_build: Callable[[str], BuildResult | None] | None = None

    def __init__(self, root: Path, slot: int, staging: Path, log: list[tuple[int, str]]) -> None:
        self.bin_dir = root / f"slot{slot}" / "bin"
        self.slot = slot
        self.staging = staging
        self.log = log
        self.configures = 0

    def configure(self, labs: list[str]) -> None:
        self.configures += 1

    def build(self, target: str) -> BuildResult:
        with FakeSlot.lock:
            FakeSlot.active += 1
            FakeSlot.most = max(FakeSlot.most, FakeSlot.active)
        try:
            time.sleep(0.05)
            assert not (self.bin_dir / target).exists(), "the previous student's binary was not removed"
            text = (self.staging / "labs" / "01-add" / "add.cu").read_text()
            self.log.append((self.slot, text))
            if FakeSlot.on_build is not None and (killed := FakeSlot.on_build(text)) is not None:
                return killed
            if "COMPILE ERROR" in text:
                return failed_build(target, NVCC_ERROR, 0.1)
            ms = 2.0 if "slow" in text else 1.0
            tests = add_tests(fail_small="return a + b" not in text, impl_ms=ms)
            gpu_aware_binary(self.bin_dir / target, tests, FakeSlot.machine_gpu)
            return BuildResult(target=target, ok=True, seconds=0.1)
        finally:
            with FakeSlot.lock:
                FakeSlot.active -= 1


@pytest.fixture
def fakes(lab_root: Path, monkeypatch):
    """The fake machine: the pristine builder, the slot factory, and counters."""
    FakeSlot.active = FakeSlot.most = 0
    FakeSlot.machine_gpu, FakeSlot.on_build = True, None
    builds: list[tuple[int, str]] = []
    slots: dict[int, FakeSlot] = {}

    def slot_builder(slot: int, staging: Path) -> FakeSlot:
        slots[slot] = FakeSlot(lab_root / "build", slot, staging, builds)
        return slots[slot]

    main = FakeBuilder(lab_root / "build" / "pristine", {"lab01_solution": spec(add_tests())})
    reference_runs: list[str] = []
    real_run_binary = runs.run_binary

    def counting_run_binary(binary, *args, **kwargs):
        if Path(binary).name == "lab01_solution":
            reference_runs.append(kwargs.get("gtest_filter") or "")
        return real_run_binary(binary, *args, **kwargs)

    monkeypatch.setattr(runs, "run_binary", counting_run_binary)
    monkeypatch.setattr(batch_mod.os, "cpu_count", lambda: 4)
    return {
        "main": main,
        "slot_builder": slot_builder,
        "builds": builds,
        "slots": slots,
        "reference_runs": reference_runs,
    }


def class_dir(tmp_path: Path) -> Path:
    """ada: a repository; bob.zip: the skeleton in a GitHub-style folder; cat.tar.gz: a compile error;
    dan: the file alone, slower; eve.zip: not an archive at all; plus files batch must ignore."""
    d = tmp_path / "class"
    (d / "ada" / "labs" / "01-add").mkdir(parents=True)
    (d / "ada" / "labs" / "01-add" / "add.cu").write_text(SOLUTION)
    (d / "ada" / ".git").mkdir()
    with zipfile.ZipFile(d / "bob.zip", "w") as zf:
        zf.writestr("bob-main/labs/01-add/add.cu", "int add(int a, int b) { return 0; }\n")
    with tarfile.open(d / "cat.tar.gz", "w:gz") as tf:
        data = BROKEN.encode()
        info = tarfile.TarInfo("labs/01-add/add.cu")
        info.size = len(data)
        tf.addfile(info, io.BytesIO(data))
    (d / "dan").mkdir()
    (d / "dan" / "add.cu").write_text(SLOW)
    (d / "eve.zip").write_text("this is not a zip file")
    (d / "roster.txt").write_text("ignored")
    (d / ".DS_Store").write_text("ignored")
    return d


def batch(lab_root: Path, fakes: dict, tmp_path: Path, *extra_selectors: str, **kwargs):
    err = io.StringIO()
    out = io.StringIO()
    code = run_batch(
        lab_root,
        tmp_path / "class",
        tmp_path / "out",
        list(extra_selectors),
        main_builder=fakes["main"],
        slot_builder=fakes["slot_builder"],
        sandbox=False,
        stdout=out,
        progress=Progress(stream=err),
        **{"gpu": GPU, **kwargs},
    )
    return code, out.getvalue(), err.getvalue()


def gradebook(out: Path) -> dict[str, dict[str, str]]:
    with open(out / "gradebook.csv", newline="") as f:
        return {row["student"]: row for row in csv.DictReader(f)}


# --- small pieces --------------------------------------------------------------------------------------


def test_format_eta() -> None:
    assert format_eta(0) == "00:00" and format_eta(59.6) == "01:00" and format_eta(754) == "12:34"
    assert format_eta(3600 + 62) == "1:01:02"
    assert format_eta(None) == "--:--" and format_eta(float("nan")) == "--:--" and format_eta(-1) == "--:--"


def test_find_students(tmp_path: Path) -> None:
    d = class_dir(tmp_path)
    (d / "out").mkdir()
    students, ignored = find_students(d, exclude=d / "out")
    assert [s.id for s in students] == ["ada", "bob", "cat", "dan", "eve"]
    assert students[2].path == d / "cat.tar.gz" and ignored == ["roster.txt"]
    (d / "ada.zip").write_text("x")
    with pytest.raises(GraderError, match="both student 'ada'") as err:
        find_students(d)
    assert err.value.code is Exit.USAGE
    with pytest.raises(GraderError, match="no such directory"):
        find_students(tmp_path / "nope")


def test_fingerprint_follows_the_files_and_the_selection(lab_root: Path, tmp_path: Path) -> None:
    labs = discover(lab_root)
    sub = tmp_path / "s"
    (sub / "labs" / "01-add").mkdir(parents=True)
    (sub / "labs" / "01-add" / "add.cu").write_text(SOLUTION)
    (sub / "labs" / "01-add" / "notes.md").write_text("a")

    def fp() -> str:
        return fingerprint(stage_submission(labs, sub, tmp_path / "st"), labs)

    first = fp()
    (sub / "labs" / "01-add" / "notes.md").write_text("b")  # not a student file: no change
    assert fp() == first
    (sub / "labs" / "01-add" / "add.cu").write_text(SOLUTION + "// more\n")
    assert fp() != first
    (sub / "labs" / "01-add" / "add.cu").unlink()
    missing = fp()
    assert missing not in (first,)
    (sub / "labs" / "01-add" / "add.cu").symlink_to("/etc/passwd")  # refused: its reason counts
    assert fp() not in (first, missing)
    assert fingerprint(stage_submission([], sub, tmp_path / "st"), []) != missing  # the selection counts


# --- the batch end to end ---------------------------------------------------------------------------------


def test_batch_grades_every_student_and_resumes(lab_root: Path, tmp_path: Path, fakes: dict) -> None:
    class_dir(tmp_path)
    out = tmp_path / "out"
    code, stdout, progress = batch(lab_root, fakes, tmp_path, "1", jobs=2)
    assert code is Exit.OK, progress

    # Every student has a row, the broken one too; scores follow their files.
    book = gradebook(out)
    assert sorted(book) == ["ada", "bob", "cat", "dan", "eve"]
    assert book["ada"]["total"] == "100" and book["ada"]["status"] == "graded"
    assert float(book["bob"]["total"]) < 100  # the skeleton fails a test
    assert (
        book["cat"]["status"] == "graded"
        and book["cat"]["total"] == "0"
        and "compile error" in book["cat"]["notes"]
    )
    assert float(book["dan"]["total"]) < 100  # correct, but half as fast as the reference: fewer speed points
    assert book["dan"]["01-add:small"] == "40"
    assert book["eve"]["status"] == "broken" and "not a readable zip" in book["eve"]["notes"]
    assert book["eve"]["total"] == ""
    assert (out / "class-summary.html").is_file() and "eve" in (out / "class-summary.html").read_text()
    for who in ("ada", "bob", "cat", "dan"):
        for name in ("results.json", "report.html", "grades.csv", ".batch.json", "grade.log"):
            assert (out / who / name).is_file(), (who, name)
    assert Results.load(out / "ada" / "results.json").run.submission == str(tmp_path / "class" / "ada")
    assert "error: eve.zip is not a readable zip" in (out / "eve" / "grade.log").read_text()

    # Progress: counts and an ETA; stdout: the summary and where the reports are.
    assert (
        "[5/5]" in progress
        and "ETA" in progress
        and "ignored (not a folder or an archive): roster.txt" in progress
    )
    assert "4 processed now, 0 kept, 1 broken" in stdout and "gradebook.csv" in stdout

    # Parallel builds in 2 slots; each slot configured once; the reference timed once for the batch.
    assert {slot for slot, _ in fakes["builds"]} == {0, 1} and FakeSlot.most == 2
    assert all(s.configures == 1 for s in fakes["slots"].values())
    assert fakes["reference_runs"] == [gtest_perf_filter()]
    saved = json.loads((out / batch_mod.REFERENCE_FILE).read_text())
    assert saved["gpu"] == "NVIDIA Fake" and "lab01_solution" in saved["targets"]

    # Resume: nothing changed, nothing is built or run again.
    before = len(fakes["builds"])
    code, stdout, progress = batch(lab_root, fakes, tmp_path, "1", jobs=2)
    assert code is Exit.OK and len(fakes["builds"]) == before
    assert "0 processed now, 4 kept, 1 broken" in stdout and "unchanged since the last batch" in progress
    assert gradebook(out)["ada"]["total"] == "100"

    # One student changes their file: only they are graded; the reference timing comes from the cache.
    (tmp_path / "class" / "dan" / "add.cu").write_text(SOLUTION)
    code, stdout, _ = batch(lab_root, fakes, tmp_path, "1", jobs=2)
    assert "1 processed now, 3 kept" in stdout and len(fakes["builds"]) == before + 1
    assert gradebook(out)["dan"]["total"] == "100"
    assert fakes["reference_runs"] == [gtest_perf_filter()]

    # A submission replaced by a broken archive loses its old reports; --force grades everyone again.
    shutil.rmtree(tmp_path / "class" / "ada")
    (tmp_path / "class" / "ada.zip").write_bytes(b"PK\x03\x04 truncated")
    code, stdout, _ = batch(lab_root, fakes, tmp_path, "1", force=True, jobs=2)
    assert code is Exit.OK and "3 processed now, 0 kept, 2 broken" in stdout
    assert not (out / "ada" / "results.json").exists() and gradebook(out)["ada"]["status"] == "broken"
    assert len(fakes["reference_runs"]) == 2  # --force measures the reference again


def test_runs_are_serialized(lab_root: Path, tmp_path: Path, fakes: dict, monkeypatch) -> None:
    class_dir(tmp_path)
    active = {"now": 0, "most": 0}
    real_grade_labs = batch_slots.grade_labs

    def tracking_grade_labs(*args, **kwargs):
        active["now"] += 1
        active["most"] = max(active["most"], active["now"])
        try:
            time.sleep(0.05)
            return real_grade_labs(*args, **kwargs)
        finally:
            active["now"] -= 1

    monkeypatch.setattr(batch_slots, "grade_labs", tracking_grade_labs)
    code, _, _ = batch(lab_root, fakes, tmp_path, "1", jobs=3)
    assert code is Exit.OK and active["most"] == 1 and FakeSlot.most >= 2
    # gpu_runs counts only where nothing is timed: a graded batch stays one run at a time.
    active["most"] = 0
    code, _, _ = batch(lab_root, fakes, tmp_path, "1", jobs=3, gpu_runs=3, force=True)
    assert code is Exit.OK and active["most"] == 1


def test_correctness_only_runs_share_the_gpu(lab_root: Path, tmp_path: Path, fakes: dict, monkeypatch) -> None:
    """The mutation gate (perf=False) lets gpu_runs test runs share the GPU, and no more."""
    class_dir(tmp_path)
    active = {"now": 0, "most": 0}
    real_grade_labs = batch_slots.grade_labs
    lock = threading.Lock()

    def tracking_grade_labs(*args, **kwargs):
        with lock:
            active["now"] += 1
            active["most"] = max(active["most"], active["now"])
        try:
            time.sleep(0.2)
            return real_grade_labs(*args, **kwargs)
        finally:
            with lock:
                active["now"] -= 1

    monkeypatch.setattr(batch_slots, "grade_labs", tracking_grade_labs)
    code, _, _ = batch(lab_root, fakes, tmp_path, "1", jobs=3, gpu_runs=2, perf=False)
    assert code is Exit.OK and active["most"] == 2


def test_one_bad_student_never_stops_the_batch(
    lab_root: Path, tmp_path: Path, fakes: dict, monkeypatch
) -> None:
    class_dir(tmp_path)
    real = BatchGrader.grade

    def grade(self, student: Student, slot: int, log):
        if student.id == "bob":
            raise GraderError("cmake --preset ci failed: the submission's build did not configure")
        if student.id == "dan":
            raise RuntimeError("a grader bug")
        return real(self, student, slot, log)

    monkeypatch.setattr(BatchGrader, "grade", grade)
    code, _, _ = batch(lab_root, fakes, tmp_path, "1", jobs=1)
    book = gradebook(tmp_path / "out")
    assert code is Exit.OK and book["ada"]["total"] == "100"
    assert book["bob"]["status"] == "broken" and "did not configure" in book["bob"]["notes"]
    assert book["dan"]["status"] == "broken" and "internal error" in book["dan"]["notes"]
    assert "Traceback" in (tmp_path / "out" / "dan" / "grade.log").read_text()


class CMakeLikeSlot(FakeSlot):
    """Like a CMake build folder: configure() decides once, from the files it sees, which source the
    student target compiles (compile_commands.json), and is a no-op while CMakeCache.txt exists."""

    @property
    def build_dir(self) -> Path:
        return self.bin_dir.parent

    def configure(self, labs: list[str]) -> None:
        self.configures += 1
        if (self.build_dir / "CMakeCache.txt").exists():
            return
        staged = self.staging / "labs" / "01-add" / "add.cu"
        source = staged if staged.exists() else self.staging.parent / "pristine-add.cu"
        self.build_dir.mkdir(parents=True, exist_ok=True)
        (self.build_dir / "CMakeCache.txt").write_text("")
        entry = {"directory": str(self.build_dir), "file": str(source), "output": "add.cu.o"}
        (self.build_dir / "compile_commands.json").write_text(json.dumps([entry]))


def test_a_stale_slot_configuration_is_made_again(lab_root: Path, tmp_path: Path, fakes: dict) -> None:
    """A slot configured when the staging tree lacked the lab's file (an earlier batch of other labs)
    would compile the skeleton: the batch notices and configures it afresh."""
    slots: dict[int, CMakeLikeSlot] = {}

    def slot_builder(slot: int, staging: Path) -> CMakeLikeSlot:
        slots[slot] = CMakeLikeSlot(lab_root / "build", slot, staging, fakes["builds"])
        return slots[slot]

    CMakeLikeSlot(lab_root / "build", 0, lab_root / "build" / "nowhere", []).configure(
        []
    )  # the earlier batch
    (tmp_path / "class" / "ada" / "labs" / "01-add").mkdir(parents=True)
    (tmp_path / "class" / "ada" / "labs" / "01-add" / "add.cu").write_text(SOLUTION)
    fakes["slot_builder"] = slot_builder
    code, _, _ = batch(lab_root, fakes, tmp_path, "1")
    assert code is Exit.OK and slots[0].configures == 2
    db = json.loads((slots[0].build_dir / "compile_commands.json").read_text())
    assert db[0]["file"] == str(slots[0].staging / "labs" / "01-add" / "add.cu")


def test_empty_submission_grades_the_skeleton_with_a_note(
    lab_root: Path, tmp_path: Path, fakes: dict
) -> None:
    (tmp_path / "class" / "zoe" / "labs").mkdir(parents=True)
    code, _, _ = batch(lab_root, fakes, tmp_path, "1")
    row = gradebook(tmp_path / "out")["zoe"]
    assert code is Exit.OK and row["status"] == "graded" and "skeletons were graded" in row["notes"]
    assert fakes["builds"][0][1] == (lab_root / "labs" / "01-add" / "add.cu").read_text()


def test_two_batches_of_one_preset_do_not_share_slots(lab_root: Path, tmp_path: Path, fakes: dict) -> None:
    class_dir(tmp_path)
    other = BatchGrader(lab_root, discover(lab_root), GPU, "default", main_builder=fakes["main"])
    other.lock_slots()
    try:
        with pytest.raises(GraderError, match="another batch with preset default is running"):
            batch(lab_root, fakes, tmp_path, "1", preset="default")
    finally:
        other.unlock_slots()
    assert batch(lab_root, fakes, tmp_path, "1", preset="default")[0] is Exit.OK


def test_cli_usage_errors(lab_root: Path, tmp_path: Path, capsys) -> None:
    (tmp_path / "empty").mkdir()
    assert (
        cli.main(["--root", str(lab_root), "batch", str(tmp_path / "empty"), "--out", str(tmp_path / "o")])
        == 2
    )
    assert "no submissions" in capsys.readouterr().err
    assert (
        cli.main(["--root", str(lab_root), "batch", str(tmp_path / "none"), "--out", str(tmp_path / "o")])
        == 2
    )
    with pytest.raises(SystemExit) as err:
        cli.main(["--root", str(lab_root), "batch", str(tmp_path / "empty")])  # --out is required
    assert err.value.code == 2


def gtest_perf_filter() -> str:
    from grader.execute.lab_run import PERF_FILTER

    return PERF_FILTER


# --- the real build (slow, opt-in) ------------------------------------------------------------------------


@pytest.mark.skipif(
    os.environ.get("CUDALAB_SLOW_TESTS") != "1", reason="compiles lab 01 with nvcc: set CUDALAB_SLOW_TESTS=1"
)
def test_slot_recompiles_only_the_student_object(tmp_path: Path) -> None:
    """Two students in one slot of the real CMake project: the second build compiles the student's file
    and links, nothing else (ninja's own lines say what it did)."""
    from grader.host.environment import choose_preset, probe_gpu

    root = Path(__file__).resolve().parents[2]
    labs = [lab for lab in discover(root) if lab.name.startswith("01-")]
    gpu = probe_gpu()
    grader = BatchGrader(
        root,
        labs,
        gpu,
        choose_preset(gpu),
        workers=1,
        sandbox=False,
        progress=Progress(stream=io.StringIO()),
        work_dir=tmp_path / "build",
    )
    grader.prepare(None)
    source = (root / "solutions" / labs[0].name / labs[0].student_files[0]).read_text()
    logs = []
    for i, text in enumerate((source, source + "// second student\n")):
        sub = tmp_path / f"s{i}" / "labs" / labs[0].name
        sub.mkdir(parents=True)
        (sub / labs[0].student_files[0]).write_text(text)
        graded = grader.grade(Student(f"s{i}", sub.parent.parent), 0, io.StringIO())
        assert graded.results is not None
        # The student object compiles on its own (within the compile limits), then the binaries link.
        builds = [b for b in graded.results.labs[0].builds if b.target.endswith(("_student_object", "_student"))]
        assert [b.target for b in builds] == ["lab01_student_object", "lab01_student"], builds
        assert all(b.ok for b in builds), [b.log for b in builds]
        logs.append([ln for b in builds for ln in b.log.splitlines() if "Building" in ln or "Linking" in ln])
    # Not even the first student compiled the test translation unit: the slot links the pristine build's.
    slot = grader.slot_dir(0)
    assert not list((slot / "labs" / labs[0].name / "CMakeFiles").glob("lab01_tests.dir/*.o"))
    assert (slot / "bin" / "lab01_student").is_file()
    second = logs[1]
    compiled = [ln for ln in second if "Building" in ln]
    assert compiled and all(
        "_student_object.dir/" in ln and ln.endswith(f"{labs[0].student_files[0]}.o") for ln in compiled
    ), second
    assert any("Linking" in ln for ln in second), second
