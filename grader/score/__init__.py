"""Points: the rubric and the score stage (scoring), what takes points away again (penalties), timings
that cannot be believed (perfcheck), and a hint for each failure (hints, hints.toml)."""
