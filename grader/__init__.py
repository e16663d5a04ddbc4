"""cudalab's grader: builds the labs, runs their GoogleTest binaries in isolation, scores them from
each lab's rubric (lab.toml) and writes reports. Entry point: ``python3 -m grader``."""

__version__ = "0.1.0"
