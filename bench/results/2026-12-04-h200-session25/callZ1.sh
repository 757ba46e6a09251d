#!/usr/bin/env bash
# Session 25, call Z1 (~5 min). From the repo root, carry .deps:
#   O=$OUT timeout 560 bash bench/results/2026-12-04-h200-session25/callZ1.sh
# 1. f3d94d4's host launch path for the dense FP8 engine (persistent_launch_config + cudaLaunchKernelEx
#    always; group_m from fp8_dense_params) on the GPU for the first time: suite --quick and the full
#    suite's FP8 cases at the PERF.md shapes, memcheck of --quick.
# 2. Session 24's prepared cluster question (callZ1_cluster_part.sh, its header holds the prediction):
#    lab fp8v8 / fp8v8_128 (clusters of 2, B multicast) against fp8v6 / fp8v4u_128, two rounds, the
#    engine (fp8engine) beside them, memcheck/racecheck of fp8v8_128, ncu at 8192^3.
# Prediction (before the run) for part 1: all pass; fp8engine in the lab at 8192^3 within +-2% of
# session 24's Y4/Y6 figure (the launch change moves no kernel instruction).
set -u
. tools/device_call.sh
build_device
timeout 40 $T --quick > $O/test_quick.log 2>&1; mark "suite --quick" $? $O/test_quick.log
timeout 120 $T --perf 8,512,4096 --filter fp8 > $O/test_fp8_perf.log 2>&1; mark "suite fp8 --perf" $? $O/test_fp8_perf.log
timeout 100 compute-sanitizer --tool memcheck --leak-check no --error-exitcode 3 $T --quick > $O/memcheck.log 2>&1
mark memcheck $? $O/memcheck.log
bash bench/results/2026-12-04-h200-session25/callZ1_cluster_part.sh
