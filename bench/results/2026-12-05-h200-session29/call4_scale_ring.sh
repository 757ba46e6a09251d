#!/usr/bin/env bash
# Session 29, call 4. From the repo root, carry .deps:
#   O=/tmp/o4 timeout 560 bash bench/results/2026-12-05-h200-session29/call4_scale_ring.sh
# Call 1's racecheck (racecheck_swap.log there) cleared the FP8 swapped kernel after session 28's
# all-lane release but found 6 hazards in the 128-wide grouped FP8 ring kernel on
# fp8-swap-ring-row128's tiles path: fp8_scales read the scale slot in every lane and lane 0
# freed it with no ordering after the other lanes' loads (not even a __syncwarp).
# session29_scale_ring_all_lane.patch frees the scale slot by each consumer thread's own arrival
# (256 a slot). 1. suite --quick; racecheck of --filter fp8 (the grouped and dense ring kernels)
# and memcheck of fp8-swap-ring; 2. FP8 forward new / base (this tree with the patch reversed) at
# the T where the 128-wide ring runs (T*k < 64*E and above the swapped kernel's range), 3
# alternated rounds; 3. session 25's bf16 dense ring_next patch: lab engine, base and patched
# trees, 4 alternated rounds.
# Prediction (before the run): suite green; racecheck 0 hazards; memcheck 0 errors; FP8 new / base
# time 0.99-1.01 (the swapped kernel's same change was 0.994-1.012 in call 1); bf16 lab engine
# patched / base within +-1% (SASS: the same instruction count).
set -u
. tools/device_call.sh
base_tree bench/results/2026-12-05-h200-session29/session29_scale_ring_all_lane.patch
rm -rf /tmp/ringnew && mkdir -p /tmp/ringnew && tar --exclude=./build-device --exclude=./bench/results -cf - . | tar -xf - -C /tmp/ringnew
(cd /tmp/ringnew && patch -p1 < $R/bench/results/2026-12-05-h200-session29/session25_ring_next_bf16_dense.patch) > $O/ring_patch.log 2>&1
mark "ring_next patch" $? $O/ring_patch.log
(OUT=$O/labbase LAB_BUILD=/tmp/labbase VARIANTS=engine LAB_LIMIT=60 bash lab/run_on_device.sh > $O/labbase_stdout.log 2>&1; \
 cd /tmp/ringnew && OUT=$O/labnew LAB_BUILD=/tmp/labnew VARIANTS=engine LAB_LIMIT=60 bash lab/run_on_device.sh > $O/labnew_stdout.log 2>&1) &
LABPID=$!
build_base_bench &
build_device
wait $!; mark "base bench build" $? $O/build_base.log
timeout 30 $T --quick > $O/test_quick.log 2>&1; mark "suite --quick" $? $O/test_quick.log
wait $LABPID; mark "labs (build + engine round 1 base, new)" $? $O/labnew_stdout.log
timeout 200 compute-sanitizer --tool racecheck --error-exitcode 3 $T --quick --filter fp8 --gemm hopper \
  > $O/racecheck_fp8.log 2>&1; mark "racecheck fp8" $? $O/racecheck_fp8.log
timeout 40 compute-sanitizer --tool memcheck --error-exitcode 3 $T --quick --filter fp8-swap-ring --gemm hopper \
  > $O/memcheck_ring.log 2>&1; mark "memcheck fp8-swap-ring" $? $O/memcheck_ring.log
F=$O/fwd; mkdir -p $F
for i in 1 2 3; do
  for a in $([ $i = 2 ] && echo "new base" || echo "base new"); do
    X=$B; [ $a = base ] && X=$BB
    timeout 30 $X --shapes qwen3-30b-a3b,deepseek-v3,gpt-oss-120b,mixtral-8x7b --tokens 128,256,512,1024 --gemm hopper --dtype fp8 > $F/fp8_${a}_$i.log 2>&1
    mark "fwd $a $i" $? /dev/null
  done
done
python3 tools/ab_summary.py $F fp8_base fp8_new > $F/fp8.md 2>&1
for i in 2 3 4; do
  for a in $([ $i = 3 ] && echo "base new" || echo "new base"); do
    timeout 60 /tmp/lab$a/gemm_lab --variants engine > $O/lab_${a}_$i.log 2>&1; mark "lab $a $i" $? $O/lab_${a}_$i.log
  done
done
mark done 0 /dev/null
