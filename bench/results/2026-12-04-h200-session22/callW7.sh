#!/usr/bin/env bash
# Session 22, call W7. From the repo root, carry .deps:  O=$OUT timeout 250 bash THIS; then tar $OUT.
# W6: the K-grouped GEMM moves 7.2-8.9 TB/s through L2 with the tensor pipe 48-63% busy. Now in
# clusters of 2 by default: the CTAs of a cluster take adjacent 128-row tiles of one expert and
# column block, each loads its own G slabs and two of the four A slabs, multicast to both (0.0156
# instead of 0.0234 bytes per MAC from L2); MOEFUSE_WGRAD_CLUSTER=1 runs the kernel of W5 (SASS
# identical) for the A/B. New and never run: a hang would show as a timeout.
# Prediction: correct on every case (the odd tile counts too: N = 384 and 128 leave the last
# cluster's second CTA past n), memcheck clean; cluster 2 / cluster 1 TFLOP/s: qwen3 1.10-1.25x,
# deepseek 1.05-1.20x.
set -u
. tools/device_call.sh
build_device
W=build-device/test_gpu_wgrad
left() { echo $((240 - (SECONDS - call_t0))); }
timeout 40 $W > $O/wgrad.log 2>&1; mark "wgrad cluster 2" $? $O/wgrad.log
timeout 70 $W --perf > $O/wgrad_c2_perf.log 2>&1; mark "wgrad cluster 2 perf" $? $O/wgrad_c2_perf.log
MOEFUSE_WGRAD_CLUSTER=1 timeout 70 $W --perf > $O/wgrad_c1_perf.log 2>&1; mark "wgrad cluster 1 perf" $? $O/wgrad_c1_perf.log
[ "$(left)" -gt 30 ] && { timeout $(( $(left) - 5 )) compute-sanitizer --tool memcheck --error-exitcode 3 $W \
  > $O/wgrad_memcheck.log 2>&1; mark "memcheck" $? $O/wgrad_memcheck.log; }
mark done 0 /dev/null
