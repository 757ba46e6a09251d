#!/usr/bin/env bash
# Prepared in session 8 for a later call (not yet run): why per-tensor FP8 decode forwards are slower than
# the block-scaled ones by more than their four extra launches (session 8 J4 bench, same kernels for the
# GEMMs: mixtral-8x7b T=1 0.1863 vs 0.1314 ms, deepseek-v3 T=1 0.1549 vs 0.1304, qwen3 T=1 0.0550 vs
# 0.0418; per-tensor adds a memset, an amax pass and a quantiser pass for x and for A2).
# Prediction (before any run): the A2 amax + quantiser passes (block per plan row over I = 14336
# columns for mixtral) and the x ones take ~10 us each at T=1, and the rest of the gap is the GEMMs'
# per-tensor scale loads (every lane of the producer copying the same 4 bytes per k-block).
# ncu of the library's kernels only (the regex), inside bench_moe.py's moefuse-tensor and -block128
# rows, clocks and caches as they run. From the repo root, after `bash bench/run_on_device.sh` has
# built build-device (or with MOEFUSE_LIB set):  O=$OUT bash bench/results/next-session/fp8_tensor_decode_probe.sh
set -u
O=${O:-$PWD/probe-out}; mkdir -p $O
export MOEFUSE_LIB=${MOEFUSE_LIB:-$PWD/build-device/libmoefuse.so} PYTHONPATH=$PWD/python
K='regex:plan|quant|amax|permute|decode_fp8|grouped_fp8|combine|memset'
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum
for impl in moefuse-tensor moefuse-block128; do
  for s in mixtral-8x7b deepseek-v3; do
    timeout 35 ncu --clock-control none --cache-control none --kernel-name "$K" --launch-count 40 --metrics $M --csv \
      python3 bench/bench_moe.py --dtype fp8 --shapes $s --tokens 1 --impls $impl --min-reps 1 --target-s 0.01 \
      --out $O/ignored_${impl}_$s.json > $O/ncu_${impl}_$s.csv 2>&1
    echo "$impl $s rc=$?" >> $O/probe.log
  done
done
cd $O && tar czf probe.tgz *.csv probe.log && rm -f *.csv ignored_*.json
