#!/usr/bin/env bash
# Gradescope runs this once, when it builds the autograder image (the zip's contents are in
# /autograder/source). It installs what the grader needs to build the labs and builds the instructor's
# binaries and the tests' objects ahead of time, so that checking a submission compiles only its file.
#
# Gradescope's autograder machines have no GPU, and its images have no CUDA toolkit. Building needs no
# GPU, so this script installs the CUDA 13 compiler, runtime headers, CUB/Thrust and cuBLAS from NVIDIA's
# apt repository (no driver: there is nothing for one to drive). Each submission is then built and
# checked, and its GPU tests are reported as not run: run_autograder says why.
set -euo pipefail
src=${AUTOGRADER_SOURCE:-/autograder/source}
cd "$src"
PRESET=${PRESET:-ci}   # must match run_autograder's; "ci" compiles for Hopper (sm_90)
CUDA_VERSION=${CUDA_VERSION:-13-0}

export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y --no-install-recommends ca-certificates curl cmake ninja-build g++ binutils libgtest-dev \
  python3 python3-venv python3-pip git

# The grader's packages, for the python3 that run_autograder uses.
python3 -m pip install --break-system-packages -r requirements.txt 2>/dev/null \
  || python3 -m pip install -r requirements.txt

# The presets need CMake >= 3.25; Ubuntu 22.04's is older, so take a newer one from PyPI there.
cmake_version=$(cmake --version 2>/dev/null | grep -oE '[0-9]+\.[0-9]+' | head -1 || true)
if [ "$(printf '%s\n3.25\n' "${cmake_version:-0.0}" | sort -V | head -1)" != 3.25 ]; then
  python3 -m pip install --break-system-packages "cmake>=3.25" 2>/dev/null || python3 -m pip install "cmake>=3.25"
  hash -r
fi

export PATH="/usr/local/cuda/bin:/usr/local/cuda-${CUDA_VERSION/-/.}/bin:$PATH"
if ! command -v nvcc >/dev/null; then
  # shellcheck disable=SC1091  # the image's own file
  . /etc/os-release
  repo="ubuntu${VERSION_ID//./}"  # ubuntu2204, ubuntu2404
  curl -fsSL -o /tmp/cuda-keyring.deb \
    "https://developer.download.nvidia.com/compute/cuda/repos/$repo/x86_64/cuda-keyring_1.1-1_all.deb"
  dpkg -i /tmp/cuda-keyring.deb
  apt-get update
  apt-get install -y --no-install-recommends "cuda-nvcc-$CUDA_VERSION" "cuda-cudart-dev-$CUDA_VERSION" \
    "cuda-cccl-$CUDA_VERSION" "libcublas-dev-$CUDA_VERSION"
fi
if ! command -v nvcc >/dev/null; then
  echo "setup.sh: no CUDA toolkit (nvcc) could be installed: every submission will be reported as not built." >&2
  exit 0
fi

python3 -m grader doctor || true  # a GPU is missing, as it always is here; the rest must be ok

# Check the skeletons once as if they were a submission: this builds the reference binaries (the tests'
# list comes from them) and every lab's test objects in the submission build folder, so a student's
# submission later compiles only its own file.
python3 -m grader grade --submission "$src" --preset "$PRESET" --out /tmp/cudalab-warm-up -q \
  || echo "setup.sh: the warm-up check exited $? (expected without a GPU: 1 or 4)"
rm -rf /tmp/cudalab-warm-up
