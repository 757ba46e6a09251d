#!/usr/bin/env bash
# Written in session 28 as call 7 (no machine was left for it: the session's device time ran out;
# it replaces call 6; move it and its patch into the session's results directory first and fix
# the two paths). From the repo root, carry .deps:
#   O=/tmp/o7 timeout 170 bash bench/results/2026-12-05-h200-session29/session28_swap_race.sh
# Racecheck of the FP8 swapped decode kernel with the consumers freeing each stage by one arrival a
# thread (session28_all_lane_release.patch; session 28's calls 0 and 3 found 8 hazards with lane 0's arrival after a
# __syncwarp), on the fp8-swap-* cases (fp8-swap-ring-row128: the ring wraps); the suite --quick;
# memcheck of fp8-swap; then the FP8 forward new / base (this tree with the patch reversed).
# Prediction: suite green; racecheck 0 hazards; memcheck 0 errors; time new / base 0.99-1.01 at
# T = 1, 8, 64 (256 arrivals a stage instead of 8, after the consumers' last read of it).
set -u
. tools/device_call.sh
base_tree bench/results/2026-12-05-h200-session29/session28_all_lane_release.patch
build_base_bench &
build_device
wait; mark "base bench build" $? $O/build_base.log
timeout 20 $T --quick > $O/test_quick.log 2>&1; mark "suite --quick" $? $O/test_quick.log
timeout 40 compute-sanitizer --tool racecheck --error-exitcode 3 $T --quick --filter fp8-swap --gemm hopper \
  > $O/racecheck_swap.log 2>&1; mark "racecheck fp8-swap" $? $O/racecheck_swap.log
timeout 20 compute-sanitizer --tool memcheck --error-exitcode 3 $T --quick --filter fp8-swap --gemm hopper \
  > $O/memcheck_swap.log 2>&1; mark "memcheck fp8-swap" $? $O/memcheck_swap.log
F=$O/fwd; mkdir -p $F
for i in 1 2 3; do
  for a in $([ $i = 2 ] && echo "new base" || echo "base new"); do
    X=$B; [ $a = base ] && X=$BB
    timeout 15 $X --shapes qwen3-30b-a3b,deepseek-v3,gpt-oss-120b --tokens 1,8,64 --gemm hopper --dtype fp8 > $F/fp8_${a}_$i.log 2>&1
    mark "fwd $a $i" $? /dev/null
  done
done
python3 tools/ab_summary.py $F fp8_base fp8_new > $F/fp8.md 2>&1
mark done 0 /dev/null
