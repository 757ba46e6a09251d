#!/usr/bin/env bash
# Session 18, call S2: issue 4's gates (bench/issue4_gates.sh) with the FP8 grouped GEMMs on 128 x 192
# tiles by default (04db596), then the GPU suite --quick, --quick --filter fp8 with the 128-wide ring
# forced (MOEFUSE_HOPPER_FP8_BN=128), memcheck on --quick --filter fp8, and the CLI's config line
# for qwen3-30b-a3b fp8 at T = 1, 64, 4096, 16384. Carry .deps.
# Prediction (before the run), against session 16 S7 (the last gates run): FP8 T=16384 deepseek-v3
# 643 -> 690-730 TFLOP/s, qwen3-30b-a3b 490 -> 500-540 (S1: forward 192/ring 0.916 and 0.957, and
# session 17's vector quantiser); FP8 dense 8192^3 0.683 -> 0.78-0.82 of cuBLASLt (session 17 S5:
# 0.804); bf16 gates within run-to-run spread of S7 (no bf16 change since); 14-15 of 29 pass.
# --quick all pass (237), fp8 with 128 forced all pass, memcheck 0 errors; the config line names
# 128x192 tiles for both GEMMs at T = 4096 and 16384, the decode kernel at T = 1, 64.
set -u
R=$PWD; O=$OUT
OUT=$O/gates timeout 400 bash bench/issue4_gates.sh > $O/gates_driver.log 2>&1
echo "issue4_gates rc=$?" >> $O/gates_driver.log
export LD_LIBRARY_PATH=$R/.deps/cjson/lib
timeout 90 cmake --build build-device -j 16 --target test_gpu_forward moefuse_cli > $O/test_build.log 2>&1
echo "test build rc=$?" >> $O/gates_driver.log
T=build-device/test_gpu_forward
timeout 60 $T --quick > $O/test_quick.log 2>&1
echo "test_quick rc=$?; $(tail -n 1 $O/test_quick.log)" >> $O/gates_driver.log
MOEFUSE_HOPPER_FP8_BN=128 timeout 60 $T --quick --filter fp8 > $O/test_quick_fp8_bn128.log 2>&1
echo "test_quick fp8 BN=128 rc=$?; $(tail -n 1 $O/test_quick_fp8_bn128.log)" >> $O/gates_driver.log
timeout 90 compute-sanitizer --tool memcheck $T --quick --filter fp8 > $O/memcheck_fp8.log 2>&1
echo "memcheck fp8 rc=$?; $(tail -n 1 $O/memcheck_fp8.log)" >> $O/gates_driver.log
CLI=$(ls build-device/moefuse 2>/dev/null || find build-device -maxdepth 2 -name moefuse -type f | head -1)
for t in 1 64 4096 16384; do
  timeout 30 $CLI run --model qwen3-30b-a3b --dtype fp8 --tokens $t --print-config >> $O/config_lines.log 2>&1
done
echo "config lines rc=$?" >> $O/gates_driver.log
cd $O && tar czf /tmp/all.tgz . && mv /tmp/all.tgz .
