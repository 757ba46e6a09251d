#!/usr/bin/env bash
# Session 24, call Y2 (~3 min). From the repo root: O=$OUT timeout 400 bash bench/results/2026-12-04-h200-session24/callY2.sh
# The dense FP8 kernel with the consumers' ACQUIRE orders (gemm_fp8_kernel.cuh fp8_order; lab fp8v6*), the
# order Y1 read in cuBLASLt's generated block-scaled kernel: stage kb waited for and its scales read while
# kb-1's wgmmas run, then kb-1 promoted and released, then kb issued; the warpgroup index made warp-uniform
# (the descriptors' arithmetic moves to uniform registers: in the SASS the loop's S2UR SR_CgaCtaId /
# S2R SR_TID.X / R2UR are gone). fp8v6t adds cuBLASLt's named-barrier turns between the two warpgroups.
# Lab (all 8 shapes, each variant checked against the fp64 reference), two rounds in one process each, the
# variant order reversed in the second; then ncu's tensor-pipe share at 8192^3.
# Prediction (before the run): fp8v6 1.08-1.18x faster than fp8v4 at 8192^3 (ours 68.6% of the tensor pipe,
# cuBLASLt 82% in the same configuration); fp8v6_128 1.10-1.25x faster than fp8v4_128; the turns (v6t)
# within +-4% of v6. All pass the check.
set -u
. tools/device_call.sh
OUT=$O/lab VARIANTS="fp8v6" LAB_LIMIT=90 timeout 200 bash lab/run_fp8_on_device.sh > $O/lab_stdout.log 2>&1
mark "fp8 lab build + fp8v6" $? $O/lab_stdout.log
L=/tmp/moefuse-fp8lab-build/gemm_fp8_lab
V="fp8v4,fp8v6,fp8v6t,fp8v4_128,fp8v6_128,fp8v6t_128,fp8engine"
VR="fp8engine,fp8v6t_128,fp8v6_128,fp8v4_128,fp8v6t,fp8v6,fp8v4"
timeout 120 $L --variants $V > $O/round1.log 2>&1; mark round1 $? $O/round1.log
timeout 120 $L --variants $VR > $O/round2.log 2>&1; mark round2 $? $O/round2.log
timeout 90 ncu --clock-control none --kernel-name regex:"fp8_gemm|nvjet" \
  --metrics gpu__time_duration.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed,sm__cycles_elapsed.avg.per_second \
  --csv $L --variants fp8v4,fp8v6,fp8v6t,fp8v4_128,fp8v6_128 --filter square-8192 --check-only > $O/ncu_8192.csv 2>&1
mark ncu $? $O/ncu_8192.csv
mark done 0 /dev/null
