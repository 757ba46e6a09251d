#!/usr/bin/env bash
# Device call S7 (session 16): issue 4's gates (bench/issue4_gates.sh) with the bf16 expert raster
# as the default (FP8 keeps the grouped raster over all blocks: S6 found it neutral there), then
# the GPU suite --quick on the same build (test_gpu_forward added to the gates' build directory).
# Prediction (before the run): against S3 (same script, before the raster): bf16 T=16384
# deepseek-v3 moefuse/dense-equiv 1.28 -> 1.22-1.28 (S6: 0.992 of the old time), gpt-oss-120b
# 1.13 -> 1.05-1.10, the rest within run-to-run spread (qwen3 moved 0.14 between R3 and S3);
# T=4096 vs v1: deepseek 1.66 -> 1.85-1.95; FP8 unchanged within spread; 11-13 of 29 gates pass.
# --quick: 209 passed. Carry .deps.
set -u
R=$PWD; O=$OUT
OUT=$O/gates timeout 420 bash bench/issue4_gates.sh > $O/gates_driver.log 2>&1
echo "issue4_gates rc=$?" >> $O/gates_driver.log
export LD_LIBRARY_PATH=$R/.deps/cjson/lib
timeout 60 cmake --build build-device -j 16 --target test_gpu_forward > $O/test_build.log 2>&1
timeout 60 build-device/test_gpu_forward --quick > $O/test_quick.log 2>&1
echo "test_quick rc=$?; $(tail -n 1 $O/test_quick.log)" >> $O/gates_driver.log
cd $O && tar czf callS7.tgz gates gates_driver.log test_quick.log && rm -rf gates
