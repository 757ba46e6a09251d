#!/usr/bin/env bash
# Session 19, call T3. From the repo root, carry .deps:
#   O=$OUT timeout 585 bash bench/results/2026-12-04-h200-session19/callT3.sh; then tar $OUT.
# The code of T2 (the bulk-copy epilogue where K <= 2048; only comments changed since).
# 1. Issue 4's gates (bench/issue4_gates.sh), the second half of session18_followup.sh.
# 2. Issue 3's FP8 table (bench/run_on_device.sh --dtype fp8: moefuse block128 and tensor,
#    torch._scaled_grouped_mm, dense-equivalent cuBLAS, PERF.md's shapes x T 1..16384), not re-run
#    since session 12 (the README's FP8 table).
# 3. The CLI's config line, qwen3-30b-a3b fp8 at T = 64, 4096, 16384.
# Prediction (before the run): (1) FP8 T=16384 qwen3-30b-a3b 546 -> 575-610 TFLOP/s (the
# 16-wide quantiser and the scatter since session 18's gates, T2's rule 0.94), deepseek-v3 706 ->
# 700-730; dense FP8 8192^3 0.80-0.83x; bf16 gates within run-to-run spread; 12-14 of 29 pass.
# (2) moefuse block128 >= torch._scaled_grouped_mm at every T, >= 1.5x at T <= 64 (deepseek T=64
# nearest, 1.50-1.60x); T=16384 qwen3 3.8-4.2x (session 12: 3.64x).
set -u
R=$PWD; O=${O:-$OUT}; mkdir -p $O
t0=$SECONDS
mark() { echo "$1: rc=$2 at $((SECONDS - t0)) s; $(tail -n 1 $3 2>/dev/null)" >> $O/call.log; }
OUT=$O/gates timeout 330 bash bench/issue4_gates.sh > $O/gates_driver.log 2>&1; mark gates $? $O/gates/gates.md
TOTAL_S=170 OUT=$O/fp8table timeout 190 bash bench/run_on_device.sh --dtype fp8 --out $O/fp8table/bench-fp8.json \
  > $O/fp8table_run.log 2>&1; mark fp8table $? $O/fp8table_run.log
export LD_LIBRARY_PATH=$R/.deps/cjson/lib
timeout 60 cmake --build build-device -j 16 --target moefuse_cli > $O/cli_build.log 2>&1
CLI=$(ls build-device/moefuse 2>/dev/null || find build-device -maxdepth 2 -name moefuse -type f | head -1)
for t in 64 4096 16384; do timeout 20 $CLI run --model qwen3-30b-a3b --dtype fp8 --tokens $t --print-config >> $O/config_lines.log 2>&1; done
mark done 0 /dev/null
