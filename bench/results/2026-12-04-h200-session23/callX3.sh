#!/usr/bin/env bash
# Session 23, call X3 (the tree of X2's change, 712fe6e). From the repo root, carry .deps:
#   O=$OUT timeout 560 bash bench/results/2026-12-04-h200-session23/callX3.sh; then tar $OUT.
# Does the bulk-copy epilogue still win where it is the default (K <= 2048) now that the staged one
# lost its per-row branches (X2: staged FP8 GEMMs 2-9% faster)?
# 1. Grouped lab, staged vs bulk, both schedules (static stride; tickets expert by expert), FP8 and
#    bf16 GEMM2, PERF.md's four shapes at T = 16384, 2 alternated rounds.
# 2. Forward, 3 alternated rounds, 8 shapes, T = 4096 and 16384: FP8 with MOEFUSE_HOPPER_FP8_EPI=
#    staged / default (bulk where K <= 2048) / bulk (everywhere); bf16 with MOEFUSE_HOPPER_EPI2=
#    staged / default.
# Prediction: lab bulk / staged time at K <= 2048 (qwen3 both GEMMs, deepseek GEMM2): 0.97-1.02 (was
#   0.93-0.95 before X2); FP8 forward staged / default: qwen3 family and glm 0.98-1.02, the rest
#   1.00 (same kernels); bulk everywhere / default at long K 1.00-1.04. bf16 staged / default
#   1.00-1.04.
set -u
. tools/device_call.sh
F=(-std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -lineinfo -Iinclude -Isrc/core -Isrc/cuda -Isrc/cuda/hopper -Ilab)
nvcc "${F[@]}" -o /tmp/lab_new lab/grouped_lab.cu > $O/build_lab.log 2>&1 &
build_device
wait
mark "lab build" 0 $O/build_lab.log
V8=fp8_up_192,fp8_up_192_bulk,fp8_up_192_dyn_exp,fp8_up_192_bulk_dyn_exp,fp8_down_192_b16,fp8_down_192_bulk,fp8_down_192_b16_dyn_exp,fp8_down_192_bulk_dyn_exp
for r in 1 2; do
  timeout 100 /tmp/lab_new --fp8 --shapes qwen3,gptoss,mixtral,deepseek --variants $V8 > $O/lab_fp8_$r.log 2>&1
  mark "fp8 lab $r" $? $O/lab_fp8_$r.log
  timeout 60 /tmp/lab_new --shapes qwen3,gptoss,mixtral,deepseek --variants down_dyn_b16,down_bulk > $O/lab_bf16_$r.log 2>&1
  mark "bf16 lab $r" $? $O/lab_bf16_$r.log
done
D=$O/fwd; mkdir -p $D
S=qwen3-30b-a3b,gpt-oss-120b,mixtral-8x7b,deepseek-v3,qwen3-235b-a22b,glm-4.5-air,qwen3-next-80b-a3b,gpt-oss-20b
for i in 1 2 3; do
  for e in staged default bulk; do
    MOEFUSE_HOPPER_FP8_EPI=$e timeout 60 $B --shapes $S --tokens 4096,16384 --gemm hopper --dtype fp8 > $D/fp8$e\_$i.log 2>&1
    mark "fp8 $e $i" $? /dev/null
  done
  for e in staged default; do
    MOEFUSE_HOPPER_EPI2=$e timeout 60 $B --shapes $S --tokens 4096,16384 --gemm hopper > $D/bf16$e\_$i.log 2>&1
    mark "bf16 $e $i" $? /dev/null
  done
done
python3 tools/ab_summary.py $D fp8default fp8staged fp8bulk > $D/fp8.md 2>&1
python3 tools/ab_summary.py $D bf16default bf16staged > $D/bf16.md 2>&1
mark done 0 /dev/null
