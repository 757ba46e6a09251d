#!/usr/bin/env bash
# Session 28, call 5 (written while waiting for a machine, before calls 1-4 ran). From the repo root,
# carry .deps:
#   OPTS="MOEFUSE_FP8_SWAP_A2=epilogue ..." O=/tmp/o timeout 400 bash bench/results/2026-12-05-h200-session28/call5_tables.sh
# Issue 3's two tables (bench/run_on_device.sh, one process with every peer each), the FP8 one first,
# with the opt-ins in OPTS (those that calls 2 and 3 showed winning; bench_moe lists them in the
# JSON's notes), then bf16 with --target-s 0.1 as session 20's U4.
# Prediction: written into this header's last line before the run, from calls 2 and 3's ratios.
set -u
. tools/device_call.sh
for kv in ${OPTS:-}; do export "$kv"; done
TOTAL_S=190 OUT=$O/fp8table timeout 195 bash bench/run_on_device.sh --dtype fp8 --out $O/fp8table/bench-fp8.json \
  > $O/fp8table_run.log 2>&1; mark fp8table $? $O/fp8table_run.log
TOTAL_S=160 OUT=$O/bf16table timeout 165 bash bench/run_on_device.sh --target-s 0.1 > $O/bf16table_run.log 2>&1
mark bf16table $? $O/bf16table_run.log
mark done 0 /dev/null
