#!/usr/bin/env bash
# Prepared in session 13 for a later session's first call (not yet run). From the repo root:
#   O=$OUT bash bench/results/next-session/session13_followup.sh
# (1) The bf16 bench with every peer on GEMM1's act-first epilogue (EPI_ACT_FIRST, the default
#     since session 13; the README's bf16 table is from session 12's N1 on the staged one), alone;
# (2) test_gpu_forward --perf 512,4096 --gemm hopper with it (the --quick suite and
#     racecheck ran in session 13's P5; --perf at the PERF.md sizes has not).
# Prediction (before any run): bf16 speed-ups within +-3% of N1's table at T <= 512 (decode and
#     v1 paths are unchanged), 0-2.5% higher at T = 4096 and 16384 (P6: forward 0.976-1.007); the
#     --perf cases all pass. ~6 min.
set -u
O=${O:-$PWD/probe-out}; mkdir -p $O
export LD_LIBRARY_PATH=$PWD/.deps/cjson/lib
t0=$SECONDS
mark() { echo "$1: rc=$2 at $((SECONDS - t0)) s" >> $O/call.log; }
TOTAL_S=200 OUT=$O/bf16 timeout 205 bash bench/run_on_device.sh --target-s 0.1 > $O/bf16_run.log 2>&1; mark bf16 $?
mkdir -p $O/suite
STAGES=build OUT=$O/suite timeout 150 bash tests/gpu/run_on_device.sh > $O/suite/build_stdout.log 2>&1; mark build $?
timeout 200 build-device/test_gpu_forward --perf 512,4096 --gemm hopper > $O/suite/perf.log 2>&1
mark perf $?
