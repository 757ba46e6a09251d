#!/usr/bin/env bash
# Session 24, call Y5 (~6 min). From the repo root, carry .deps: O=$OUT timeout 590 bash bench/results/2026-12-04-h200-session24/callY5.sh
# Y4: the warp-uniform warpgroup index alone (lane 0's, by __shfl_sync: ptxas then keeps the descriptors'
# arithmetic in uniform registers) made the dense 128-wide FP8 kernel 8-14% faster. callY5_uniform.patch gives
# every wgmma kernel of the engine that index (consumer_half(): the bf16 dense and grouped kernels, the grouped
# FP8 kernel, the FP8 decode kernel, the K-grouped kernel; 8-176 fewer SASS instructions each, no new spills)
# and the dense FP8 engine's 128-wide configurations the old order with it (ISSUE_THEN_WAIT_U). The base tree is
# this one with the patch reversed.
# 1. Suite --quick, the K-grouped test, the dense FP8 lab's engine (every shape checked, tails on the ring).
# 2. Labs base / new, two rounds: grouped FP8 (192 and 128-wide tickets), grouped bf16 (the library's
#    variants), dense bf16 (engine vs cuBLAS).
# 3. Forward base / new, bf16 and FP8, T = 64, 512, 4096, 16384, 3 alternated rounds.
# Prediction (before the run): new / base time 0.90-0.97 on the grouped 128-wide FP8 and the bf16 grouped GEMMs,
# 0.97-1.01 on the 192-wide FP8 ones (Y3/Y4 had the index in both arms' losers: it did not rescue them); bf16 dense
# 0.97-1.00; forward base / new 1.00-1.05, most at T = 512 (128-wide FP8 tiles) and in bf16.
set -u
. tools/device_call.sh
D=bench/results/2026-12-04-h200-session24
rm -rf /tmp/base && mkdir -p /tmp/base && tar --exclude=./build-device --exclude=./bench/results -cf - . | tar -xf - -C /tmp/base
(cd /tmp/base && patch -R -p1 < "$R/$D/callY5_uniform.patch") > $O/base_patch.log 2>&1
mark "base tree" $? $O/base_patch.log
F=(-std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -lineinfo -Xptxas -v -Iinclude -Isrc/core -Isrc/cuda -Isrc/cuda/hopper -Ilab)
(cd /tmp/base && nvcc "${F[@]}" -o /tmp/lab_base lab/grouped_lab.cu) > $O/build_lab_base.log 2>&1 &
nvcc "${F[@]}" -o /tmp/lab_new lab/grouped_lab.cu > $O/build_lab_new.log 2>&1 &
(cd /tmp/base && cmake -S . -B build-base -DCMAKE_BUILD_TYPE=Release -DMOEFUSE_CUDA=ON -DCJSON_INCLUDE_DIR=$R/.deps/cjson/include \
   -DCJSON_LIBRARY=$R/.deps/cjson/lib/libcjson.so && cmake --build build-base -j 4 --target bench_gpu_forward) > $O/build_base.log 2>&1 &
(cd /tmp/base && LAB_BUILD=/tmp/l16_base OUT=$O/l16_base VARIANTS=engine LAB_LIMIT=1 bash lab/run_on_device.sh) > $O/l16_base_build.log 2>&1 &
(LAB_BUILD=/tmp/l16_new OUT=$O/l16_new VARIANTS=engine LAB_LIMIT=1 bash lab/run_on_device.sh) > $O/l16_new_build.log 2>&1 &
build_device
wait
mark "base + lab builds" $? $O/build_base.log
BB=/tmp/base/build-base/bench_gpu_forward
timeout 70 $T --quick > $O/test_quick.log 2>&1; mark "suite --quick" $? $O/test_quick.log
timeout 60 build-device/test_gpu_wgrad > $O/test_gpu_wgrad.log 2>&1; mark "wgrad" $? $O/test_gpu_wgrad.log
OUT=$O/dense8 VARIANTS="fp8engine" LAB_LIMIT=60 timeout 150 bash lab/run_fp8_on_device.sh > $O/dense8_stdout.log 2>&1
mark "dense fp8 lab" $? $O/dense8/lab_fp8engine.log
CHK=chk-swiglu-limit,chk-geglu,chk-geglu-tanh,chk-reglu,chk-relu2,chk-oai
V8=fp8_up_192,fp8_up_192_bulk,fp8_down_192_b16,fp8_down_192_bulk,fp8_up_192_none,fp8_up_dyn,fp8_down_dyn
V16=up_actfirst_dyn,up_actfirst_gather_dyn,down_dyn_b16,down_bulk,up_bn240,down_bulk_bn240
for r in 1 2; do
  for a in base new; do
    timeout 100 /tmp/lab_$a --fp8 --shapes qwen3,gptoss,mixtral,deepseek,$CHK --variants $V8 > $O/glab8_${a}_$r.log 2>&1
    mark "grouped fp8 lab $a $r" $? $O/glab8_${a}_$r.log
    timeout 100 /tmp/lab_$a --shapes qwen3,gptoss,mixtral,deepseek,$CHK --variants $V16 > $O/glab16_${a}_$r.log 2>&1
    mark "grouped bf16 lab $a $r" $? $O/glab16_${a}_$r.log
    timeout 60 /tmp/l16_$a/gemm_lab --variants engine > $O/dense16_${a}_$r.log 2>&1
    mark "dense bf16 lab $a $r" $? $O/dense16_${a}_$r.log
  done
done
F2=$O/fwd; mkdir -p $F2
S=qwen3-30b-a3b,gpt-oss-120b,mixtral-8x7b,deepseek-v3,qwen3-235b-a22b,glm-4.5-air,qwen3-next-80b-a3b,gpt-oss-20b
for i in 1 2 3; do
  for dt in bf16 fp8; do
    timeout 60 $BB --shapes $S --tokens 64,512,4096,16384 --gemm hopper --dtype $dt > $F2/base${dt}_$i.log 2>&1; mark "fwd base $dt $i" $? /dev/null
    timeout 60 $B --shapes $S --tokens 64,512,4096,16384 --gemm hopper --dtype $dt > $F2/new${dt}_$i.log 2>&1; mark "fwd new $dt $i" $? /dev/null
  done
done
python3 tools/ab_summary.py $F2 basebf16 newbf16 > $F2/ab_bf16.md 2>&1
python3 tools/ab_summary.py $F2 basefp8 newfp8 > $F2/ab_fp8.md 2>&1
mark done 0 /dev/null
