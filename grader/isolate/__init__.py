"""One untrusted process: its limits, pipes and bounded output (process), the supervisor that confines
it (confine, with landlock; run by its path, importing nothing of the grader) and bubblewrap (bwrap)."""
