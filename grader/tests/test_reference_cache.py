"""The reference's timings kept between grades on one GPU (grader/execute/reference_cache.py): reused only
when the reference, the GPU and the libraries' times are unchanged; and a grade that reuses them."""

from __future__ import annotations

import io
import json
import os
import time
from pathlib import Path

import pytest

from grader.execute import reference_cache as rc
from grader.grade.options import RunOptions
from grader.grade.pipeline import run_labs
from grader.host.environment import GpuProbe
from grader.model.labs import discover
from grader.model.progress import Progress
from grader.model.results import Perf, PerfSeries, Results
from grader.tests.conftest import FakeBuilder, add_tests, perf_properties, spec

KEY = {"gpu_name": "NVIDIA H200", "cuda_driver_version": "13000", "host": "vm", "version": "1"}


def perf(impl_ms: float, cub_ms: float = 2.0, noise: float = 0.3, anchor: str = "cub") -> Perf:
    return Perf("GB/s", 1e9, [PerfSeries("impl", impl_ms, noise_pct=noise),
                              PerfSeries(anchor, cub_ms, noise_pct=noise)], baseline=anchor)


@pytest.fixture
def reference(tmp_path: Path) -> Path:
    path = tmp_path / "lab06_solution"
    path.write_bytes(b"\x7fELF reference")
    return path


def kept(reference: Path, tests: dict[str, Perf], ago_s: float = 60.0) -> float:
    """Store timings as a grade ago_s seconds back did; returns when this grade 'started' (now)."""
    rc.store(reference, KEY, tests, now=time.time() - ago_s)
    back = time.time() - ago_s
    os.utime(rc.cache_path(reference), (back, back))
    return time.time()


def test_a_kept_timing_is_reused_when_the_library_ran_as_fast(reference: Path) -> None:
    started = kept(reference, {"ReducePerf.SinglePass/268435456": perf(1.0, 2.0)})
    reuse = rc.load(reference, KEY, {"ReducePerf.SinglePass/268435456": perf(1.3, 2.02)}, started=started)
    assert reuse.missing == [] and reuse.timings["ReducePerf.SinglePass/268435456"].median_ms == 1.0
    assert 55 <= reuse.age_s <= 120
    note = rc.reuse_note(reuse.timings, reuse.age_s)
    assert note.startswith("the reference's timings of 1 perf test were reused from a grade 1 min ago on this GPU")
    assert "--fresh-reference" in note and "perf tests were" in rc.reuse_note(["a", "b"], 7200)


def test_a_library_that_moved_times_the_reference_again(reference: Path) -> None:
    started = kept(reference, {"T.A/1": perf(1.0, 2.0)})
    reuse = rc.load(reference, KEY, {"T.A/1": perf(1.0, 2.2)}, started=started)  # cub 10 % slower now
    assert reuse.timings == {} and reuse.missing == ["T.A/1"]
    assert reuse.why["T.A/1"] == "cub ran 10% apart from when the reference was timed"


def test_noise_widens_the_tolerance(reference: Path) -> None:
    """Two noisy runs (2 % each) may differ by 12 % before the kept timing is refused; quiet ones by 3 %."""
    started = kept(reference, {"T.A/1": perf(1.0, 2.0, noise=2.0)})
    assert rc.load(reference, KEY, {"T.A/1": perf(1.0, 2.16, noise=2.0)}, started=started).missing == []
    assert rc.load(reference, KEY, {"T.A/1": perf(1.0, 2.3, noise=2.0)}, started=started).missing == ["T.A/1"]
    assert rc.drifted(PerfSeries("cub", 2.0), PerfSeries("cub", 2.05)) is None
    assert rc.drifted(PerfSeries("cub", 2.0), PerfSeries("cub", 2.07)) == pytest.approx(0.035)


def test_a_test_without_a_library_is_always_timed(reference: Path) -> None:
    """Lab 09's 'serial' variant is the student's own code: it cannot say whether the GPU changed."""
    started = kept(reference, {"T.A/1": perf(1.0, 2.0, anchor="serial")})
    reuse = rc.load(reference, KEY, {"T.A/1": perf(1.0, 2.0, anchor="serial")}, started=started)
    assert reuse.missing == ["T.A/1"] and "no library" in reuse.why["T.A/1"]


@pytest.mark.parametrize("change, why", [
    ("binary", "the reference, the GPU or its driver changed"),
    ("driver", "the reference, the GPU or its driver changed"),
    ("old", "more than 12 hours old"),
    ("during", "written during this grade"),
    ("corrupt", "not timed on this GPU before"),
    ("other test", "not timed on this GPU before"),
])
def test_a_kept_timing_is_refused_when(reference: Path, change: str, why: str) -> None:
    name = "T.A/1"
    started = kept(reference, {name: perf(1.0)}, ago_s=13 * 3600 if change == "old" else 60)
    key = dict(KEY)
    if change == "binary":
        reference.write_bytes(b"\x7fELF rebuilt after an edit")
    elif change == "driver":
        key["cuda_driver_version"] = "13010"
    elif change == "during":
        started -= 3600  # the grade began before the cache was written: something this grade ran wrote it
    elif change == "corrupt":
        rc.cache_path(reference).write_text("{ not json")
    elif change == "other test":
        name = "T.B/1"
    reuse = rc.load(reference, key, {name: perf(1.0)}, started=started)
    assert reuse.timings == {} and why in reuse.why[name]


