#!/usr/bin/env bash
# What compute-sanitizer racecheck watches (docs/timing.md, "What racecheck watches"): a host-launched
# shared-memory race, a race through shared atomics, both in a plain build, with -rdc=true, and with a
# device-side launch in the program; then lab 11's reference under racecheck. Needs a GPU (sm_90) and a
# built tree (build/<preset>). Usage: bench/probes/racecheck.sh [preset]
set -uo pipefail
cd "$(dirname "$0")/../.."
preset=${1:-default}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
src=bench/probes/racecheck_cases.cu
nvcc -arch=sm_90 -o "$work/plain" "$src" || exit 3
nvcc -arch=sm_90 -rdc=true -o "$work/rdc" "$src" -lcudadevrt || exit 3
nvcc -arch=sm_90 -rdc=true -DCDP -o "$work/cdp" "$src" -lcudadevrt || exit 3
for build in plain rdc cdp; do
  for case in plain atomic zero dev; do
    [ "$case" = dev ] && [ "$build" != cdp ] && continue
    echo "=== $build build, case $case"
    compute-sanitizer --tool racecheck --print-limit 3 "$work/$build" "$case" 2>&1 \
      | grep -E "Race reported|Warning|RACECHECK SUMMARY"
  done
done
bin=build/$preset/bin/lab11_solution
if [ -x "$bin" ]; then
  echo "=== lab 11's reference, BlockSort tests"
  CUDALAB_SMALL=1 compute-sanitizer --tool racecheck --print-limit 3 "$bin" --gtest_filter='*BlockSort*' 2>&1 \
    | grep -E "Warning|RACECHECK SUMMARY|PASSED|FAILED"
fi
