#!/usr/bin/env bash
# Session 20, call U4. From the repo root, carry .deps:
#   O=$OUT timeout 585 bash bench/results/2026-12-04-h200-session20/callU4.sh; then tar $OUT.
# Issue 4's gates (bench/issue4_gates.sh) with this session's defaults (bf16 GEMM2's bulk-copy
# epilogue where K <= 2048; FP8 tickets + the expert walk where H * I >= 7 MiB), then issue 3's two
# tables (bench/run_on_device.sh: bf16 with --target-s 0.1 as session 15's R1, and --dtype fp8 as
# session 19's T3), each from one process with every peer.
# Prediction (before the run): gates 13-15 of 29: bf16 qwen3-30b-a3b time / dense 1.10-1.15 (1.169 in
# session 19's run), qwen3 T=16384 470-500 TFLOP/s (462); FP8 deepseek-v3 710-740 (701), qwen3
# 600-625 (610); the dense ratios unchanged within run-to-run spread (no dense change). bf16 table:
# T <= 64 as session 15's (decode paths unchanged; deepseek T=64 ~1.36x), qwen3 T=4096/16384 2.2-2.4x;
# FP8 table: T <= 512 as session 19's, deepseek/gpt-oss T=4096 a few % higher.
set -u
R=$PWD; O=${O:-$OUT}; mkdir -p $O
t0=$SECONDS
mark() { echo "$1: rc=$2 at $((SECONDS - t0)) s; $(tail -n 1 $3 2>/dev/null)" >> $O/call.log; }
OUT=$O/gates timeout 330 bash bench/issue4_gates.sh > $O/gates_driver.log 2>&1; mark gates $? $O/gates/gates.md
TOTAL_S=160 OUT=$O/bf16table timeout 165 bash bench/run_on_device.sh --target-s 0.1 > $O/bf16table_run.log 2>&1
mark bf16table $? $O/bf16table_run.log
left=$((575 - (SECONDS - t0)))
TOTAL_S=$left OUT=$O/fp8table timeout $left bash bench/run_on_device.sh --dtype fp8 --out $O/fp8table/bench-fp8.json \
  > $O/fp8table_run.log 2>&1; mark fp8table $? $O/fp8table_run.log
mark done 0 /dev/null
