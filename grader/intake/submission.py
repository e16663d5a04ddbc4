"""Open a submission as a directory the staging step can read: a student's repository or any folder, a
.zip or .tar(.gz/.bz2/.xz) archive, or the student file(s) alone.

    open_submission(path, workdir, labs) -> the directory whose labs/NN-slug/ holds the student files

A directory is used where it is (a git repository is graded from its working tree). An archive is
extracted into workdir, refusing anything that could write outside it or smuggle in a link: absolute
paths, '..', drive letters, symbolic and hard links, devices, FIFOs, more than MAX_MEMBERS members or
more than MAX_TOTAL_BYTES of content. When the extracted tree (or the directory) holds one top-level
folder and nothing else, that folder is the submission. A flat submission, the student files at its
top (vector_add.cu alone), is laid out as labs/NN-slug/<file> in workdir, for the file names that
belong to exactly one lab. Nothing here reads a file's content: grader/intake/staging.py stages and checks it.
"""

from __future__ import annotations

import os
import shutil
import stat
import tarfile
import zipfile
from pathlib import Path, PurePosixPath

from grader.model.labs import LAB_DIR, Lab
from grader.intake.staging import MAX_FILE_BYTES, StagingError

MAX_MEMBERS = 2000
MAX_TOTAL_BYTES = 64 << 20
ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz", ".tar", ".zip")
# Folders archivers add on their own; never the submission's single top-level folder.
_JUNK = ("__MACOSX",)
_CHUNK = 1 << 16


class SubmissionError(StagingError):
    """The submission cannot be opened: not found, not an archive, or an unsafe archive."""


def archive_suffix(path: Path | str) -> str:
    """The archive suffix of a file name ('.tar.gz', '.zip', ...), or '' when it is not an archive."""
    name = Path(path).name.lower()
    return next((s for s in ARCHIVE_SUFFIXES if name.endswith(s) and len(name) > len(s)), "")


def submission_name(path: Path | str) -> str:
    """A submission's name without its archive suffix: 'ada.tar.gz' -> 'ada'."""
    name = Path(path).name
    suffix = archive_suffix(name)
    return name[: len(name) - len(suffix)] if suffix else name


def open_submission(path: Path | str, workdir: Path | str, labs: list[Lab] | None = None) -> Path:
    """The directory to stage from (see the module docstring). workdir receives extracted or laid-out
    files; it is created when needed and must not be inside the submission. Raises SubmissionError."""
    path, workdir = Path(path), Path(workdir)
    try:
        st = os.stat(path)  # the path itself is the instructor's choice: a link to it is followed
    except OSError as err:
        raise SubmissionError(f"{path}: {err.strerror or err}") from None
    if stat.S_ISDIR(st.st_mode):
        top = _descend(path)
        return _flat(top, workdir / "flat", labs) or top
    if not stat.S_ISREG(st.st_mode):
        raise SubmissionError(f"{path} is neither a directory nor an archive file")
    suffix = archive_suffix(path)
    if not suffix:
        raise SubmissionError(
            f"{path.name} is not a directory or an archive (.zip, .tar, .tar.gz, .tgz, .tar.bz2, .tar.xz)"
        )
    dest = workdir / "extracted"
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    try:
        if suffix == ".zip":
            _extract_zip(path, dest)
        else:
            _extract_tar(path, dest)
    except SubmissionError:
        shutil.rmtree(dest, ignore_errors=True)
        raise
    top = _descend(dest)
    return _flat(top, workdir / "flat", labs) or top


# --- member checks ------------------------------------------------------------------------------------


def safe_member_path(name: str, is_dir: bool = False) -> PurePosixPath:
    """The relative path an archive member may be extracted to ('.' for the top folder itself, as in
    `tar -czf x.tgz .`); raises SubmissionError when the name is absolute, climbs out with '..', names a
    drive, or is empty."""
    shown = name if len(name) <= 120 else name[:117] + "..."
    if "\0" in name:
        raise SubmissionError(f"archive member {shown!r}: the name holds a NUL byte")
    norm = name.replace("\\", "/")
    if norm.startswith("/") or (len(norm) >= 2 and norm[1] == ":"):
        raise SubmissionError(
            f"archive member {shown!r}: absolute paths are not allowed in a submission archive"
        )
    parts = [p for p in norm.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise SubmissionError(f"archive member {shown!r}: '..' is not allowed in a submission archive")
    if not parts:
        if is_dir:
            return PurePosixPath(".")
        raise SubmissionError(f"archive member {shown!r}: an empty name")
    return PurePosixPath(*parts)


class _Budget:
    """Counts members and bytes written; raises once an archive goes over the limits."""

    def __init__(self, archive: Path) -> None:
        self.archive = archive
        self.members = 0
        self.bytes = 0

    def member(self) -> None:
        self.members += 1
        if self.members > MAX_MEMBERS:
            raise SubmissionError(
                f"{self.archive.name} has more than {MAX_MEMBERS} members; a submission needs a few files"
            )

    def add(self, n: int) -> None:
        self.bytes += n
        if self.bytes > MAX_TOTAL_BYTES:
            raise SubmissionError(
                f"{self.archive.name} holds more than {MAX_TOTAL_BYTES >> 20} MiB once extracted; leave out build outputs and data"
            )


def _target(dest: Path, rel: PurePosixPath) -> Path:
    out = dest.joinpath(*rel.parts)
    # Directories made here are real directories (links are refused), so this only guards against a bug.
    if not str(out.resolve()).startswith(str(dest.resolve()) + os.sep):
        raise SubmissionError(f"archive member {rel}: it would be written outside the submission")
    return out


def _write(stream, out: Path, budget: _Budget, declared: int | None = None) -> None:
    if declared is not None and declared > MAX_TOTAL_BYTES:
        budget.add(declared)  # raises
    if out.is_dir():
        raise SubmissionError(f"archive member {out.name}: a file and a folder of the same name")
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "wb") as f:
        while True:
            chunk = stream.read(_CHUNK)
            if not chunk:
                break
            budget.add(len(chunk))
            f.write(chunk)
    os.chmod(out, 0o644)


