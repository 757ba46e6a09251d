#!/usr/bin/env bash
# Session 23, call X5. From the repo root, carry .deps:
#   O=$OUT timeout 400 bash bench/results/2026-12-04-h200-session23/callX5.sh; then tar $OUT.
# The FP8 grouped kernel issuing each tile's first k-block ahead, the next tile's before the
# current tile's epilogue (lab *_pf variants; the kernel's PF template flag, off in the library).
# Both warpgroups stay in step (X4: any lag between them cost 10-23%), and the tensor cores run
# one k-block of both warpgroups (~768 cycles) through the epilogue (~2500 cycles at qwen3's
# staged GEMM1) instead of idling. SASS: no wgmma wait between the early issue and the epilogue
# (ptxas injects one only after the CTA's first issue and at its exit); spills 16-40 bytes
# (staged), 180 (bulk GEMM1: its epilogue works from the fragment beside part's 96 registers).
# Prediction (pf / same variant without, lab time): qwen3 GEMM1 staged 0.93-0.97, bulk 0.96-1.01;
#   qwen3 GEMM2 (6 k-blocks a tile) staged 0.92-0.97, bulk 0.94-0.99; deepseek GEMM1 dyn_exp
#   0.98-1.00; mixtral 0.99-1.01; gptoss GEMM1 (SwiGLU-OAI, 23 k-blocks) 0.96-0.99. All checks
#   pass; memcheck and racecheck clean on the check shapes.
set -u
. tools/device_call.sh
F=(-std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -lineinfo -Iinclude -Isrc/core -Isrc/cuda -Isrc/cuda/hopper -Ilab)
nvcc "${F[@]}" -o /tmp/lab lab/grouped_lab.cu > $O/build_lab.log 2>&1; mark "lab build" $? $O/build_lab.log
CHK=chk-swiglu-limit,chk-geglu,chk-geglu-tanh,chk-reglu,chk-relu2,chk-oai
V=fp8_up_192,fp8_up_192_pf,fp8_up_192_bulk,fp8_up_192_bulk_pf,fp8_up_192_dyn_exp,fp8_up_192_dyn_exp_pf
V=$V,fp8_down_192_b16,fp8_down_192_b16_pf,fp8_down_192_bulk,fp8_down_192_bulk_pf,fp8_down_192_b16_dyn_exp,fp8_down_192_b16_dyn_exp_pf
V=$V,fp8_down_192_bulk_dyn_exp,fp8_down_192_bulk_dyn_exp_pf
for r in 1 2 3; do
  timeout 150 /tmp/lab --fp8 --shapes qwen3,gptoss,mixtral,deepseek,$CHK --variants $V > $O/lab_fp8_$r.log 2>&1
  mark "fp8 lab $r" $? $O/lab_fp8_$r.log
done
PV=fp8_up_192_pf,fp8_up_192_bulk_pf,fp8_up_192_dyn_exp_pf,fp8_down_192_b16_pf,fp8_down_192_bulk_pf,fp8_down_192_b16_dyn_exp_pf,fp8_down_192_bulk_dyn_exp_pf
timeout 120 compute-sanitizer --tool memcheck --error-exitcode 3 /tmp/lab --fp8 --shapes $CHK --variants $PV --check-only > $O/memcheck.log 2>&1
mark memcheck $? $O/memcheck.log
timeout 150 compute-sanitizer --tool racecheck --error-exitcode 3 /tmp/lab --fp8 --shapes chk-swiglu-limit,chk-relu2 --variants $PV --check-only > $O/racecheck.log 2>&1
mark racecheck $? $O/racecheck.log
mark done 0 /dev/null
