#!/usr/bin/env bash
# Session 21, call V4. From the repo root, carry .deps:  O=$OUT timeout 585 bash THIS; then tar $OUT.
# 1. The K-grouped GEMM (new: src/cuda/hopper/wgrad_kernel.cuh, moe__hopper_wgrad; weight
#    gradients, both operands MN-major, wgmma with both transpose bits) against the CPU oracle
#    (tests/gpu/test_gpu_wgrad.c), under each of the two readings of the MN-major descriptor's
#    offsets (desc 0: LBO = the 64-column slabs' stride, SBO = the 8-row atoms'; desc 1: swapped).
#    Then the passing one with --perf, memcheck and racecheck.
#    Prediction: desc 0 correct on every case and desc 1 wrong (60%); both wrong 25%. --perf:
#    qwen3 dW2 / dW13 300-500 TFLOP/s, deepseek dW2 / dW13 450-650 (a first version: 128 x 256
#    tiles, one wgmma group in flight, no cluster, the tail rows zeroed by the consumers).
# 2. The GPU suite --quick after this session's removals (ROW_TMA, CLUSTER_M; SASS unchanged).
# 3. The dense FP8 lab with lt-block (weight scale rows padded to 4 k-blocks: do the tails shapes
#    pass now? 50%), then ncu of square-8192 (--check-only: one launch each): cuBLASLt's kernel
#    names (tile, cluster), grid, registers, tensor pipe share against our engine's.
set -u
. tools/device_call.sh
build_device
W=build-device/test_gpu_wgrad
for d in 0 1; do
  timeout 90 $W --desc $d > $O/wgrad_desc$d.log 2>&1; mark "wgrad desc $d" $? $O/wgrad_desc$d.log
done
D=1; grep -q "^PASS" $O/wgrad_desc0.log && D=0
timeout 150 $W --desc $D --perf > $O/wgrad_perf.log 2>&1; mark "wgrad perf desc $D" $? $O/wgrad_perf.log
timeout 90 compute-sanitizer --tool memcheck $W --desc $D > $O/wgrad_memcheck.log 2>&1; mark "wgrad memcheck" $? $O/wgrad_memcheck.log
timeout 150 compute-sanitizer --tool racecheck $W --desc $D > $O/wgrad_racecheck.log 2>&1; mark "wgrad racecheck" $? $O/wgrad_racecheck.log
timeout 60 $T --quick > $O/quick.log 2>&1; mark "suite quick" $? $O/quick.log
OUT=$O/lab VARIANTS=fp8engine LAB_LIMIT=60 timeout 100 bash lab/run_fp8_on_device.sh > $O/lab_stdout.log 2>&1
mark "fp8 lab" $? $O/lab_stdout.log
M=gpu__time_duration.sum,sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active,launch__grid_size,launch__cluster_dim_x,launch__cluster_dim_y,launch__registers_per_thread,launch__shared_mem_per_block_dynamic,sm__cycles_elapsed.avg.per_second,lts__t_bytes.sum.per_second
timeout 90 ncu --clock-control none --kernel-name regex:"nvjet|fp8_gemm|sm90" --metrics $M --csv \
  /tmp/moefuse-fp8lab-build/gemm_fp8_lab --variants fp8engine --filter square-8192 --check-only > $O/ncu_fp8_8192.csv 2>&1
mark "ncu fp8 8192" $? $O/ncu_fp8_8192.csv
mark done 0 /dev/null