def _extract_zip(archive: Path, dest: Path) -> None:
    budget = _Budget(archive)
    try:
        with zipfile.ZipFile(archive) as zf:
            infos = zf.infolist()
            if len(infos) > MAX_MEMBERS:
                raise SubmissionError(
                    f"{archive.name} has {len(infos)} members, more than the {MAX_MEMBERS} a submission may have"
                )
            for info in infos:
                budget.member()
                rel = safe_member_path(info.filename, info.is_dir())
                if rel == PurePosixPath("."):
                    continue
                mode = (info.external_attr >> 16) & 0xFFFF
                kind = stat.S_IFMT(mode)
                if kind and kind not in (stat.S_IFREG, stat.S_IFDIR):
                    what = "a symbolic link" if kind == stat.S_IFLNK else "not a regular file"
                    raise SubmissionError(
                        f"archive member {rel} is {what}: submissions must contain the files themselves"
                    )
                out = _target(dest, rel)
                if info.is_dir():
                    out.mkdir(parents=True, exist_ok=True)
                    continue
                if info.flag_bits & 0x1:
                    raise SubmissionError(f"archive member {rel} is encrypted")
                with zf.open(info) as stream:
                    _write(stream, out, budget, info.file_size)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, NotImplementedError, RuntimeError) as err:
        raise SubmissionError(f"{archive.name} is not a readable zip archive ({err})") from None
    except OSError as err:
        raise SubmissionError(f"{archive.name} could not be extracted ({err.strerror or err})") from None


def _extract_tar(archive: Path, dest: Path) -> None:
    budget = _Budget(archive)
    try:
        with tarfile.open(archive, "r:*") as tf:
            for member in tf:  # streamed: the member count is checked before the whole index is read
                budget.member()
                rel = safe_member_path(member.name, member.isdir())
                if rel == PurePosixPath("."):
                    continue
                if member.issym() or member.islnk():
                    kind = "a symbolic link" if member.issym() else "a hard link"
                    raise SubmissionError(
                        f"archive member {rel} is {kind}: submissions must contain the files themselves"
                    )
                if not (member.isreg() or member.isdir()):
                    raise SubmissionError(f"archive member {rel} is not a regular file or a folder")
                out = _target(dest, rel)
                if member.isdir():
                    out.mkdir(parents=True, exist_ok=True)
                    continue
                stream = tf.extractfile(member)
                if stream is None:  # pragma: no cover - isreg() members always have data
                    raise SubmissionError(f"archive member {rel} cannot be read")
                with stream:
                    _write(stream, out, budget, member.size)
    except (tarfile.TarError, EOFError, ValueError) as err:
        raise SubmissionError(f"{archive.name} is not a readable tar archive ({err})") from None
    except OSError as err:
        raise SubmissionError(f"{archive.name} could not be extracted ({err.strerror or err})") from None


# --- layout ---------------------------------------------------------------------------------------------


def _entries(directory: Path) -> list[str]:
    try:
        return sorted(n for n in os.listdir(directory) if not n.startswith(".") and n not in _JUNK)
    except OSError as err:
        raise SubmissionError(f"{directory}: {err.strerror or err}") from None


def _descend(directory: Path) -> Path:
    """Into the single top-level folder (ada-main/ of a GitHub zip), repeatedly, while the folder is not
    itself a layout the staging step reads (labs/ or NN-slug/)."""
    current = directory
    for _ in range(8):
        names = _entries(current)
        if len(names) != 1 or names[0] == "labs" or LAB_DIR.match(names[0]):
            return current
        only = current / names[0]
        if only.is_symlink() or not only.is_dir():
            return current
        current = only
    return current


def _flat(directory: Path, workdir: Path, labs: list[Lab] | None) -> Path | None:
    """When directory has no labs/ and no NN-slug/ folder but student files at its top: a tree in workdir
    with labs/NN-slug/<file> for each file name that exactly one lab claims. None otherwise."""
    if not labs:
        return None
    names = _entries(directory)
    if "labs" in names or any(LAB_DIR.match(n) for n in names):
        return None
    owners: dict[str, list[Lab]] = {}
    for lab in labs:
        for file in lab.student_files:
            owners.setdefault(Path(file).name, []).append(lab)
    mapped = [(n, owners[n][0]) for n in names if len(owners.get(n, [])) == 1]
    if not mapped:
        return None
    shutil.rmtree(workdir, ignore_errors=True)
    for name, lab in mapped:
        src = directory / name
        dest = workdir / "labs" / lab.name / name
        dest.parent.mkdir(parents=True, exist_ok=True)
        st = os.lstat(src)
        if stat.S_ISLNK(st.st_mode):
            os.symlink(os.readlink(src), dest)  # the staging step refuses it, with its own message
        elif stat.S_ISREG(st.st_mode):
            fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW)
            with os.fdopen(fd, "rb") as f:  # at most one byte over the limit: the staging step refuses it
                dest.write_bytes(f.read(MAX_FILE_BYTES + 1))
        else:
            continue
    return workdir


__all__ = [
    "ARCHIVE_SUFFIXES",
    "MAX_MEMBERS",
    "MAX_TOTAL_BYTES",
    "SubmissionError",
    "archive_suffix",
    "open_submission",
    "safe_member_path",
    "submission_name",
]
