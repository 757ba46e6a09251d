#!/usr/bin/env bash
# Session 29, call 7. From the repo root, carry .deps:
#   O=/tmp/o7 timeout 240 bash bench/results/2026-12-05-h200-session29/call7_gather_large_i.sh
# Question: would GEMM1 gathering its own x rows (MOEFUSE_HOPPER_A=gather) instead of the permute
# pass close issue 4's bf16 dense-ratio gate on glm-4.5-air (I = 1408, needs 4.6% off) or
# qwen3-235b-a22b (I = 1536, needs 3.2%) at T = 16384? The rule gathers where I <= 1024 or at most
# 256 routed rows per expert; session 14 measured gather / permute at T = 16384: qwen3 (I = 768)
# 0.938, deepseek (2048) 1.035, gpt-oss (2880) 1.044. Call 5's ncu put the permute at 6-7% of
# these two forwards.
# bf16 forward, default / gather, 4 alternated rounds, the eight shapes at T = 16384.
# Prediction (before the run): default / gather time 0.97-1.02 on glm and qwen3-235b (between
# session 14's I = 768 and I = 2048), 0.95-0.98 on deepseek, gpt-oss-120b, gpt-oss-20b and mixtral
# (gather slower), 1.000 +- 0.01 where the default already gathers (qwen3-30b-a3b, qwen3-next).
set -u
. tools/device_call.sh
build_device
F=$O/fwd; mkdir -p $F
S=qwen3-30b-a3b,gpt-oss-120b,mixtral-8x7b,deepseek-v3,qwen3-235b-a22b,glm-4.5-air,qwen3-next-80b-a3b,gpt-oss-20b
for i in 1 2 3 4; do
  for a in $([ $((i % 2)) = 1 ] && echo "default gather" || echo "gather default"); do
    if [ $a = gather ]; then export MOEFUSE_HOPPER_A=gather; else unset MOEFUSE_HOPPER_A; fi
    timeout 40 $B --shapes $S --tokens 16384 --gemm hopper --dtype bf16 > $F/${a}_$i.log 2>&1; mark "fwd $a $i" $? /dev/null
  done
done
unset MOEFUSE_HOPPER_A
python3 tools/ab_summary.py $F default gather > $F/ab.md 2>&1
mark done 0 /dev/null
