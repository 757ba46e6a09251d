#!/usr/bin/env bash
# Prepared in session 21 for a later session (not yet run; ~3 min). From the repo root:
#   O=$OUT timeout 400 bash bench/results/next-session/session21_fp8_stalls.sh; then tar $OUT.
# Question: why our dense FP8 kernel keeps the tensor pipe 62-69% busy where cuBLASLt's same-work
# kernel (nvjet ..._128x128_128x6_2x1_..._Ablk128_Bvec128) keeps it 82% busy in the same
# configuration (session 21: V4's ncu; V7 built ours as 128 x 128 in clusters of 2, 65%).
# 1. The FP8 lab, --check-only (one launch each), square-8192, under ncu with WarpStateStats (stall
#    reasons per warp, for cuBLASLt's kernel too) and SourceCounters (per SASS instruction; ours
#    only gives useful source), for fp8v4_128 (128 x 128, scales by TMA) and the engine (192 wide).
# 2. tools/ncu_stalls.py on both of ours: the stall reasons' shares and the top instructions.
# Prediction (before the run): in our consumers the largest stall is the wgmma wait (warpgroup
# arrive / "wait" on the HGMMA's scoreboard) at 35-50% of samples, then the full barrier's try-wait
# at 10-20%; the promotion FFMAs under 10%. cuBLASLt's warps: a wait share of the same size but a
# larger "selected" (issuing) share. If our full-barrier wait is above 15%, the producer side (one
# thread issuing 4 TMA copies a stage) is what to change first; if the wgmma wait dominates and the
# FFMAs are small, two partial accumulators per warpgroup (fp8v2's overlap, on the stage-scale path).
set -u
. tools/device_call.sh
OUT=$O/lab VARIANTS="fp8v4_128 fp8engine" LAB_LIMIT=60 timeout 150 bash lab/run_fp8_on_device.sh > $O/lab_stdout.log 2>&1
mark "fp8 lab" $? $O/lab_stdout.log
L=/tmp/moefuse-fp8lab-build/gemm_fp8_lab
timeout 90 ncu --clock-control none --section WarpStateStats --kernel-name regex:"nvjet|fp8_gemm" --csv \
  $L --variants fp8v4_128,fp8engine --filter square-8192 --check-only > $O/ncu_warpstate.csv 2>&1
mark "ncu warp state" $? $O/ncu_warpstate.csv
for v in fp8v4_128 fp8engine; do
  timeout 90 ncu --clock-control none --section SourceCounters --section WarpStateStats --import-source no \
    --kernel-name regex:fp8_gemm --launch-count 1 -o $O/$v $L --variants $v --filter square-8192 --check-only \
    > $O/ncu_$v.log 2>&1
  ncu --import $O/$v.ncu-rep --page source --csv --print-source sass > $O/${v}_sass.csv 2>> $O/ncu_$v.log
  python3 tools/ncu_stalls.py $O/${v}_sass.csv > $O/${v}_stalls.md 2>&1; mark "stalls $v" $? $O/${v}_stalls.md
done
mark done 0 /dev/null
