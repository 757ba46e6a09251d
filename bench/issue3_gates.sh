#!/usr/bin/env bash
# Issue 3's must-show tables from one run on the GPU machine (the lent H200), ~9 minutes:
#
#   OUT=/some/dir bash bench/issue3_gates.sh       (carry .deps when the machine lacks cJSON)
#
# 1. bench_moe FP8 on PERF.md's four shapes at every T of the issue with every peer, one process
#    (bench/run_on_device.sh, PERF.md's protocol); FP8_S seconds (default 300).
# 2. bench_moe bf16 the same, --target-s 0.1, in what is left of ALL_S seconds (default 570).
# 3. tools/issue3_gates.py over both JSONs -> $OUT/issue3_gates.json, $OUT/issue3_gates.md.
# Each step's exit status and time go to $OUT/gates.log.
set -u
cd "$(dirname "$0")/.." || exit 1
OUT=${OUT:-$PWD/issue3-out}
mkdir -p "$OUT"
t0=$SECONDS
mark() { echo "$1: rc=$2 at $((SECONDS - t0)) s" | tee -a "$OUT/gates.log"; }
fp8_s=${FP8_S:-300}
all_s=${ALL_S:-570}
TOTAL_S=$fp8_s OUT=$OUT/fp8table timeout $((fp8_s + 5)) bash bench/run_on_device.sh --dtype fp8 \
    --out "$OUT/fp8table/bench-fp8.json" >"$OUT/fp8table_run.log" 2>&1
mark fp8table $?
bf16_s=$((all_s - (SECONDS - t0)))
TOTAL_S=$bf16_s OUT=$OUT/bf16table timeout "$bf16_s" bash bench/run_on_device.sh --target-s 0.1 \
    --out "$OUT/bf16table/bench-bf16.json" >"$OUT/bf16table_run.log" 2>&1
mark bf16table $?
python3 tools/issue3_gates.py "$OUT/bf16table/bench-bf16.json" "$OUT/fp8table/bench-fp8.json" \
    --out "$OUT/issue3_gates.json" --md "$OUT/issue3_gates.md" >"$OUT/issue3_gates.log" 2>&1
mark gates $?
