#!/usr/bin/env bash
# Prepared in session 18 for a later session's first call; session 19 ran its first half inside callT1.sh.
# .deps:   O=$OUT timeout 585 bash bench/results/next-session/session18_followup.sh; then tar $OUT.
# 1. The full GPU suite (new since its last full run, 79683d3: the 4-wide scatter's preloaded
#    plan rows, the 16-wide quantiser, and the plan cases with ids left out, which check row_of's
#    -1 and were only compiled in session 18), memcheck of --quick --filter fp8.
# 2. Issue 4's gates (bench/issue4_gates.sh) with everything session 18 landed.
# Prediction (before the run): (1) all pass (the suite's count grows by the left-out plan cases:
# 645 + 9 = 654), 0 errors. (2) FP8 T=16384 deepseek-v3 710-745 TFLOP/s, qwen3-30b-a3b 560-600
# (session 18 S2: 706 and 546, before the scatter and the 16-wide quantiser, which took the forward
# to ~0.99 and ~0.95 of its time in bench_gpu_forward); dense FP8 0.80-0.83x; bf16 within its
# run-to-run spread of S2; 12-14 of 29 pass.
set -u
R=$PWD; O=${O:-$PWD/probe-out}; mkdir -p $O
export LD_LIBRARY_PATH=$R/.deps/cjson/lib
t0=$SECONDS
mark() { echo "$1: rc=$2 at $((SECONDS - t0)) s; $(tail -n 1 $3 2>/dev/null)" >> $O/call.log; }
STAGES=build OUT=$O/build timeout 150 bash tests/gpu/run_on_device.sh > $O/build_stdout.log 2>&1; mark build $? $O/build_stdout.log
T=build-device/test_gpu_forward
timeout 250 $T > $O/test_full.log 2>&1; mark test_full $? $O/test_full.log
grep -c "left-out ids" $O/test_full.log >> $O/call.log
timeout 30 compute-sanitizer --tool memcheck $T --quick --filter fp8 > $O/memcheck_fp8.log 2>&1; mark memcheck_fp8 $? $O/memcheck_fp8.log
OUT=$O/gates timeout 290 bash bench/issue4_gates.sh > $O/gates_driver.log 2>&1; mark gates $? $O/gates/gates.md
mark done 0 /dev/null
