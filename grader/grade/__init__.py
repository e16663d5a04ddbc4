"""A grade, stage after stage: the declared list (stages), what the caller asked (options), the half
that needs no GPU (prepare: build and inspect) and the whole (pipeline: run_labs, finish, assemble)."""
