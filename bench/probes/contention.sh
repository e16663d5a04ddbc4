#!/bin/bash
# Why do grades on several GPUs of one host each run slower than one alone (docs/timing.md)? Correctness
# runs of lab 06's reference: alone; on 4 GPUs at once; beside its 3 sanitizer tools; lazy and eager
# module loading. Uses every GPU it sees (at least 2) and a built tree.
# Usage: [PRESET=p] [OUT=dir] bench/probes/contention.sh
cd "$(dirname "$0")/../.."
bin=build/${PRESET:-default}/bin/lab06_solution
F='-*Perf.*:*Huge*'
cs=$(command -v compute-sanitizer)
gpus=$(seq 0 $(( $(nvidia-smi -L | wc -l) - 1 )) | tr '\n' ' ')
n=$(echo $gpus | wc -w)
[ "$n" -ge 2 ] || { echo "contention.sh: needs at least 2 GPUs, sees $n" >&2; exit 3; }
one() { CUDA_VISIBLE_DEVICES=$1 $bin --gtest_filter="$F" > /dev/null 2>&1; }
tools() { for t in memcheck racecheck synccheck; do CUDA_VISIBLE_DEVICES=$1 CUDALAB_SMALL=1 $cs --tool $t $bin --gtest_filter="-*Perf.*" > /dev/null 2>&1 & done; wait; }
stamp() { date +%s.%N; }
run() { local name=$1; shift; local s=$(stamp); "$@"; awk -v n="$name" -v a="$s" -v b="$(stamp)" 'BEGIN { printf "%-40s %6.2f s\n", n, b - a }'; }
(vmstat 1 > "${OUT:-/tmp}/vmstat.log" 2>&1 &) 
run "alone, GPU 0" one 0
run "alone, GPU 0 (again)" one 0
run "$n GPUs at once" bash -c "$(declare -f one); bin=$bin F='$F'; for g in $gpus; do one \$g & done; wait"
run "tools alone, GPU 0" bash -c "$(declare -f tools); bin=$bin cs=$cs; tools 0"
run "alone beside its tools, GPU 0" bash -c "$(declare -f one tools); bin=$bin F='$F' cs=$cs; one 0 & tools 0; wait"
run "$n GPUs, each beside its tools" bash -c "$(declare -f one tools); bin=$bin F='$F' cs=$cs; for g in $gpus; do (one \$g & tools \$g; wait) & done; wait"
run "$n GPUs at once, EAGER loading" bash -c "$(declare -f one); bin=$bin F='$F'; export CUDA_MODULE_LOADING=EAGER; for g in $gpus; do one \$g & done; wait"
run "alone, EAGER loading" bash -c "$(declare -f one); bin=$bin F='$F'; CUDA_MODULE_LOADING=EAGER one 0"
pkill vmstat
