"""`python3 -m grader.confine`: the run supervisor, grader/isolate/confine.py (a script that imports
nothing of the grader, so the grader runs it by its path)."""

import runpy
import sys
from pathlib import Path

if __name__ == "__main__":
    here = Path(__file__).resolve().with_name("isolate")
    sys.path.insert(0, str(here))  # where it finds landlock.py, as when it runs by its path
    runpy.run_path(str(here / "confine.py"), run_name="__main__")
