#!/usr/bin/env bash
# Prepared in session 30 (not yet run; ~5 min). From the repo root, carry .deps (move it into the
# session's results directory first; run it after session30_interleaved.sh):
#   O=/tmp/oN timeout 570 bash bench/results/<session dir>/session30_issue3_tables.sh; tar czf $OUT/oN.tgz -C /tmp/oN .
# Issue 3's two tables with every peer, each from one process (as session 29's call 5), now with
# bench_moe's interleaved timing (--rounds 3, the default): FP8 first, then bf16 with --target-s 0.1;
# then tools/issue3_gates.py over both JSONs (bench/issue3_gates.sh, since session 31).
# Prediction (before the run): the cells that passed by a small margin under the old order
# (moefuse first) may move by a few percent toward their peers: gpt-oss-120b bf16 T=64 (1.501x),
# FP8 deepseek-v3 T=64 (1.512x). Decode cells (memory-bound) move less than prefill cells. bf16
# deepseek-v3 T=64 still misses (at the memory floor).
set -u
. tools/device_call.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > $O/gpu.txt 2>&1
left=$((555 - (SECONDS - call_t0)))
FP8_S=300 ALL_S=$left OUT=$O timeout $((left + 10)) bash bench/issue3_gates.sh > $O/issue3_stdout.log 2>&1
mark "issue 3 tables (bench/issue3_gates.sh)" $? $O/gates.log
mark done 0 /dev/null
