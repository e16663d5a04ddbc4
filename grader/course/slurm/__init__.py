"""course.slurm"""
