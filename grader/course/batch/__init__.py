"""`grader batch`: a class graded on one machine (runner), one student per worker (worker) in a build
slot (slots) and on a GPU of the pool (gpus), the reference timed once (reference), students and their
state (students), roster and late policy (course), summaries (summary) and `batch merge` (merge)."""
