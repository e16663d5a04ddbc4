"""The instructor's tools: skeletons from the solutions (skeleton), `grader check` of each rubric
(rubric, rubric_checks), the mutation gate (mutation, patching) and the student release (release,
release_names, release_verify, release_templates/)."""
