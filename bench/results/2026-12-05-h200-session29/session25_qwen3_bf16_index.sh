#!/usr/bin/env bash
# Prepared in session 25 (not yet run; ~5 min). From the repo root, carry .deps:
#   O=$OUT timeout 560 bash bench/results/2026-12-05-h200-session29/session25_qwen3_bf16_index.sh; then tar $OUT.
# (Move this script and its patch into the session's results directory first, and fix P below.)
# Session 24's open doubt: with the warp-uniform consumer index (consumer_half()) in the bf16 grouped
# kernel, qwen3-30b-a3b's bf16 forward at T=16384 ran 0.959 of the base's speed in Y5 (slower in 2
# of 3 rounds; its GEMMs in the grouped lab were not slower), and issue 4's qwen3 bf16 gates missed
# in Y6. This A/B isolates the bf16 grouped kernel's index: the base is this tree with
# session25_grouped_bf16_uniform_index.patch reversed (warpgroup - 1 there, every other kernel as
# shipped). bench_gpu_forward bf16, 5 alternated rounds, the eight shapes at T = 4096, 16384.
# Prediction (before the run): new / base time within 0.98-1.02 on every cell, qwen3 T=16384 too
# (Y5's 0.959 was the spread of 3 rounds); if qwen3 T=16384 is slower in 4 or 5 rounds, the index
# leaves the bf16 grouped kernel.
set -u
. tools/device_call.sh
P=bench/results/2026-12-05-h200-session29/session25_grouped_bf16_uniform_index.patch
base_tree $P
build_base_bench &
build_device
wait
mark "base bench build" $? $O/build_base.log
F=$O/fwd; mkdir -p $F
S=qwen3-30b-a3b,gpt-oss-120b,mixtral-8x7b,deepseek-v3,qwen3-235b-a22b,glm-4.5-air,qwen3-next-80b-a3b,gpt-oss-20b
for i in 1 2 3 4 5; do
  if [ $((i % 2)) = 1 ]; then first=base; else first=new; fi
  for a in $first $([ $first = base ] && echo new || echo base); do
    X=$B; [ $a = base ] && X=$BB
    timeout 60 $X --shapes $S --tokens 4096,16384 --gemm hopper --dtype bf16 > $F/${a}_$i.log 2>&1; mark "fwd $a $i" $? /dev/null
  done
done
python3 tools/ab_summary.py $F base new > $F/ab.md 2>&1
mark done 0 /dev/null
