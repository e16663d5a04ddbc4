#!/usr/bin/env bash
# Gradescope runs this once, when it builds the autograder image (the zip's contents are in
# /autograder/source). It installs what the grader needs and builds the instructor's binaries ahead of
# time, so that grading a submission compiles only the student's file.
#
# The CUDA toolkit and a GPU are NOT part of Gradescope's standard images, and Gradescope documents no
# GPU option. This bundle therefore works only on a GPU-enabled custom image that already has the CUDA 13
# toolkit (nvcc) installed, e.g. one built FROM nvidia/cuda:13.0.0-devel-ubuntu24.04 and run with access
# to an NVIDIA GPU. Without a GPU every test is reported as "could not run (no GPU)" and scores nothing.
set -euo pipefail
src=/autograder/source
cd "$src"

export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y --no-install-recommends cmake ninja-build g++ libgtest-dev python3 python3-venv python3-pip git

# The grader's packages, for the python3 that run_autograder uses.
python3 -m pip install --break-system-packages -r requirements.txt 2>/dev/null \
  || python3 -m pip install -r requirements.txt

if ! command -v nvcc >/dev/null && [ ! -x /usr/local/cuda/bin/nvcc ]; then
  echo "setup.sh: WARNING: no CUDA toolkit (nvcc) in this image. The labs cannot build here:" >&2
  echo "          use a custom image with CUDA 13 and a GPU (ci/gradescope/README.md)." >&2
  exit 0
fi
export PATH="/usr/local/cuda/bin:$PATH"

# Build the reference and hidden-test binaries and the tests' objects now (no GPU needed to compile).
# PRESET must match what run_autograder uses; "ci" compiles for Hopper (sm_90): for other GPUs add a
# preset with their CMAKE_CUDA_ARCHITECTURES in CMakeUserPresets.json and name it in both scripts.
PRESET=${PRESET:-ci}
python3 -m grader doctor || true
python3 -m grader build --all --solution --preset "$PRESET" || echo "setup.sh: some reference binaries did not build" >&2
