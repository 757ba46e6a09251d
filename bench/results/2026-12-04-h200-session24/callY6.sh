#!/usr/bin/env bash
# Session 24, call Y6 (~7 min), the landing's code. From the repo root, carry .deps:
#   O=$OUT timeout 590 bash bench/results/2026-12-04-h200-session24/callY6.sh
# 1. Suite --quick; compute-sanitizer memcheck of --quick and of the K-grouped test; racecheck of
#    deepseek-v3-small --quick and relu2-bias (every wgmma kernel's consumer index changed form).
# 2. Issue 4's gates (bench/issue4_gates.sh).
# Prediction (before the run): all pass, 0 errors, 0 hazards; the dense FP8 engine at 8192^3 0.82-0.86 of
# per-tensor cuBLASLt (0.793 in session 23) and 0.88-0.93 of cuBLASLt on the same block-scaled operands
# (0.871); FP8 T=16384 deepseek-v3 735-775, qwen3 605-640 TFLOP/s; 14-16 of 30 gates.
set -u
. tools/device_call.sh
build_device
timeout 30 $T --quick > $O/test_quick.log 2>&1; mark "suite --quick" $? $O/test_quick.log
timeout 100 compute-sanitizer --tool memcheck --leak-check no --error-exitcode 3 $T --quick > $O/memcheck.log 2>&1
mark memcheck $? $O/memcheck.log
timeout 60 compute-sanitizer --tool memcheck --leak-check no --error-exitcode 3 build-device/test_gpu_wgrad > $O/memcheck_wgrad.log 2>&1
mark "memcheck wgrad" $? $O/memcheck_wgrad.log
timeout 75 bash -c "compute-sanitizer --tool racecheck --error-exitcode 3 $T --quick --filter deepseek-v3-small && \
  compute-sanitizer --tool racecheck --error-exitcode 3 $T --filter relu2-bias" > $O/racecheck.log 2>&1
mark racecheck $? $O/racecheck.log
OUT=$O/gates timeout 300 bash bench/issue4_gates.sh > $O/gates_stdout.log 2>&1; mark "gates" $? $O/gates_stdout.log
mark done 0 /dev/null
