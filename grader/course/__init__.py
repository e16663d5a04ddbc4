"""A class: batches of submissions (batch/), Slurm job arrays (slurm/), the course file's due dates and
late policy (policy), the roster, the late-day ledger and the similarity report."""
