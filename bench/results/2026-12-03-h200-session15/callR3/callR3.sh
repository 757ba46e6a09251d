#!/usr/bin/env bash
# Device call R3 (session 15): bench/issue4_gates.sh, issue 4's must-show gates in one run
# (bf16 and FP8 bench_moe with the peers on PERF.md's shapes and the four untuned ones, the dense
# labs at 8192^3), evaluated by tools/issue4_gates.py. Results tarred.
# Prediction (before the run, from calls R1/R2 and session 12's FP8 run): passes only the bf16
# dense gate (0.93-0.98 of cuBLAS at 8192^3) and dense-equivalent time on mixtral (0.95-1.05) and
# the v1 gates at T=4096 (1.8-2.6x on all eight shapes); qwen3 T=16384 430-490 TFLOP/s; vs
# torch._grouped_mm at 16384 1.1-2.2x (< 2.4 everywhere); dense-equiv ratio 1.1-1.25 elsewhere;
# FP8 T=16384 deepseek 600-680 TFLOP/s, qwen3 480-560; FP8 dense 0.6-0.7 of cuBLASLt. Untuned shapes:
# dense-equiv ratio 1.05-1.3, vs grouped_mm 1.2-2.3x.
set -u
R=$PWD; O=$OUT
OUT=$O/gates timeout 580 bash $R/bench/issue4_gates.sh > $O/gates_driver.log 2>&1
echo "issue4_gates rc=$?" >> $O/gates_driver.log
cd $O && tar czf callR3.tgz gates gates_driver.log 2>/dev/null; rm -rf gates
