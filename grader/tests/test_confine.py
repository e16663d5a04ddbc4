"""The supervisor of untrusted runs (grader/isolate/confine.py, through grader/isolate/process.py): every process a
program starts dies with it (setsid and double forks included), writes outside its private directory
are refused where the kernel has Landlock, a host-memory hog and a hang are stopped and said to be, and
a report reaches the grader through a pipe. The programs are stand-ins (Python scripts), no GPU."""

from __future__ import annotations

import os
import sys
import textwrap
import time
from pathlib import Path

import pytest

from grader.isolate import confine
from grader.isolate import process

NAMESPACES_NOTE = "this machine lets the supervisor make PID namespaces"


def _script(path: Path, body: str) -> Path:
    path.write_text(f"#!{sys.executable}\n" + textwrap.dedent(body))
    path.chmod(0o755)
    return path


def _confinement(tmp_path: Path, program: Path, **kw) -> process.Confinement:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    return process.Confinement(work, executable=(str(program.parent), sys.base_prefix, sys.prefix), **kw)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1][0] not in "ZX"
    except (OSError, IndexError):
        return False


ESCAPER = """
import os, sys, time
pid_file = sys.argv[1]
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:          # a grandchild in a session of its own: the classic escape
        with open(pid_file, "w") as f:
            f.write(str(os.getpid()))  # the PID in the run's own namespace; also report the host one
        time.sleep(60)
        os._exit(0)
    os._exit(0)
time.sleep(0.5)
print("parent done", flush=True)
"""


@pytest.mark.parametrize("namespaces", [True, False], ids=["pid-namespace", "subreaper"])
def test_every_process_dies_with_the_program(tmp_path: Path, namespaces: bool) -> None:
    marker = tmp_path / "work" / "escaper.pid"
    program = _script(tmp_path / "escaper", ESCAPER.replace("f.write(str(os.getpid()))",
                                                           "f.write(open('/proc/self/stat').read().split()[0])"))
    before = {int(p) for p in os.listdir("/proc") if p.isdigit()}
    res = process.run([program, str(marker)], 20, confine=_confinement(tmp_path, program, namespaces=namespaces))
    assert res.returncode == 0 and "parent done" in res.stdout, res.output
    assert res.confinement is not None
    if namespaces and res.confinement["isolation"] == "subreaper":
        pytest.skip("no PID namespace here (not root, no user namespaces): the subreaper case covers it")
    time.sleep(0.3)
    # Whatever the escaper started is gone: no new process of ours that sleeps on.
    survivors = [p for p in (int(x) for x in os.listdir("/proc") if x.isdigit()) if p not in before and _alive(p)
                 and "escaper" in Path(f"/proc/{p}/cmdline").read_text(errors="replace")]
    assert survivors == []


def test_writes_outside_the_private_directory_are_refused(tmp_path: Path) -> None:
    if confine.landlock_abi() < 1:
        pytest.skip("this kernel has no Landlock: only bubblewrap (where installed) keeps writes in")
    outside = tmp_path / "outside.txt"
    program = _script(tmp_path / "writer", f"""
import os
for path in ({str(outside)!r}, os.path.join(os.environ["TMPDIR"], "inside.txt")):
    try:
        open(path, "w").write("x")
        print("wrote", path)
    except OSError as err:
        print("refused", path, err.strerror)
""")
    work = tmp_path / "work"
    res = process.run([program], 20, env={**os.environ, "TMPDIR": str(work)}, confine=_confinement(tmp_path, program))
    assert f"refused {outside}" in res.stdout and not outside.exists(), res.output
    assert "wrote" in res.stdout and (work / "inside.txt").exists()
    assert res.confinement["landlock"].startswith("abi")


def test_a_memory_hog_is_stopped_and_said_to_be(tmp_path: Path) -> None:
    program = _script(tmp_path / "hog", """
import time
hoard = []
for _ in range(200):
    hoard.append(bytearray(20 << 20))
    time.sleep(0.005)
time.sleep(5)
""")
    res = process.run([program], 30, confine=_confinement(tmp_path, program, memory_mib=300))
    assert res.out_of_memory and res.killed_for == "memory" and not res.timed_out, res.confinement
    assert res.confinement["peak_rss_mib"] > 300


def test_the_supervisor_keeps_the_deadline(tmp_path: Path) -> None:
    program = _script(tmp_path / "sleeper", "import time\ntime.sleep(60)\n")
    start = time.monotonic()
    res = process.run([program], 1.0, confine=_confinement(tmp_path, program))
    assert res.timed_out and res.returncode is None and time.monotonic() - start < 10


def test_the_report_channel_and_the_exit_status(tmp_path: Path) -> None:
    program = _script(tmp_path / "reporter", """
import os, signal, sys
with open(sys.argv[1], "w") as f:
    f.write('{"hello": 1}')
sys.stdout.write("out\\n")
if sys.argv[2] == "segv":
    os.kill(os.getpid(), signal.SIGSEGV)
sys.exit(int(sys.argv[2]))
""")
    channel = process.Channel()
    res = process.run([program, channel.path, "3"], 20, confine=_confinement(tmp_path, program), channels=[channel])
    assert res.returncode == 3 and channel.data == b'{"hello": 1}' and res.stdout == "out\n"
    channel = process.Channel()
    res = process.run([program, channel.path, "segv"], 20, confine=_confinement(tmp_path, program), channels=[channel])
    assert res.signal_name == "SIGSEGV" and channel.data == b'{"hello": 1}'


def test_a_channel_keeps_at_most_its_limit(tmp_path: Path) -> None:
    program = _script(tmp_path / "flood", """
import sys
with open(sys.argv[1], "w") as f:
    for _ in range(64):
        f.write("x" * 65536)
""")
    channel = process.Channel(limit=100_000)
    process.run([program, channel.path], 20, confine=_confinement(tmp_path, program), channels=[channel])
    assert len(channel.data) == 100_000 and channel.overflow
