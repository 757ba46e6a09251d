#!/usr/bin/env bash
# Prepared in session 24 for a later session (not yet run; ~3 min with the build). From the repo root:
#   O=$OUT timeout 400 bash bench/results/next-session/session24_cluster.sh; then tar $OUT.
# Question: with session 24's consumer loops (ACQUIRE_FIRST at 192 wide, the uniform index at 128), do
# clusters of 2 with B multicast pay now? (Session 21, on the old order: 0.996 at 192, 0.975 at 128 of the
# single CTA's time.) cuBLASLt's same-work kernel is 128 x 128 in clusters of 2 at 80% of the tensor pipe;
# ours (fp8v4u_128) ~61%. Every kernel of ours moves ~37-38 bytes per SM-cycle from L2 at its measured
# tensor-pipe share (128 wide 32 KB a k-block, 192 wide 40 KB); cuBLASLt's, counting the multicast half of B
# once, ~37.5. If that rate is a ceiling, halving B's L2 reads raises the 128-wide kernel by up to 1.33x.
# Lab fp8v8 / fp8v8_128 (gemm_fp8_v8_cluster.cu; compile-checked only: 168 registers, 0 spills; the
# engine's and the grouped kernels' SASS unchanged by CLUSTER_M), two rounds, all shapes checked; memcheck
# and racecheck of fp8v8_128 at the quick shapes; ncu's tensor-pipe share at 8192^3.
# Prediction (before the run): fp8v8_128 1.05-1.20x faster than fp8v4u_128 at 8192^3 and the x16-expert
# shapes, slower on the one-wave shapes (as in session 21); fp8v8 within +-3% of fp8v6. Correct everywhere;
# memcheck 0 errors; racecheck 0 hazards.
set -u
. tools/device_call.sh  # (sourced again: harmless, keeps this part runnable alone)
OUT=$O/lab VARIANTS="fp8v8_128" LAB_LIMIT=90 timeout 200 bash lab/run_fp8_on_device.sh > $O/lab_stdout.log 2>&1
mark "fp8 lab build + fp8v8_128" $? $O/lab_stdout.log
L=/tmp/moefuse-fp8lab-build/gemm_fp8_lab
timeout 100 $L --variants fp8v4u_128,fp8v8_128,fp8v6,fp8v8,fp8engine > $O/round1.log 2>&1; mark round1 $? $O/round1.log
timeout 100 $L --variants fp8engine,fp8v8,fp8v6,fp8v8_128,fp8v4u_128 > $O/round2.log 2>&1; mark round2 $? $O/round2.log
timeout 90 compute-sanitizer --tool memcheck --error-exitcode 3 $L --variants fp8v8_128,fp8v8 --quick --check-only \
  > $O/memcheck.log 2>&1; mark memcheck $? $O/memcheck.log
timeout 90 compute-sanitizer --tool racecheck --error-exitcode 3 $L --variants fp8v8_128 --quick --check-only \
  > $O/racecheck.log 2>&1; mark racecheck $? $O/racecheck.log
timeout 90 ncu --clock-control none --kernel-name regex:"fp8_gemm|nvjet" \
  --metrics gpu__time_duration.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed,lts__t_bytes.sum.per_second \
  --csv $L --variants fp8v4u_128,fp8v8_128,fp8v6,fp8v8 --filter square-8192 --check-only > $O/ncu_8192.csv 2>&1
mark ncu $? $O/ncu_8192.csv
mark done 0 /dev/null
