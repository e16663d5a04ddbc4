"""cudalab's grader: builds the labs, runs their GoogleTest binaries in isolation, scores them from
each lab's rubric (lab.toml) and writes reports. Entry points: ``python3 -m grader`` in a checkout, or the
``cudalab-grader`` command that ``pip install .`` gives.

``__version__`` is the one place the version is written: pyproject.toml reads it, every results.json
carries it (run.grader_version), and CHANGELOG.md's newest entry names it.

The subpackages, lowest layer first; a module imports only from its own package and from those before
it (grader/tests/test_layering.py checks this on the source). docs/design.md draws them."""

__version__ = "0.13.0"

LAYERS = (
    "model",      # what a grade is made of: labs (lab.toml), results, visibility of hidden tests, errors
    "host",       # what this machine has: the GPUs, the CUDA toolkit's tools
    "isolate",    # one untrusted process: limits, the confine.py supervisor, bubblewrap
    "build",      # CMake builds: the pristine tree, a submission's build folder, the targets of a lab
    "intake",     # a submission: opened (folder, archive, bare files) and staged
    "inspect",    # what the student's file includes and compiles to; techniques (reads, builds nothing)
    "execute",    # test binaries run confined, GoogleTest's reports, compute-sanitizer, GPU health
    "profile",    # Nsight Compute on the timed kernels (grade --profile): metrics, advice; never a grade
    "score",      # the rubric, perf points, penalties, hints
    "grade",      # the stages of one grade, in order
    "report",     # console, HTML, JSON, JUnit, LMS exports
    "course",     # a class: batches, Slurm, roster, late policy, similarity
    "authoring",  # the instructor's tools: skeletons, rubric checks, mutants, releases
    "cli",        # the verbs and their arguments
)
TOP_LEVEL_MODULES = ("__init__", "__main__", "confine")
