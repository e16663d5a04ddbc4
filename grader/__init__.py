"""cudalab's grader: builds the labs, runs their GoogleTest binaries in isolation, scores them from
each lab's rubric (lab.toml) and writes reports. Entry points: ``python3 -m grader`` in a checkout, or the
``cudalab-grader`` command that ``pip install .`` gives.

``__version__`` is the one place the version is written: pyproject.toml reads it, every results.json
carries it (run.grader_version), and CHANGELOG.md's newest entry names it."""

__version__ = "0.3.5"
