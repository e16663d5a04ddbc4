"""What this machine has: its GPUs (nvidia-smi, the build preset, the run's facts: environment) and
the tools the grade needs from the CUDA toolkit and the system (toolkit: nvcc, compute-sanitizer, bwrap)."""
