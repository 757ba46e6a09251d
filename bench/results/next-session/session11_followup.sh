#!/usr/bin/env bash
# Prepared in session 11 for the next session's first call (not yet run). From the repo root:
#   O=$OUT bash bench/results/next-session/session11_followup.sh
# (1) The bf16 bench with every peer on the ticket-counter schedule (b062fef; M1's tables predate
#     it), then the FP8 one (unchanged kernels: a second single run of all shapes), each alone;
# (2) roofline --measure on it (measure.cu now hands the bf16 tiled launches a ticket counter, as
#     the forward does: its first GPU run).
# Prediction (before any run): bf16 T >= 4096 deepseek 2-3% faster than M1 (1.31/1.43x ->
#     ~1.35/1.47x), mixtral 1-2%, qwen3 and gpt-oss within +-1.5%; T <= 64 unchanged (decode
#     kernels); FP8 as M1 within noise. measure: rc 0, grouped bf16 launches at T=4096 deepseek
#     ~3-6% faster than run 12 (1.26 -> ~1.20 of the model). ~9 min.
set -u
O=${O:-$PWD/probe-out}; mkdir -p $O
export LD_LIBRARY_PATH=$PWD/.deps/cjson/lib
t0=$SECONDS
mark() { echo "$1: rc=$2 at $((SECONDS - t0)) s" >> $O/call.log; }
TOTAL_S=200 OUT=$O/bf16 timeout 205 bash bench/run_on_device.sh --target-s 0.1 > $O/bf16_run.log 2>&1; mark bf16 $?
TOTAL_S=190 OUT=$O/fp8 timeout 195 bash bench/run_on_device.sh --dtype fp8 --target-s 0.1 > $O/fp8_run.log 2>&1; mark fp8 $?
left=$((560 - (SECONDS - t0))); [ $left -gt 120 ] && left=120
mkdir -p $O/measure
OUT=$O/measure STAGES="build measure" DEADLINE=$left timeout $((left + 10)) bash tests/gpu/measure_on_device.sh \
  > $O/measure/stdout.log 2>&1; mark measure $?
