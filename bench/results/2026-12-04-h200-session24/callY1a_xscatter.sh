#!/usr/bin/env bash
# Prepared in session 23, run in session 24 as part of callY1.sh (~2 min with the build). From the repo
# root, carry .deps: O=$OUT timeout 300 bash bench/results/2026-12-04-h200-session24/callY1a_xscatter.sh
# Question: why the FP8 forward's x quantiser (quant_row128_v16_kernel<bf16, SCATTER>: x once per
# token, codes and 1x128 scales straight into plan order) runs deepseek-v3 at T = 16384 in ~635 us
# (session 21's profile), ~2.1 TB/s, where its bytes (x 235 MB read; 1.06 GB of codes and 33 MB of
# scales written, 9 plan rows a token with the fused shared expert) take ~300 us at 4.3 TB/s; qwen3
# (8 rows a token, 16 groups) runs at ~2.7 TB/s.
# Hypothesis: the scales. Each token's 56 scales go to 9 plan rows in a k-block-major array
# [group][plan row] of 37 MB: ~8.3M scattered 4-byte writes, each a partial 32-byte sector that
# L2 may evict before its neighbours arrive (written to DRAM with a read for the merge).
# Prediction (before the run): DRAM bytes written 1.3-1.6x the ideal 1.09 GB and DRAM bytes read
# 1.2-2x x's 235 MB on deepseek; on qwen3 both within 1.15x of ideal (268 MB written, 67 read).
# If so: write the scales by token (coalesced, 3.7 MB) and gather them into plan order in a second
# small pass; if the DRAM bytes are near ideal, the kernel is latency-bound instead (look at its
# occupancy and the 9-destination store loop).
set -u
. tools/device_call.sh
build_device
for m in deepseek-v3 qwen3-30b-a3b; do
  timeout 90 ncu --clock-control none --kernel-name regex:quant_row128_v16_kernel --launch-count 2 \
    --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_op_write.sum,lts__t_sectors_op_read.sum,sm__warps_active.avg.pct_of_peak_sustained_active \
    $B --shapes $m --tokens 16384 --gemm hopper --dtype fp8 > $O/ncu_xquant_$m.log 2>&1
  mark "ncu $m" $? $O/ncu_xquant_$m.log
done
mark done 0 /dev/null
