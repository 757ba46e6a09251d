#!/usr/bin/env bash
# Session 21, call V5 (V4 again: its build stage did not build test_gpu_wgrad; now it does). From the repo root, carry .deps:  O=$OUT timeout 585 bash THIS; then tar $OUT.
# 1. The K-grouped GEMM (new: src/cuda/hopper/wgrad_kernel.cuh, moe__hopper_wgrad; weight
#    gradients, both operands MN-major, wgmma with both transpose bits) against the CPU oracle
#    (tests/gpu/test_gpu_wgrad.c), under each of the two readings of the MN-major descriptor's
#    offsets (desc 0: LBO = the 64-column slabs' stride, SBO = the 8-row atoms'; desc 1: swapped).
#    Then the passing one with --perf, memcheck and racecheck.
#    Prediction: desc 0 correct on every case and desc 1 wrong (60%); both wrong 25%. --perf:
#    qwen3 dW2 / dW13 300-500 TFLOP/s, deepseek dW2 / dW13 450-650 (a first version: 128 x 256
#    tiles, one wgmma group in flight, no cluster, the tail rows zeroed by the consumers).
set -u
. tools/device_call.sh
build_device
W=build-device/test_gpu_wgrad
for d in 0 1; do
  timeout 45 $W --desc $d > $O/wgrad_desc$d.log 2>&1; mark "wgrad desc $d" $? $O/wgrad_desc$d.log
done
D=1; grep -q "^PASS" $O/wgrad_desc0.log && D=0
timeout 100 $W --desc $D --perf > $O/wgrad_perf.log 2>&1; mark "wgrad perf desc $D" $? $O/wgrad_perf.log
timeout 60 compute-sanitizer --tool memcheck $W --desc $D > $O/wgrad_memcheck.log 2>&1; mark "wgrad memcheck" $? $O/wgrad_memcheck.log
timeout 100 compute-sanitizer --tool racecheck $W --desc $D > $O/wgrad_racecheck.log 2>&1; mark "wgrad racecheck" $? $O/wgrad_racecheck.log
mark done 0 /dev/null
