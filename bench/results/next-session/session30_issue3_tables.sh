#!/usr/bin/env bash
# Prepared in session 30 (not yet run; ~5 min). From the repo root, carry .deps (move it into the
# session's results directory first; run it after session30_interleaved.sh):
#   O=/tmp/oN timeout 585 bash bench/results/<session dir>/session30_issue3_tables.sh
# Issue 3's two tables with every peer, each from one process (as session 29's call 5), now with
# bench_moe's interleaved timing (--rounds 3, the default): FP8 first, then bf16 with --target-s 0.1;
# then tools/issue3_gates.py over both JSONs.
# Prediction (before the run): the cells that passed by a small margin under the old order
# (moefuse first) may move by a few percent toward their peers: gpt-oss-120b bf16 T=64 (1.501x),
# FP8 deepseek-v3 T=64 (1.512x). Decode cells (memory-bound) move less than prefill cells. bf16
# deepseek-v3 T=64 still misses (at the memory floor).
set -u
. tools/device_call.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > $O/gpu.txt 2>&1
TOTAL_S=300 OUT=$O/fp8table timeout 305 bash bench/run_on_device.sh --dtype fp8 --out $O/fp8table/bench-fp8.json \
  > $O/fp8table_run.log 2>&1; mark fp8table $? $O/fp8table_run.log
left=$((570 - (SECONDS - call_t0)))
TOTAL_S=$left OUT=$O/bf16table timeout $left bash bench/run_on_device.sh --target-s 0.1 --out $O/bf16table/bench-bf16.json \
  > $O/bf16table_run.log 2>&1; mark bf16table $? $O/bf16table_run.log
python3 tools/issue3_gates.py $O/bf16table/bench-bf16.json $O/fp8table/bench-fp8.json --out $O/issue3_gates.json \
  --md $O/issue3_gates.md > $O/issue3_gates.log 2>&1; mark gates $? $O/issue3_gates.log
mark done 0 /dev/null
