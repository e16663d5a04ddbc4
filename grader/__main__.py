"""python3 -m grader: the command line (grader/cli/args.py)."""

import sys

from grader.cli.args import main

sys.exit(main())
