#!/usr/bin/env bash
# Prepared in session 14 for a later session's first call (not yet run). From the repo root:
#   O=$OUT bash bench/results/next-session/session14_followup.sh      (carry .deps; ~7 min)
# What session 14 left unmeasured on what landed (bench/results/2026-12-03-h200-session14/README.md):
# (1) the bf16 bench with every peer on the gather rule (moe__hopper_gather_select, the default since
#     Q6; the README's bf16 table is Q3's, before it);
# (2) racecheck of the whole --quick list with the rule as the default (Q5 ran racecheck on the tma
#     cases with gather forced, Q6 memcheck only), and the suite without --quick on --gemm hopper.
# Prediction (before any run): all pass, 0 hazards; bench speed-ups vs torch._grouped_mm at qwen3
#     T=512/4096/16384 4-13% above Q3's (1.31/1.89/2.00x -> ~1.45/2.0/2.07x), gpt-oss and deepseek
#     T=4096 4-8% above (1.50/1.39x), mixtral T=512 ~5% above; every other cell within +-3%.
set -u
O=${O:-$PWD/probe-out}; mkdir -p $O
export LD_LIBRARY_PATH=$PWD/.deps/cjson/lib
t0=$SECONDS
mark() { echo "$1: rc=$2 at $((SECONDS - t0)) s" >> $O/call.log; }
TOTAL_S=210 OUT=$O/bf16 timeout 215 bash bench/run_on_device.sh --target-s 0.1 > $O/bf16_run.log 2>&1; mark bf16 $?
mkdir -p $O/suite
STAGES=build OUT=$O/suite timeout 150 bash tests/gpu/run_on_device.sh > $O/suite/build_stdout.log 2>&1; mark build $?
timeout 150 compute-sanitizer --error-exitcode 3 --tool racecheck build-device/test_gpu_forward --quick --gemm hopper \
  > $O/suite/racecheck.log 2>&1; mark racecheck $?
timeout 150 build-device/test_gpu_forward --gemm hopper > $O/suite/full_hopper.log 2>&1; mark full_hopper $?
