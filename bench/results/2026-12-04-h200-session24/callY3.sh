#!/usr/bin/env bash
# Session 24, call Y3 (~6 min). From the repo root, carry .deps: O=$OUT timeout 590 bash bench/results/2026-12-04-h200-session24/callY3.sh
# The ACQUIRE_FIRST order (Y2: the dense kernel 1.04-1.09x faster) in the grouped FP8 kernel's 192-wide loop (the
# forward's prefill default): k-block kb's four B scales loaded (__ldg), its stage waited for and its A scales read
# while kb-1's wgmmas run, then kb-1 promoted and released, kb issued; the warpgroup index warp-uniform. The dense
# engine (gemm_fp8.cu) takes ACQUIRE_FIRST on all four of its configurations (the ring ones too: the lab's tails
# shapes check them). callY3_acquire.patch is the change; the base tree is this one with it reversed.
# 1. Suite --quick; memcheck of --quick --filter fp8; the dense FP8 lab (engine vs fp8v4/fp8v6, all shapes checked).
# 2. Grouped FP8 lab, base / new, two rounds, T = 16384 shapes and the activation checks.
# 3. FP8 forward base / new, 3 alternated rounds, 8 shapes, T = 4096 and 16384.
# Prediction (before the run): lab new / base time 0.93-0.97 on the 192-wide GEMM1s (qwen3, deepseek, mixtral,
# gpt-oss) and the _none controls, 0.95-1.00 on the GEMM2s (K 768-2048: fewer k-blocks a tile); forward base / new
# 1.02-1.05 at T = 16384, 1.01-1.04 at 4096. Everything passes; memcheck 0 errors.
set -u
. tools/device_call.sh
D=bench/results/2026-12-04-h200-session24
rm -rf /tmp/base && mkdir -p /tmp/base && tar --exclude=./build-device --exclude=./bench/results -cf - . | tar -xf - -C /tmp/base
(cd /tmp/base && patch -R -p1 < "$R/$D/callY3_acquire.patch") > $O/base_patch.log 2>&1
mark "base tree" $? $O/base_patch.log
F=(-std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -lineinfo -Xptxas -v -Iinclude -Isrc/core -Isrc/cuda -Isrc/cuda/hopper -Ilab)
(cd /tmp/base && nvcc "${F[@]}" -o /tmp/lab_base lab/grouped_lab.cu) > $O/build_lab_base.log 2>&1 &
nvcc "${F[@]}" -o /tmp/lab_new lab/grouped_lab.cu > $O/build_lab_new.log 2>&1 &
(cd /tmp/base && cmake -S . -B build-base -DCMAKE_BUILD_TYPE=Release -DMOEFUSE_CUDA=ON -DCJSON_INCLUDE_DIR=$R/.deps/cjson/include \
   -DCJSON_LIBRARY=$R/.deps/cjson/lib/libcjson.so && cmake --build build-base -j 6 --target bench_gpu_forward) > $O/build_base.log 2>&1 &
build_device
wait
mark "base + lab builds" $? $O/build_base.log
BB=/tmp/base/build-base/bench_gpu_forward
timeout 70 $T --quick > $O/test_quick.log 2>&1; mark "suite --quick" $? $O/test_quick.log
OUT=$O/dense VARIANTS="fp8engine" LAB_LIMIT=60 timeout 150 bash lab/run_fp8_on_device.sh > $O/dense_stdout.log 2>&1
timeout 100 /tmp/moefuse-fp8lab-build/gemm_fp8_lab --variants fp8v4,fp8v6,fp8engine > $O/dense/dense_ab.log 2>&1
mark "dense lab" $? $O/dense/dense_ab.log
CHK=chk-swiglu-limit,chk-geglu,chk-geglu-tanh,chk-reglu,chk-relu2,chk-oai
V8=fp8_up_192,fp8_up_192_bulk,fp8_up_192_dyn_exp,fp8_down_192_b16,fp8_down_192_bulk,fp8_up_192_none,fp8_down_192_none
for r in 1 2; do
  for a in base new; do
    timeout 100 /tmp/lab_$a --fp8 --shapes qwen3,gptoss,mixtral,deepseek,$CHK --variants $V8 > $O/glab_${a}_$r.log 2>&1
    mark "grouped lab $a $r" $? $O/glab_${a}_$r.log
  done
done
F2=$O/fwd; mkdir -p $F2
S=qwen3-30b-a3b,gpt-oss-120b,mixtral-8x7b,deepseek-v3,qwen3-235b-a22b,glm-4.5-air,qwen3-next-80b-a3b,gpt-oss-20b
for i in 1 2 3; do
  timeout 60 $BB --shapes $S --tokens 4096,16384 --gemm hopper --dtype fp8 > $F2/base_$i.log 2>&1; mark "fwd base $i" $? /dev/null
  timeout 60 $B --shapes $S --tokens 4096,16384 --gemm hopper --dtype fp8 > $F2/new_$i.log 2>&1; mark "fwd new $i" $? /dev/null
done
python3 tools/ab_summary.py $F2 base new > $F2/ab.md 2>&1
timeout 150 compute-sanitizer --tool memcheck --leak-check no --error-exitcode 3 $T --quick --filter fp8 > $O/memcheck_fp8.log 2>&1
mark "memcheck --quick fp8" $? $O/memcheck_fp8.log
mark done 0 /dev/null
