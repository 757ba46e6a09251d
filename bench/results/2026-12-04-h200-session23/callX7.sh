#!/usr/bin/env bash
# Session 23, call X7 (the session's final device code). From the repo root, carry .deps:
#   O=$OUT timeout 250 bash bench/results/2026-12-04-h200-session23/callX7.sh; then tar $OUT.
# The GPU suite's sanitizer stages on the landed tree (the staged epilogue's rows, SiLU's ex2.ftz,
# the A2 quantiser's items across rows): memcheck of the --quick list (every preset, both GEMM
# paths, bf16 and FP8), racecheck of a fused-shared preset and relu2-bias (RELU2 takes the staged
# epilogue on both GEMMs), as tests/gpu/run_on_device.sh runs them.
# Prediction: 0 errors, 0 hazards.
set -u
. tools/device_call.sh
build_device
timeout 30 $T --quick > $O/test_quick.log 2>&1; mark "suite --quick" $? $O/test_quick.log
timeout 100 compute-sanitizer --tool memcheck --leak-check no --error-exitcode 3 $T --quick > $O/memcheck.log 2>&1
mark memcheck $? $O/memcheck.log
timeout 75 bash -c "compute-sanitizer --tool racecheck --error-exitcode 3 $T --quick --filter deepseek-v3-small && \
  compute-sanitizer --tool racecheck --error-exitcode 3 $T --filter relu2-bias" > $O/racecheck.log 2>&1
mark racecheck $? $O/racecheck.log
mark done 0 /dev/null
