#!/usr/bin/env bash
# Written in session 34 (not run: too little device time was left to start a machine; ~40 s). From the
# repo root, carry .deps, build-device/glab and build-device/glab_nofence, both built on the CPU machine
# from the same tree (the second with -DGROUPED_LAB_PROBE_NO_GATHER_FENCE: the consumers' per-k-block
# proxy fence left out of the gathering kernels; a probe, not a correct kernel):
#   O=/tmp/o5 timeout 200 bash bench/results/<session dir>/session34_fence_probe.sh; tar czf $OUT/o5.tgz -C /tmp/o5 .
# What does the gather's consumer-side fence cost? Two processes of each binary, alternated, T = 16384,
# the gathered kernels (shipped act-first and the mainloop alone) with the permuted ones beside them.
# Prediction (before the run), nofence / base time of the gathered kernels: 0.97-1.00 (the fence runs
# while the previous k-block's wgmmas still execute); the permuted ones 1.00 +- 0.01 (identical code).
# If the fence costs >= 3%, a single publishing thread (a landed barrier polled, one fence, one arrival)
# is worth building; else the gather's gap is elsewhere.
set -u
O=${O:-/tmp/o5}
mkdir -p $O
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > $O/gpu.txt 2>&1
V=up_actfirst_gather_dyn_exp,up_actfirst_dyn_exp,up_none_gather,up_none
for i in 1 2; do
  for b in glab glab_nofence; do
    LAB_SEED=$((100 + i)) timeout 45 build-device/$b --shapes glm,qwen3,qwen3next,deepseek --tokens 16384 \
      --variants $V > $O/${b}_$i.log 2>&1
    echo "$b $i: rc=$? at $SECONDS s" >> $O/call.log
  done
done
