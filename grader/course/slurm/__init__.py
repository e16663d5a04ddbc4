"""`grader slurm`: a class as a Slurm job array and a merge job (jobs), its sbatch scripts and limits
(scripts), and a roster and course file at submit time (course)."""
