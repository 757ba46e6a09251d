#!/usr/bin/env bash
# Prepared in session 21 for a later session (not yet run; ~3 min with the build). From the repo
# root, carry .deps:   O=$OUT timeout 400 bash bench/results/next-session/session21_wgrad_pingpong.sh
# The K-grouped GEMM's opt-in pingpong kernel (wgrad_kernel.cuh's wgrad_pingpong_kernel,
# MOEFUSE_WGRAD=pingpong): each consumer warpgroup owns whole 64 x 256 units, taken in turn, so that
# one stores its fp32 tile while the other multiplies; compile-checked only (168 registers, 0 spills;
# the default kernel's SASS unchanged). test_gpu_wgrad --pingpong runs every case on it. The default
# kernel runs again too (`--perf` checks every case first): since V6 its producer loop, k-block, tail
# masking and epilogue became helpers shared with the pingpong kernel, and its SASS changed (the same
# operations, reordered and renamed); predicted: still correct, the same speed within 2%.
# Prediction (before the run): correct on every case, memcheck and racecheck clean (60%; the risk
# is the turn protocol: a hang would show as the test's timeout). --perf, pingpong / default
# TFLOP/s: deepseek-v3 dW2 and dW13 (~555 rows an expert) 1.2-1.5x (V6: 252, 229); qwen3-30b-a3b
# (~1000 rows) 0.9-1.1x (V6: 362, 382), where A read twice as often per MAC may cost what the
# overlap gains. If deepseek gains >= 15% and qwen3 loses nothing beyond 3%: pingpong by default
# below a rows-per-expert bound the two shapes bracket.
set -u
. tools/device_call.sh
build_device
W=build-device/test_gpu_wgrad
timeout 60 $W --pingpong > $O/wgrad_pp.log 2>&1; mark "wgrad pingpong" $? $O/wgrad_pp.log
timeout 100 $W --pingpong --perf > $O/wgrad_pp_perf.log 2>&1; mark "wgrad pingpong perf" $? $O/wgrad_pp_perf.log
timeout 100 $W --perf > $O/wgrad_perf.log 2>&1; mark "wgrad default perf" $? $O/wgrad_perf.log
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 3 $W --pingpong > $O/wgrad_pp_memcheck.log 2>&1
mark "memcheck pingpong" $? $O/wgrad_pp_memcheck.log
timeout 100 compute-sanitizer --tool racecheck --error-exitcode 3 $W --pingpong > $O/wgrad_pp_racecheck.log 2>&1
mark "racecheck pingpong" $? $O/wgrad_pp_racecheck.log
mark done 0 /dev/null
