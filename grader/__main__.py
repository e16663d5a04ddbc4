"""python3 -m grader: the command line (grader/cli.py)."""

import sys

from .cli import main

sys.exit(main())