def test_storing_keeps_other_tests_of_the_same_key(reference: Path) -> None:
    rc.store(reference, KEY, {"T.A/1": perf(1.0)})
    rc.store(reference, KEY, {"T.B/1": perf(3.0)})
    tests = json.loads(rc.cache_path(reference).read_text())["entry"]["tests"]
    assert sorted(tests) == ["T.A/1", "T.B/1"] and tests["T.A/1"]["anchors"]["cub"]["median_ms"] == 2.0
    rc.store(reference, {**KEY, "gpu_name": "NVIDIA H100"}, {"T.C/1": perf(1.0)})
    assert sorted(json.loads(rc.cache_path(reference).read_text())["entry"]["tests"]) == ["T.C/1"]


# --- in a grade ---------------------------------------------------------------------------------------


def cub_properties(impl_ms: float, cub_ms: float = 1.0) -> dict[str, str]:
    props = {k.replace("lib", "cub"): v for k, v in perf_properties(impl_ms, cub_ms).items()}
    props["perf_variants"], props["perf_baseline"] = "impl,cub", "cub"
    return props


def cub_tests(impl_ms: float, cub_ms: float = 1.0) -> list[dict]:
    tests = add_tests()
    tests[-1]["properties"] = cub_properties(impl_ms, cub_ms)
    return tests


def grade(root: Path, builder: FakeBuilder, **options) -> Results:
    return run_labs(root, discover(root), builder, GpuProbe(True, "NVIDIA Fake", "9.0"), RunOptions(**options),
                    Progress(stream=io.StringIO()))


def test_the_next_grade_reuses_the_reference_timing(lab_root: Path, tmp_path: Path) -> None:
    log = tmp_path / "reference.log"
    builder = FakeBuilder(lab_root / "build" / "bin", {
        "lab01_student": spec(cub_tests(1.0 / 0.7)),
        "lab01_solution": spec(cub_tests(1.0), log=str(log)),
    })
    first = grade(lab_root, builder).labs[0]
    assert log.read_text().splitlines() == ["AddPerf.Fast/16777216"]  # only the perf test that scores
    assert not any("reused from a grade" in m for m in first.messages)
    time.sleep(0.01)
    second = grade(lab_root, builder).labs[0]
    assert log.read_text().splitlines() == ["AddPerf.Fast/16777216"]  # not timed again
    assert any("the reference's timings of 1 perf test were reused from a grade" in m for m in second.messages)
    assert second.score == first.score
    perf = next(t for t in second.tests if t.perf).perf
    assert perf.reference is not None and perf.reference.median_ms == 1.0
    # The library now runs 20 % slower: the GPU is not as it was, and the reference is timed again.
    builder.specs["lab01_student"] = spec(cub_tests(1.0 / 0.7, cub_ms=1.2))
    grade(lab_root, builder)
    assert log.read_text().splitlines() == ["AddPerf.Fast/16777216"] * 2
    # --fresh-reference: timed every grade.
    grade(lab_root, builder, reference_cache=False)
    assert len(log.read_text().splitlines()) == 3


def test_an_unscored_perf_test_is_not_timed_on_the_reference(tmp_path: Path) -> None:
    """The reference is timed only in the perf tests that earn points; the others compare with the library."""
    from grader.tests.conftest import LAB_TOML, write_lab

    toml = LAB_TOML.replace('"AddPerf.Fast/*"', '"AddPerf.Fast/16777216"')
    assert toml != LAB_TOML
    write_lab(tmp_path, toml=toml)
    tests = cub_tests(1.0) + [{"name": "AddPerf.Fast/1048576", "do": "pass", "properties": cub_properties(0.1)}]
    log = tmp_path / "reference.log"
    builder = FakeBuilder(tmp_path / "build" / "bin", {"lab01_student": spec(tests),
                                                       "lab01_solution": spec(tests, log=str(log))})
    lab = grade(tmp_path, builder, reference_cache=False).labs[0]
    assert log.read_text().splitlines() == ["AddPerf.Fast/16777216"]
    unscored = next(t for t in lab.tests if t.name == "AddPerf.Fast/1048576").perf
    assert unscored.reference is None and unscored.points == 0


def test_a_staged_submission_neither_reads_nor_writes_the_cache(lab_root: Path) -> None:
    options = RunOptions()
    assert options.request(discover(lab_root)[0]).reference_cache
    from grader.intake.staging import StagedSubmission

    staged = RunOptions(staged=StagedSubmission(source=lab_root, root=lab_root))
    assert not staged.request(discover(lab_root)[0]).reference_cache
    trusted = RunOptions(staged=StagedSubmission(source=lab_root, root=lab_root), reference_cache=True)
    assert trusted.request(discover(lab_root)[0]).reference_cache


def test_the_key_covers_the_lab_code_library_the_reference_loads(tmp_path: Path) -> None:
    """A release's compiled reference is a shared library: a new one leaves the executable byte for byte."""
    import shutil
    import subprocess

    if shutil.which("readelf") is None or shutil.which("cc") is None:
        pytest.skip("needs readelf and a C compiler")
    lib, bin_ = tmp_path / "lib", tmp_path / "bin"
    lib.mkdir()
    bin_.mkdir()
    (tmp_path / "code.c").write_text("int answer(void) { return 42; }\n")
    (tmp_path / "main.c").write_text("int answer(void);\nint main(void) { return answer() != 42; }\n")
    so = lib / "liblab06_solution_code.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(so), str(tmp_path / "code.c")], check=True)
    exe = bin_ / "lab06_solution"
    subprocess.run(["cc", "-o", str(exe), str(tmp_path / "main.c"), f"-L{lib}", "-llab06_solution_code",
                    "-Wl,-rpath,$ORIGIN/../lib", "-Wl,--enable-new-dtags"], check=True)
    before = rc.binary_key(exe)
    (tmp_path / "code.c").write_text("int answer(void) { return 6 * 7; }\nint unused(void) { return 1; }\n")
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(so), str(tmp_path / "code.c")], check=True)
    assert rc.binary_key(exe) != before
