"""The command line: argparse and nothing else (args), the verbs (commands), `doctor` and the plain
listings of `list`, `build` and `test` (doctor, listing)."""
