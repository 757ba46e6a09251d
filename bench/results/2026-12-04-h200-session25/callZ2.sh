#!/usr/bin/env bash
# Session 25, call Z2 (~6 min). From the repo root, carry .deps:
#   O=$OUT timeout 560 bash bench/results/2026-12-04-h200-session25/callZ2.sh
# The dense FP8 engine with Z1's outcome: clusters of 2 (B multicast) from 4 waves of tiles
# (moe__hopper_gemm_fp8_cluster_m), and the tile width by wave cost (moe__hopper_gemm_fp8_block_n:
# 192 where waves_192 * 192 < waves_128 * 128 * 1.10). New lab shapes: odd row blocks with TMA-able
# scales (1100 x 1000 x 1024; 4224 x 4096 x 1024, the engine's 128-wide clusters with a CTA
# without rows in the last cluster) and deepseek's q_a_proj 4096 x 1536 x 7168 (192 by the new rule).
# Prediction (before the run): every variant correct on every shape it takes; fp8engine = fp8v8 at
# 8192^3 and the x16 shapes (2-5% faster than fp8v6), = fp8v8_128 at 4096^3 (4-8% faster than
# fp8v6, session 24's engine choice there); 8192^3 gates: 0.85-0.87 of per-tensor cuBLASLt,
# 0.93-0.95 of lt-block. q_a_proj: fp8engine (192) within +-3% of fp8v4u_128 (the model says 192
# is 9% faster; one-and-two-wave shapes are where it is least sure). memcheck 0 errors; racecheck
# 0 hazards.
set -u
. tools/device_call.sh
OUT=$O/lab VARIANTS="fp8engine fp8v8" LAB_LIMIT=90 timeout 200 bash lab/run_fp8_on_device.sh > $O/lab_stdout.log 2>&1
mark "fp8 lab build + fp8engine, fp8v8" $? $O/lab_stdout.log
L=/tmp/moefuse-fp8lab-build/gemm_fp8_lab
timeout 100 $L --variants fp8engine,fp8v6,fp8v4u_128,fp8v8,fp8v8_128 > $O/round1.log 2>&1; mark round1 $? $O/round1.log
timeout 100 $L --variants fp8v8_128,fp8v8,fp8v4u_128,fp8v6,fp8engine > $O/round2.log 2>&1; mark round2 $? $O/round2.log
timeout 100 $L --variants fp8engine,fp8v4u_128,fp8v8_128,fp8v6,fp8v8 > $O/round3.log 2>&1; mark round3 $? $O/round3.log
timeout 90 compute-sanitizer --tool memcheck --error-exitcode 3 $L --variants fp8engine,fp8v8_128,fp8v8 --quick --check-only \
  > $O/memcheck.log 2>&1; mark memcheck $? $O/memcheck.log
timeout 90 compute-sanitizer --tool racecheck --error-exitcode 3 $L --variants fp8v8_128,fp8v8,fp8engine --filter odd-rows-1100 \
  --check-only > $O/racecheck_small.log 2>&1; mark "racecheck 1100" $? $O/racecheck_small.log
timeout 150 compute-sanitizer --tool racecheck --error-exitcode 3 $L --variants fp8engine --filter odd-rows-4224 \
  --check-only > $O/racecheck_4224.log 2>&1; mark "racecheck 4224 (engine, clusters)" $? $O/racecheck_4224.log
mark done 0 /dev/null
