#!/usr/bin/env bash
# Session 22, call W6. From the repo root, carry .deps:  O=$OUT timeout 300 bash THIS; then tar $OUT.
# What holds the K-grouped GEMM at 0.5-0.8 of its floors (W5): ncu per launch of test_gpu_wgrad
# --perf (time, tensor pipe busy, DRAM and L2 throughput, clock). Prediction: deepseek dW2 /
# dW13 launches with the tensor pipe 35-50% busy and DRAM under 50% of peak (neither bound:
# latency per unit, ~9 k-blocks with a fill and a drain each); qwen3 dW13 60-70% busy.
set -u
. tools/device_call.sh
build_device
M=gpu__time_duration.sum,sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_bytes.sum.per_second,sm__cycles_elapsed.avg.per_second,launch__grid_size
timeout 200 ncu --clock-control none --metrics $M --csv --kernel-name regex:wgrad build-device/test_gpu_wgrad --perf \
  > $O/ncu_wgrad.csv 2> $O/ncu_wgrad.err
mark "ncu wgrad" $? $O/ncu_wgrad.err
mark done 0 /dev/null
