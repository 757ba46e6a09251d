#!/usr/bin/env bash
# Session 22, call W3. From the repo root, carry .deps:  O=$OUT timeout 585 bash THIS; then tar $OUT.
# 1. Issue 4's gates (bash bench/issue4_gates.sh) on the tree with the interior stores (dense bf16 and
#    FP8 kernels changed; grouped kernels unchanged). Prediction: 13 of 30 pass as in V6; dense bf16
#    8192^3 0.94-0.96 (miss), FP8 0.80 vs per-tensor cuBLASLt and 0.85-0.87 vs lt-block; FP8 T=16384
#    deepseek 700-740, qwen3 560-600 TFLOP/s.
# 2. The K-grouped GEMM's --perf again (a second run of W2's figures: 527 / 576 / 373 / 444 within 5%).
# 3. ncu stall samples of the FP8 engine at 8192^3 after the interior stores: the epilogue's share
#    (W1: 9.3% of samples) predicted 3-5%, the wgmma wait's (W1: 25%) 26-30%.
set -u
. tools/device_call.sh
build_device
timeout 100 build-device/test_gpu_wgrad --perf > $O/wgrad_perf.log 2>&1; mark "wgrad perf" $? $O/wgrad_perf.log
OUT=$O/gates timeout 330 bash bench/issue4_gates.sh > $O/gates_stdout.log 2>&1; mark "gates" $? $O/gates_stdout.log
OUT=$O/lab VARIANTS="fp8engine" QUICK=1 LAB_LIMIT=40 timeout 90 bash lab/run_fp8_on_device.sh > $O/lab_stdout.log 2>&1
mark "fp8 lab build" $? $O/lab_stdout.log
L=/tmp/moefuse-fp8lab-build/gemm_fp8_lab
timeout 60 ncu --clock-control none --section SourceCounters --section WarpStateStats --import-source no \
  --kernel-name regex:fp8_gemm --launch-count 1 -o $O/fp8engine $L --variants fp8engine --filter square-8192 --check-only \
  > $O/ncu_fp8engine.log 2>&1
ncu --import $O/fp8engine.ncu-rep --page source --csv --print-source sass > $O/fp8engine_sass.csv 2>> $O/ncu_fp8engine.log
python3 tools/ncu_stalls.py $O/fp8engine_sass.csv > $O/fp8engine_stalls.md 2>&1; mark "stalls" $? $O/fp8engine_stalls.md
rm -f $O/fp8engine.ncu-rep
mark done 0 /dev/null
