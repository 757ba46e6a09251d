#!/usr/bin/env bash
# Session 22, call W5. From the repo root, carry .deps:  O=$OUT timeout 400 bash THIS; then tar $OUT.
# The K-grouped GEMM's interior tiles with fp32 dW, beta 0 and 16-byte rows now leave through
# 4 KB of staging a consumer warp and bulk copies (wgrad_bulk_store_tile), so that a warp starts
# its next unit while its tile's 128 KB are still on the way to DRAM; MOEFUSE_WGRAD_STORE=direct
# keeps W2's aligned-pair stores for the A/B in the same call. W3 put deepseek's dW2 at 0.517 ms
# against a compute floor of 0.255 and a bytes floor of 0.253: about their sum, so the stores
# and the MMAs do not overlap now.
# Prediction: every case passes both ways (the new bulk-edges-f32 case included), memcheck and
# racecheck clean; bulk / direct TFLOP/s: deepseek dW2 1.2-1.5x, dW13 1.1-1.3x, qwen3 1.05-1.2x.
set -u
. tools/device_call.sh
build_device
W=build-device/test_gpu_wgrad
timeout 100 $W --perf > $O/wgrad_bulk_perf.log 2>&1; mark "wgrad bulk perf" $? $O/wgrad_bulk_perf.log
MOEFUSE_WGRAD_STORE=direct timeout 100 $W --perf > $O/wgrad_direct_perf.log 2>&1
mark "wgrad direct perf" $? $O/wgrad_direct_perf.log
timeout 100 $W --perf > $O/wgrad_bulk_perf2.log 2>&1; mark "wgrad bulk perf again" $? $O/wgrad_bulk_perf2.log
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 3 $W > $O/wgrad_memcheck.log 2>&1
mark "memcheck" $? $O/wgrad_memcheck.log
timeout 100 compute-sanitizer --tool racecheck --error-exitcode 3 $W > $O/wgrad_racecheck.log 2>&1
mark "racecheck" $? $O/wgrad_racecheck.log
mark done 0 /dev/null
