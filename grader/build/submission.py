"""The build of a staged submission: the same CMake project in a build folder of its own
(build/<preset>-submission, or a batch slot's), with CUDALAB_SUBMISSION_DIR pointing at the staging tree,
so only the student object is compiled and linked there. The test objects are the pristine build's
(reuse_from: CUDALAB_TEST_OBJECTS_FROM, cmake/CudaLab.cmake) wherever they were compiled alike, so a
first grade compiles one lab file, not the 20-70 s test translation unit as well."""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path

from grader.build.cmake import CMakeBuilder, cached_variable
from grader.model.results import BuildResult


@dataclass
class SubmissionBuilder(CMakeBuilder):
    """CMakeBuilder for a staged submission: its own build directory, CUDALAB_SUBMISSION_DIR set."""

    submission_dir: Path | None = None
    directory: Path | None = None  # default: $CUDALAB_SUBMISSION_BUILD_DIR, else build/<preset>-submission
    reuse_from: Path | None = None  # the pristine build whose test objects this one links

    @property
    def build_dir(self) -> Path:
        if self.directory is not None:
            return self.directory
        env = os.environ.get("CUDALAB_SUBMISSION_BUILD_DIR")
        return Path(env) if env else self.root / "build" / f"{self.preset}-submission"

    def cached_submission(self) -> str | None:
        return cached_variable(self.build_dir, "CUDALAB_SUBMISSION_DIR")

    def cached_labs(self) -> list[str] | None:
        labs = super().cached_labs()
        if labs is not None and (self.cached_submission() != str(self.submission_dir or "")
                                 or cached_variable(self.build_dir, "CUDALAB_TEST_OBJECTS_FROM")
                                 != str(self.reuse_from or "")):
            # A new staging tree (or test objects from elsewhere): configure again (only the student
            # objects change).
            return None
        return labs

    def configure_command(self, ninja: bool, labs: list[str] | None = None) -> list[str]:
        cmd = super().configure_command(ninja and not (self.build_dir / "CMakeCache.txt").is_file(), labs)
        cmd += ["-B", str(self.build_dir), f"-DCUDALAB_SUBMISSION_DIR={self.submission_dir or ''}",
                f"-DCUDALAB_TEST_OBJECTS_FROM={self.reuse_from or ''}"]
        return cmd

    def build(self, target: str, timeout_s: float | None = None, memory_mib: float | None = None) -> BuildResult:
        """A failed build's message and log name the student's files as they are in their repository
        (labs/03-vector-add/vector_add.cu), not by the staging folder they were compiled from."""
        result = super().build(target, timeout_s=timeout_s, memory_mib=memory_mib)
        if result.ok or self.submission_dir is None:
            return result
        return replace(result, message=self.unstaged(result.message), log=self.unstaged(result.log))

    def unstaged(self, text: str) -> str:
        assert self.submission_dir is not None
        for prefix in {str(self.submission_dir.resolve()), str(self.submission_dir)}:
            text = text.replace(prefix.rstrip(os.sep) + os.sep, "")
        return text


def dirs_with_test_objects(build_dir: Path) -> list[Path]:
    """Where a build's test objects may be: its own folder, then the build it reuses them from."""
    reused = cached_variable(build_dir, "CUDALAB_TEST_OBJECTS_FROM")
    return [Path(build_dir)] + ([Path(reused)] if reused else [])
