#!/usr/bin/env bash
# Session 29, call 6. From the repo root, carry .deps:
#   O=/tmp/o6 timeout 400 bash bench/results/2026-12-05-h200-session29/call6_sanitizers.sh
# The whole GPU suite (--quick) under memcheck and then racecheck, with this session's fixes in
# (the FP8 swapped kernel's and the FP8 scale ring's all-lane releases): issues 3 and 4 ask for the
# suite clean under both.
# Prediction (before the run): memcheck 0 errors; racecheck 0 hazards (call 4: 0 on every FP8 case;
# the bf16 kernels had none in session 28's runs).
set -u
. tools/device_call.sh
build_device
timeout 100 compute-sanitizer --tool memcheck --error-exitcode 3 $T --quick > $O/memcheck_quick.log 2>&1
mark "memcheck --quick" $? $O/memcheck_quick.log
left=$((385 - (SECONDS - call_t0)))
timeout $left compute-sanitizer --tool racecheck --error-exitcode 3 $T --quick > $O/racecheck_quick.log 2>&1
mark "racecheck --quick" $? $O/racecheck_quick.log
mark done 0 /dev/null
