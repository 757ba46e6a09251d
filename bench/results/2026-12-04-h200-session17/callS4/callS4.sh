#!/usr/bin/env bash
# Device call S4 (session 17): the dense FP8 engine with TMA scales on its 192-wide tiles (commit
# "FP8 dense engine: 192-wide tiles take their scales by TMA"), through the library entry
# (fp8engine), beside fp8v3 (the ring at 192), fp8v1 (the ring at 128, what the engine keeps on
# small outputs) and fp8v4_128 (TMA at 128), one lab round; each variant checked against the
# f64 reference. No build of the suite: the forward's code is as in S3.
# Prediction (before the run): fp8engine correct everywhere; 8192^3 0.79-0.83x cuBLASLt,
# 4096^3 0.68-0.71, deepseek x16 shapes 0.66-0.68 / 0.58-0.61 (= fp8v4 in S3); the one-expert
# and tails shapes as fp8v1 (the 128-wide ring); fp8v4_128 / fp8v1 time on deepseek-v3's
# one-expert GEMM2 1.05-1.15 (S3 against S2: 1.14), on the square shapes 0.86-0.93.
set -u
O=$OUT
t0=$SECONDS
VARIANTS="fp8engine fp8v3 fp8v1 fp8v4_128" LAB_LIMIT=60 OUT=$O/lab timeout 240 bash lab/run_fp8_on_device.sh > $O/lab.log 2>&1
echo "lab: rc=$? at $((SECONDS - t0)) s" >> $O/call.log
