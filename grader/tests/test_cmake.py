"""Build logs are classified; configure and build commands are what the presets need."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest

from grader.build.cmake import CMakeBuilder, categorize_build_log, failed_build, first_error
from grader.model.errors import Exit, GraderError
from grader.model.results import Category

NVCC_ERROR = """[1/3] Building CUDA object labs/03-vector-add/CMakeFiles/lab03_student.dir/vector_add.cu.o
FAILED: labs/03-vector-add/CMakeFiles/lab03_student.dir/vector_add.cu.o
/usr/local/cuda/bin/nvcc -forward-unknown-to-host-compiler ...
/work/main/labs/03-vector-add/vector_add.cu(22): error: identifier "i" is undefined
    if (i < n) c[i] = a[i] + b[i];
        ^

1 error detected in the compilation of "/work/main/labs/03-vector-add/vector_add.cu".
ninja: build stopped: subcommand failed.
"""

LINK_ERROR = """[2/2] Linking CXX executable bin/lab03_student
FAILED: bin/lab03_student
: && /usr/bin/g++ -O3 -DNDEBUG ... -o bin/lab03_student ...
/usr/bin/ld: labs/03-vector-add/CMakeFiles/lab03_tests.dir/test_vector_add.cu.o: in function `f()':
tmpxft_0001(.text+0x1c): undefined reference to `vector_add(float const*, float const*, float*, int)'
collect2: error: ld returned 1 exit status
ninja: build stopped: subcommand failed.
"""


def test_compile_error() -> None:
    assert categorize_build_log(NVCC_ERROR) is Category.COMPILE_ERROR
    assert first_error(NVCC_ERROR).endswith('error: identifier "i" is undefined')
    result = failed_build("lab03_student", NVCC_ERROR, 2.0)
    assert not result.ok and result.category is Category.COMPILE_ERROR
    assert result.message.startswith("compile error: ") and "identifier" in result.message
    assert "ninja: build stopped" in result.log


def test_link_error() -> None:
    assert categorize_build_log(LINK_ERROR) is Category.LINK_ERROR
    assert failed_build("lab03_student", LINK_ERROR).message == (
        "link error: undefined reference to `vector_add(float const*, float const*, float*, int)'"
    )


def test_gcc_style_error_and_unknown_target() -> None:
    assert categorize_build_log("x.cpp:3:4: error: expected ';'") is Category.COMPILE_ERROR
    assert categorize_build_log("ninja: error: unknown target 'lab99_student'") is Category.HARNESS


def test_logs_are_truncated() -> None:
    result = failed_build("t", "error: x\n" + "y" * 200_000, log_limit=10_000)
    assert len(result.log) < 11_000 and "characters left out" in result.log


def test_commands(tmp_path: Path) -> None:
    b = CMakeBuilder(tmp_path, "ci", jobs=1)
    assert b.configure_command(ninja=True) == ["cmake", "--preset", "ci", "-G", "Ninja"]
    assert b.configure_command(ninja=False) == ["cmake", "--preset", "ci"]
    assert b.build_command("lab03_student") == ["cmake", "--build", str(tmp_path / "build" / "ci"), "--target", "lab03_student", "--parallel", "1"]
    assert b.bin_dir == tmp_path / "build" / "ci" / "bin"


def _fake_cmake(bin_dir: Path, script: str) -> None:
    bin_dir.mkdir(parents=True, exist_ok=True)
    cmake = bin_dir / "cmake"
    cmake.write_text("#!/bin/sh\n" + script)
    cmake.chmod(cmake.stat().st_mode | stat.S_IXUSR)


def test_configure_runs_once_and_builds(tmp_path: Path, monkeypatch) -> None:
    log = tmp_path / "calls.log"
    _fake_cmake(tmp_path / "tools", f"""echo "$@" >> {log}
if [ "$1" = "--preset" ]; then
  mkdir -p build/$2
  for a in "$@"; do case "$a" in -DCUDALAB_LABS=*) echo "CUDALAB_LABS:STRING=${{a#-DCUDALAB_LABS=}}" > build/$2/CMakeCache.txt;; esac; done
  exit 0
