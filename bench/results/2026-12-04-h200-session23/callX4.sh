#!/usr/bin/env bash
# Session 23, call X4. From the repo root, carry .deps:
#   O=$OUT timeout 400 bash bench/results/2026-12-04-h200-session23/callX4.sh; then tar $OUT.
# The FP8 grouped kernel with its second consumer warpgroup LAG k-blocks behind the first (lab
# variants *_lag2/3/4; the kernel's LAG template parameter, 0 in the library: its SASS unchanged).
# Both warpgroups now reach their epilogues at the same moment and the tensor cores idle through
# them (X1: a quarter of the staged GEMM1's samples; X2/X3 after the branch-free rows: qwen3 GEMM1
# 0.90 ms against 0.75 for its mainloop alone). With a lag, one warpgroup's epilogue runs beside
# the other's MMAs. Nothing realigns them: they share only the ring, which caps the lead at its 5
# (bulk: 4) stages and so shortens the leader's prefetch by the lag.
# Prediction (lag / same variant without): qwen3 GEMM1 staged 0.85-0.95, bulk 0.88-0.97; qwen3
#   GEMM2 (6 k-blocks a tile) 0.85-0.95; deepseek GEMM1 (56 k-blocks) 0.95-1.00; mixtral 0.97-1.01;
#   lag 2 / 3 / 4 within 3% of each other. All checks pass; memcheck and racecheck clean on the
#   check shapes.
set -u
. tools/device_call.sh
F=(-std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -lineinfo -Iinclude -Isrc/core -Isrc/cuda -Isrc/cuda/hopper -Ilab)
nvcc "${F[@]}" -o /tmp/lab lab/grouped_lab.cu > $O/build_lab.log 2>&1; mark "lab build" $? $O/build_lab.log
CHK=chk-swiglu-limit,chk-geglu,chk-geglu-tanh,chk-reglu,chk-relu2,chk-oai
V=fp8_up_192,fp8_up_192_lag2,fp8_up_192_lag3,fp8_up_192_lag4,fp8_up_192_bulk,fp8_up_192_bulk_lag3,fp8_up_192_dyn_exp,fp8_up_192_dyn_exp_lag3
V=$V,fp8_down_192_b16,fp8_down_192_b16_lag3,fp8_down_192_bulk,fp8_down_192_bulk_lag3,fp8_down_192_b16_dyn_exp,fp8_down_192_b16_dyn_exp_lag3
for r in 1 2; do
  timeout 150 /tmp/lab --fp8 --shapes qwen3,gptoss,mixtral,deepseek,$CHK --variants $V > $O/lab_fp8_$r.log 2>&1
  mark "fp8 lab $r" $? $O/lab_fp8_$r.log
done
LV=fp8_up_192_lag3,fp8_up_192_bulk_lag3,fp8_up_192_dyn_exp_lag3,fp8_down_192_b16_lag3,fp8_down_192_bulk_lag3,fp8_down_192_b16_dyn_exp_lag3
timeout 120 compute-sanitizer --tool memcheck --error-exitcode 3 /tmp/lab --fp8 --shapes $CHK --variants $LV --check-only > $O/memcheck.log 2>&1
mark memcheck $? $O/memcheck.log
timeout 150 compute-sanitizer --tool racecheck --error-exitcode 3 /tmp/lab --fp8 --shapes chk-swiglu-limit,chk-relu2 --variants $LV --check-only > $O/racecheck.log 2>&1
mark racecheck $? $O/racecheck.log
mark done 0 /dev/null
