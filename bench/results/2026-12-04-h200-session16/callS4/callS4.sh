#!/usr/bin/env bash
# Device call S4 (session 16): where the bf16 forward's time goes at T=16384, kernel by kernel
# (tests/gpu/profile_on_device.sh: ncu, caches flushed per kernel, clocks as found), on the
# shapes whose dense-equivalent gate fails (qwen3, deepseek) and gpt-oss. Why: S3's qwen3 forward
# took 1.24x dense-equivalent cuBLAS; how much of that is not GEMM (routing, plan, permute,
# combine) decides whether the next work is the GEMMs or the glue.
# Prediction (before the run): GEMM1 + GEMM2 are 80-90% of the kernel sum on qwen3, >= 90% on
# deepseek and gpt-oss; the non-GEMM kernels of qwen3 sum to 0.2-0.4 ms. Carry .deps.
set -u
O=$OUT
MODELS="qwen3-30b-a3b deepseek-v3 gpt-oss-120b" TOKENS=16384 GEMMS=hopper RUN_LIMIT=120 OUT=$O/prof \
    timeout 540 bash tests/gpu/profile_on_device.sh > $O/prof_stdout.log 2>&1
echo "profile rc=$?" >> $O/prof_stdout.log