fi
if [ "$4" = "bad" ]; then echo "x.cu(1): error: nope"; exit 1; fi
echo built; exit 0
""")
    monkeypatch.setenv("PATH", f"{tmp_path / 'tools'}{os.pathsep}{os.environ['PATH']}")
    root = tmp_path / "repo"
    root.mkdir()
    b = CMakeBuilder(root, "ci")
    assert b.cached_labs() is None
    b.configure(["03-vector-add"])
    assert b.cached_labs() == ["03-vector-add"]
    b.configure(["03-vector-add"])  # configured for it already: no second cmake --preset
    b.configure(["06-reduce"])  # a lab it lacks: reconfigure with both
    calls = [c for c in log.read_text().splitlines() if c.startswith("--preset")]
    ninja = ["-G", "Ninja"] if shutil.which("ninja") else []
    assert calls == [
        " ".join(["--preset", "ci", *ninja, "-DCUDALAB_LABS=03-vector-add"]),
        "--preset ci -DCUDALAB_LABS=03-vector-add;06-reduce",
    ]
    assert b.cached_labs() == ["03-vector-add", "06-reduce"]
    assert b.build("good").ok
    bad = b.build("bad")
    assert not bad.ok and bad.category is Category.COMPILE_ERROR


def test_a_build_of_every_lab_is_never_reconfigured(tmp_path: Path) -> None:
    cache = tmp_path / "build" / "ci" / "CMakeCache.txt"
    cache.parent.mkdir(parents=True)
    cache.write_text("CUDALAB_LABS:STRING=\nOTHER:BOOL=ON\n")
    b = CMakeBuilder(tmp_path, "ci")
    assert b.cached_labs() == []
    b.configure(["11-quicksort"])  # would fail if it ran cmake: there is no CMakeLists.txt here


def test_configure_failure_is_exit_3_or_4(tmp_path: Path, monkeypatch) -> None:
    _fake_cmake(tmp_path / "tools", 'echo "CMake Error: some option is wrong"; exit 1\n')
    nvcc = tmp_path / "tools" / "nvcc"
    nvcc.write_text("#!/bin/sh\n")
    nvcc.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path / 'tools'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("CUDACXX", str(nvcc))
    with pytest.raises(GraderError) as err:
        CMakeBuilder(tmp_path, "ci").configure(["03-x"])
    assert err.value.code is Exit.BUILD and "some option is wrong" in str(err.value)

    _fake_cmake(tmp_path / "tools", 'echo "No CMAKE_CUDA_COMPILER could be found."; exit 1\n')
    with pytest.raises(GraderError) as err:
        CMakeBuilder(tmp_path, "ci").configure(["03-x"])
    assert err.value.code is Exit.ENVIRONMENT and "nvcc" in str(err.value)


def test_unknown_preset_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "CMakePresets.json").write_text('{"version": 6, "configurePresets": [{"name": "ci"}, {"name": "default"}]}')
    with pytest.raises(GraderError) as err:
        CMakeBuilder(tmp_path, "nope").configure(["03-x"])
    assert err.value.code is Exit.USAGE and "presets: ci, default" in str(err.value)
    assert CMakeBuilder(tmp_path, "ci").presets() == ["ci", "default"]


def test_builds_of_one_folder_take_turns(tmp_path: Path, monkeypatch) -> None:
    """A grade prepares labs in a thread while its main thread may build the health probe in the same
    tree: the two `cmake --build` runs of one folder never overlap; another folder's may."""
    import threading
    import time as clock

    from grader.build import cmake
    from grader.isolate import process

    spans: list[tuple[str, float, float]] = []

    def fake_run(argv, timeout_s, **kwargs):
        start = clock.monotonic()
        clock.sleep(0.2)
        spans.append((argv[2], start, clock.monotonic()))
        return process.ProcessResult(argv=argv, returncode=0, stdout="", stderr="", duration_s=0.2, timed_out=False)

    monkeypatch.setattr(process, "run", fake_run)
    a, b = cmake.CMakeBuilder(tmp_path, "default"), cmake.CMakeBuilder(tmp_path, "default")
    other = cmake.CMakeBuilder(tmp_path, "ci")
    threads = [threading.Thread(target=x.run_build, args=("t",)) for x in (a, b, other)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    same = sorted((s, e) for d, s, e in spans if d.endswith("default"))
    assert len(same) == 2 and same[0][1] <= same[1][0]  # one after the other
    ci = next((s, e) for d, s, e in spans if d.endswith("ci"))
    assert ci[0] < same[0][1]  # the other folder's build ran beside the first
