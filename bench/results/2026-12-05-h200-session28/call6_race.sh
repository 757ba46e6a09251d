#!/usr/bin/env bash
# Session 28, call 6. From the repo root, carry .deps:
#   O=/tmp/o6 timeout 200 bash bench/results/2026-12-05-h200-session28/call6_race.sh
# Calls 0 and 3: racecheck of the bit-for-bit cases reports 8 hazards in the FP8 swapped decode
# kernels (default and QUANT instantiations): the producer's cp.async scale copies against the
# consumer lanes' scale reads (promote_swapped, the weight-scale read). Lane 0 frees the stage after
# a __syncwarp, which racecheck does not follow (session 8's J2 found the same for the header).
# The change (call6_all_lane_release.patch): FP8 consumers free the stage with one arrival per thread.
# Prediction: racecheck 0 hazards; suite --filter fp8 green; FP8 forward new / base 0.99-1.01
# (256 arrivals a k-block instead of 8, off the consumers' path).
set -u
. tools/device_call.sh
base_tree bench/results/2026-12-05-h200-session28/call6_all_lane_release.patch
build_base_bench &
build_device
wait; mark "base bench build" $? $O/build_base.log
timeout 60 compute-sanitizer --tool racecheck --error-exitcode 3 $T --quick --filter bitexact --gemm hopper \
  > $O/racecheck_bitexact.log 2>&1; mark "racecheck bitexact" $? $O/racecheck_bitexact.log
timeout 30 $T --quick --filter fp8 > $O/test_fp8.log 2>&1; mark "suite --quick --filter fp8" $? $O/test_fp8.log
F=$O/fwd; mkdir -p $F
for i in 1 2 3; do
  for a in $([ $i = 2 ] && echo "new base" || echo "base new"); do
    X=$B; [ $a = base ] && X=$BB
    timeout 30 $X --shapes qwen3-30b-a3b,deepseek-v3,gpt-oss-120b --tokens 1,8,64 --gemm hopper --dtype fp8 > $F/fp8_${a}_$i.log 2>&1
    mark "fwd $a $i" $? /dev/null
  done
done
python3 tools/ab_summary.py $F fp8_base fp8_new > $F/fp8.md 2>&1
mark done 0 /dev/null
