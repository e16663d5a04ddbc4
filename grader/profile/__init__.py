"""Nsight Compute on a lab's timed kernels (grade --profile): ncu.py runs and reads the tool, metrics.py
turns its raw page into the numbers a student needs, advice.py says what they mean, stage.py is the
profile stage. Nothing here changes a grade."""
