#!/usr/bin/env bash
# Prepared in session 25 as call Z3 (~7 min; its run was lost: the device stopped answering and no
# machine was lent after). The landing's code. From the repo root, carry .deps:
#   O=$OUT timeout 590 bash bench/results/next-session/session25_landing_check.sh
# 1. Suite --quick (nothing in the forward changed; the build and a sanity pass).
# 2. Issue 4's gates (bench/issue4_gates.sh), with the dense FP8 engine's clusters and width rule.
# 3. compute-sanitizer racecheck of the clustered dense FP8 kernels through the lab's new --sanitize
#    mode (one launch, no fp64 reference, which made Z1's and Z2's racecheck runs time out): the
#    forced-cluster variants on 9 row blocks (an idle CTA in the last cluster), the engine at 4096^3
#    (128-wide tiles in clusters by the rule); memcheck of the same.
# Prediction (before the run): all pass, 0 hazards, 0 errors; dense FP8 8192^3 0.84-0.87 of
# per-tensor cuBLASLt and 0.93-0.96 of lt-block (Z2 medians: 0.845, 0.944); the other gates as in
# session 24's Y6 within run-to-run spread (13 of 30, qwen3's bf16 pair either way).
set -u
. tools/device_call.sh
build_device
timeout 40 $T --quick > $O/test_quick.log 2>&1; mark "suite --quick" $? $O/test_quick.log
OUT=$O/gates timeout 320 bash bench/issue4_gates.sh > $O/gates_stdout.log 2>&1; mark "gates" $? $O/gates_stdout.log
L=/tmp/moefuse-fp8lab-build/gemm_fp8_lab
timeout 60 compute-sanitizer --tool racecheck --error-exitcode 3 $L --variants fp8v8_128,fp8v8 --filter odd-rows-1100 \
  --sanitize > $O/racecheck_small.log 2>&1; mark "racecheck odd-rows-1100" $? $O/racecheck_small.log
timeout 90 compute-sanitizer --tool racecheck --error-exitcode 3 $L --variants fp8engine --filter square-4096 \
  --sanitize > $O/racecheck_4096.log 2>&1; mark "racecheck 4096 engine" $? $O/racecheck_4096.log
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 3 $L --variants fp8v8_128,fp8v8,fp8engine --filter odd-rows \
  --sanitize > $O/memcheck.log 2>&1; mark "memcheck odd-rows" $? $O/memcheck.log
mark done 0 /dev/null
