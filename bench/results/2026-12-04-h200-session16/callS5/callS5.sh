#!/usr/bin/env bash
# Device call S5 (session 16): S4's per-kernel profile again with the DRAM bytes, SM clock and
# tensor-pipe activity of each kernel (tests/gpu/profile_on_device.sh, now with METRICS and DTYPE),
# for bf16 and FP8 at T=16384 on qwen3 and deepseek. Why: S4 put the GEMMs at 93-98% of the kernel
# sum, at per-FLOP rates near the dense-equivalent cuBLAS's bench rate, while the bench's forward
# is 1.2-1.3x that: the difference is sustained-power behaviour (docs/roofline_model.md, power
# bound), so the DRAM bytes each GEMM moves (deepseek GEMM1: the model says 37 GB for 15 GB of
# weights) are what to cut; FP8 (qwen3 499 TFLOP/s, about bf16's) gets its first breakdown.
# Prediction (before the run): bf16 deepseek GEMM1 reads 25-40 GB from DRAM, GEMM2 8-15 GB;
# FP8: GEMMs >= 85% of the kernel sum, the FP8 GEMMs' tensor pipe 35-50% active; clocks under ncu
# 1.6-1.98 GHz. Carry .deps.
set -u
O=$OUT
M="dram__bytes_read.sum,dram__bytes_write.sum,sm__cycles_elapsed.avg.per_second,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed"
for dt in bf16 fp8; do
  D=""; [ $dt = fp8 ] && D=fp8
  DTYPE=$D METRICS=$M MODELS="qwen3-30b-a3b deepseek-v3" TOKENS=16384 GEMMS=hopper RUN_LIMIT=150 OUT=$O/prof_$dt \
      timeout 280 bash tests/gpu/profile_on_device.sh > $O/prof_${dt}_stdout.log 2>&1
  echo "$dt rc=$?" >> $O/call.log
done
