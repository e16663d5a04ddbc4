"""Opening submissions: directories, archives (safely), nested folders and flat files; `grade --submission`
with an archive (fake builds, no GPU, no nvcc)."""

from __future__ import annotations

import io
import os
import stat
import tarfile
import zipfile
from pathlib import Path

import pytest

from grader.cli import args as cli
from grader.cli import commands
from grader.intake import submission
from grader.model.labs import discover
from grader.model.results import Results
from grader.intake.staging import stage_submission
from grader.intake.submission import (
    SubmissionError,
    archive_suffix,
    open_submission,
    safe_member_path,
    submission_name,
)

from grader.tests.conftest import FakeBuilder, add_tests, spec, write_lab
from grader.tests.test_cli import GPU

CODE = "int add(int a, int b) { return a + b; }\n"


def make_zip(path: Path, members: dict[str, str | bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return path


def make_tar(path: Path, members: dict[str, str | bytes], mode: str = "w:gz") -> Path:
    with tarfile.open(path, mode) as tf:
        for name, data in members.items():
            raw = data.encode() if isinstance(data, str) else data
            info = tarfile.TarInfo(name)
            info.size = len(raw)
            tf.addfile(info, io.BytesIO(raw))
    return path


def staged_text(labs, opened: Path, tmp: Path) -> str:
    staged = stage_submission(labs, opened, tmp / "staging")
    lab = staged.lab("01-add")
    assert lab is not None and lab.files == ["add.cu"], (lab.errors, lab.missing)
    return staged.path_of(labs[0], "add.cu").read_text()


def test_names() -> None:
    assert archive_suffix("ada.tar.gz") == ".tar.gz" and archive_suffix("ADA.ZIP") == ".zip"
    assert (
        archive_suffix("ada.tgz") == ".tgz"
        and archive_suffix("notes.txt") == ""
        and archive_suffix(".zip") == ""
    )
    assert submission_name("ada.lovelace.tar.gz") == "ada.lovelace" and submission_name("bob") == "bob"


def test_directory_is_used_where_it_is(lab_root: Path, tmp_path: Path) -> None:
    sub = tmp_path / "repo"
    (sub / "labs" / "01-add").mkdir(parents=True)
    (sub / "labs" / "01-add" / "add.cu").write_text(CODE)
    (sub / "README.md").write_text("mine")
    assert open_submission(sub, tmp_path / "work", discover(lab_root)) == sub
    assert not (tmp_path / "work").exists()  # nothing copied


def test_zip_with_one_top_folder_is_descended(lab_root: Path, tmp_path: Path) -> None:
    archive = make_zip(
        tmp_path / "ada.zip",
        {"ada-main/labs/01-add/add.cu": CODE, "ada-main/README.md": "x", "__MACOSX/._ada-main": "junk"},
    )
    labs = discover(lab_root)
    opened = open_submission(archive, tmp_path / "work", labs)
    assert opened.name == "ada-main" and opened.is_relative_to(tmp_path / "work")
    assert staged_text(labs, opened, tmp_path) == CODE


def test_tar_gz_with_dot_entries(lab_root: Path, tmp_path: Path) -> None:
    archive = tmp_path / "bob.tgz"
    with tarfile.open(archive, "w:gz") as tf:
        info = tarfile.TarInfo("./")
        info.type = tarfile.DIRTYPE
        tf.addfile(info)
        data = CODE.encode()
        info = tarfile.TarInfo("./01-add/add.cu")
        info.size = len(data)
        tf.addfile(info, io.BytesIO(data))
    labs = discover(lab_root)
    opened = open_submission(archive, tmp_path / "work", labs)
    assert staged_text(labs, opened, tmp_path) == CODE  # NN-slug/<file> at the top is read too
    assert stat.S_IMODE(os.stat(opened / "01-add" / "add.cu").st_mode) == 0o644


def test_flat_file_is_mapped_to_its_lab(lab_root: Path, tmp_path: Path) -> None:
    labs = discover(lab_root)
    flat = tmp_path / "flat"
    flat.mkdir()
    (flat / "add.cu").write_text(CODE)
    (flat / "notes.txt").write_text("not mine to grade")
    opened = open_submission(flat, tmp_path / "work", labs)
    assert opened == tmp_path / "work" / "flat" and staged_text(labs, opened, tmp_path) == CODE
    # ... also in an archive, and a name two labs claim is not mapped
    write_lab(lab_root, "02-again")
    labs = discover(lab_root)
    archive = make_zip(tmp_path / "c.zip", {"add.cu": CODE})
    opened = open_submission(archive, tmp_path / "work2", labs)
    assert not (opened / "labs").exists()


def test_flat_symlink_is_refused_by_staging(lab_root: Path, tmp_path: Path) -> None:
    labs = discover(lab_root)
    flat = tmp_path / "flat"
    flat.mkdir()
    (flat / "add.cu").symlink_to(lab_root / "solutions" / "01-add" / "add.cu")
    opened = open_submission(flat, tmp_path / "work", labs)
    lab = stage_submission(labs, opened, tmp_path / "staging").lab("01-add")
    assert lab is not None and lab.refused and "symbolic link" in lab.errors[0]


@pytest.mark.parametrize(
    "name,why",
    [
        ("../evil.cu", "'..'"),
        ("labs/../../evil.cu", "'..'"),
        ("/etc/evil.cu", "absolute"),
        ("C:/evil.cu", "absolute"),
        ("..\\evil.cu", "'..'"),
    ],
)
def test_zip_slip_is_refused(tmp_path: Path, name: str, why: str) -> None:
    archive = make_zip(tmp_path / "x.zip", {"ok.cu": CODE, name: "pwned"})
    with pytest.raises(SubmissionError, match=why):
        open_submission(archive, tmp_path / "work")
    assert not (tmp_path / "evil.cu").exists() and not (tmp_path / "work" / "extracted").exists()
    with pytest.raises(SubmissionError, match=why):
        open_submission(make_tar(tmp_path / "x.tar.gz", {name: "pwned"}), tmp_path / "work")


def test_links_and_devices_in_archives_are_refused(tmp_path: Path) -> None:
    for kind, what in (
        (tarfile.SYMTYPE, "symbolic link"),
        (tarfile.LNKTYPE, "hard link"),
        (tarfile.CHRTYPE, "not a regular file"),
        (tarfile.FIFOTYPE, "not a regular file"),
    ):
        archive = tmp_path / f"t{kind!r}.tar"
        with tarfile.open(archive, "w") as tf:
            info = tarfile.TarInfo("labs/01-add/add.cu")
            info.type = kind
            info.linkname = "/etc/passwd"
            tf.addfile(info)
        with pytest.raises(SubmissionError, match=what):
            open_submission(archive, tmp_path / "work")
    archive = tmp_path / "link.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        info = zipfile.ZipInfo("labs/01-add/add.cu")
        info.create_system = 3
        info.external_attr = (stat.S_IFLNK | 0o777) << 16
        zf.writestr(info, "/etc/passwd")
    with pytest.raises(SubmissionError, match="symbolic link"):
        open_submission(archive, tmp_path / "work")


def test_limits(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(submission, "MAX_MEMBERS", 5)
    many = {f"f{i}.txt": "x" for i in range(6)}
    with pytest.raises(SubmissionError, match="more than the 5"):
        open_submission(make_zip(tmp_path / "many.zip", many), tmp_path / "work")
    with pytest.raises(SubmissionError, match="more than 5 members"):
        open_submission(make_tar(tmp_path / "many.tar.gz", many), tmp_path / "work")
    monkeypatch.setattr(submission, "MAX_TOTAL_BYTES", 1000)
    big = {"a.txt": "x" * 600, "b.txt": "y" * 600}
    with pytest.raises(SubmissionError, match="MiB once extracted|more than"):
        open_submission(make_zip(tmp_path / "big.zip", big), tmp_path / "work")
    with pytest.raises(SubmissionError, match="once extracted"):
        open_submission(make_tar(tmp_path / "big.tgz", big), tmp_path / "work")
    # a zip bomb: highly compressible, declared size far over the limit
    with zipfile.ZipFile(tmp_path / "bomb.zip", "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("bomb.txt", b"\0" * 200_000)
    with pytest.raises(SubmissionError, match="once extracted"):
        open_submission(tmp_path / "bomb.zip", tmp_path / "work")


def test_unreadable_and_unknown(tmp_path: Path) -> None:
    (tmp_path / "bad.zip").write_text("not a zip")
    with pytest.raises(SubmissionError, match="not a readable zip"):
        open_submission(tmp_path / "bad.zip", tmp_path / "work")
    (tmp_path / "bad.tar.gz").write_bytes(b"\x1f\x8b garbage")
    with pytest.raises(SubmissionError, match="not a readable tar"):
        open_submission(tmp_path / "bad.tar.gz", tmp_path / "work")
    (tmp_path / "notes.txt").write_text("hi")
    with pytest.raises(SubmissionError, match="not a directory or an archive"):
        open_submission(tmp_path / "notes.txt", tmp_path / "work")
    with pytest.raises(SubmissionError, match="missing"):
        open_submission(tmp_path / "missing", tmp_path / "work")
    assert str(safe_member_path("a/./b//c.cu")) == "a/b/c.cu"


@pytest.mark.parametrize("suffix", ["zip", "tar.gz"])
def test_grade_submission_archive(lab_root: Path, tmp_path: Path, monkeypatch, capsys, suffix: str) -> None:
    """`grade --submission x.zip`: the archive's file is the one built (fake builds)."""
    main = FakeBuilder(lab_root / "build" / "bin", {"lab01_solution": spec(add_tests())})
    built_from: list[str] = []

    class Slot(FakeBuilder):
        def build(self, target: str):
            built_from.append((self.staging / "labs" / "01-add" / "add.cu").read_text())
            return super().build(target)

    def submission_builder(root, preset, jobs, staging):
        slot = Slot(tmp_path / "sub" / "bin", {"lab01_student": spec(add_tests())})
        slot.staging = staging
        return slot

    monkeypatch.setattr(commands, "make_builder", lambda root, preset, jobs: main)
    monkeypatch.setattr(commands, "make_submission_builder", submission_builder)
    monkeypatch.setattr(commands, "probe_gpu", lambda: GPU)
    members = {"ada/labs/01-add/add.cu": CODE, "ada/labs/01-add/test_add.cu": "int main() {}"}
    archive = (
        make_zip(tmp_path / "ada.zip", members)
        if suffix == "zip"
        else make_tar(tmp_path / "ada.tar.gz", members)
    )
    out = tmp_path / "out"
    code = cli.main(
        ["--root", str(lab_root), "grade", "1", "--submission", str(archive), "--out", str(out), "-q"]
    )
    assert code == 0, capsys.readouterr()
    assert built_from == [CODE]
    results = Results.load(out / "results.json")
    assert results.run.submission == str(archive)
    assert any(f"staged from {archive}" in n for n in results.run.notes)
    assert any("ignored" in m and "test_add.cu" in m for m in results.labs[0].messages)

    (tmp_path / "bad.zip").write_text("nope")
    assert (
        cli.main(["--root", str(lab_root), "grade", "1", "--submission", str(tmp_path / "bad.zip"), "-q"])
        == 2
    )
    assert "not a readable zip" in capsys.readouterr().err
