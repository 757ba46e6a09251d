#!/usr/bin/env bash
# Device call S5 (session 17): the dense FP8 engine with TMA scales on both widths (commit "FP8
# dense engine: 128-wide tiles take TMA scales too", from S4's same-run fp8v4_128 / fp8v1: 5-23%
# faster but on deepseek-v3's one-expert GEMM2, 2% slower), through the library entry, beside
# fp8v1; each checked against the f64 reference.
# Prediction (before the run): fp8engine correct on all 8 shapes; 8192^3 0.79-0.82x cuBLASLt,
# 4096^3 0.60-0.71 (192 wide), one-expert shapes as fp8v4_128 in S4 (GEMM1 0.69-0.71, GEMM2
# 0.55-0.58), the tails shapes (lds 9: no TMA scales) as fp8v1 (0.70-0.75).
set -u
O=$OUT
t0=$SECONDS
VARIANTS="fp8engine fp8v1" LAB_LIMIT=60 OUT=$O/lab timeout 150 bash lab/run_fp8_on_device.sh > $O/lab.log 2>&1
echo "lab: rc=$? at $((SECONDS - t0)) s" >> $O/call.log
