"""Test binaries run confined: one binary and its re-runs (runs), the run's environment and policy
(policy), GoogleTest's reports (gtest), what runs a grade's binaries (runner), the run stage of a lab
(lab_run), compute-sanitizer (sanitizer) and the GPU's health between runs (health)."""
