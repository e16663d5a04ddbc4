"""Exit codes (DESIGN.md, "Grader") and the exception that carries one to the command line."""

from __future__ import annotations

from enum import IntEnum


class Exit(IntEnum):
    OK = 0  # everything passed
    TEST_FAILURES = 1  # some test failed or did not run
    USAGE = 2  # bad selector, bad lab.toml, bad results.json, unbalanced skeleton markers
    BUILD = 3  # a target did not build, or the project did not configure
    ENVIRONMENT = 4  # no toolkit; no GPU where one is needed


class GraderError(Exception):
    """An error that ends the command with a message and an exit code."""

    def __init__(self, message: str, code: Exit = Exit.USAGE) -> None:
        super().__init__(message)
        self.code = code
