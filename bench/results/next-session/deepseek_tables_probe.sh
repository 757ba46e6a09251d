#!/usr/bin/env bash
# Prepared in session 7 for a later call (not yet run): why do the producer-filled epilogue tables
# (09aff9d) make deepseek-v3 2-4% slower while qwen3 gets 1-6% faster (src/cuda/NOTES.md, "Session 7")?
# Builds the grouped lab at 09aff9d (tables) and 7bd5a03 (session 6) from archives the driver made
#   git archive 09aff9d -- src include lab | gzip > .snap/tables.tgz
#   git archive 7bd5a03 -- src include lab | gzip > .snap/base.tgz
# then, with the same seeds: the lab on deepseek T=4096 and T=16384 (bf16 and FP8, shipped and
# no-store epilogues), twice, alternated; and ncu of the bf16 GEMM2 (down_staged) of each build with
# the warp-state and scheduler sections (stall reasons of the consumer warps: is it the table wait,
# the epilogue, or the mainloop's barrier waits that grew?). ~2 min. Run from the repo root:
#   O=$OUT bash bench/results/next-session/deepseek_tables_probe.sh
set -u
O=${O:-$PWD/probe-out}; mkdir -p $O
NV="nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -Iinclude -Isrc/core -Isrc/cuda -Isrc/cuda/hopper -Ilab"
for arm in tables base; do
  mkdir -p /tmp/$arm && tar xzf .snap/$arm.tgz -C /tmp/$arm && (cd /tmp/$arm && $NV -o /tmp/lab_$arm lab/grouped_lab.cu -lcuda) \
    > $O/build_$arm.log 2>&1 &
done
wait
for i in 1 2; do
  for arm in tables base; do
    for f in "" "--fp8"; do
      for t in 4096 16384; do
        LAB_SEED=$((2000 + i)) timeout 60 /tmp/lab_$arm $f --shapes deepseek --tokens $t >> $O/lab_${arm}_$i.log 2>&1
      done
    done
  done
done
for arm in tables base; do
  LAB_SEED=2001 timeout 120 ncu --kernel-name regex:grouped_gemm_kernel --launch-count 1 \
    --section WarpStateStats --section SchedulerStats --section SpeedOfLight --section MemoryWorkloadAnalysis \
    /tmp/lab_$arm --shapes deepseek --tokens 4096 --variants down_staged --check-only > $O/ncu_$arm.log 2>&1
done
echo done > $O/done.log
