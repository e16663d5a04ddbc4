"""`python3 -m grader.confine`: the run supervisor, grader/isolate/confine.py (a script that imports
nothing of the grader, so the grader runs it by its path)."""

import runpy
from pathlib import Path

if __name__ == "__main__":
    runpy.run_path(str(Path(__file__).with_name("isolate") / "confine.py"), run_name="__main__")
