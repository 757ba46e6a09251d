#!/usr/bin/env bash
# Session 24, call Y4 (~6 min). From the repo root, carry .deps: O=$OUT timeout 590 bash bench/results/2026-12-04-h200-session24/callY4.sh
# Y3: ACQUIRE_FIRST made the grouped 192-wide FP8 loop 3-6% slower (the dense kernel 4-9% faster). Two suspects:
# it holds kb-1's stage until kb has landed (a stage less in flight where the producer is behind), and the B
# scales' global loads were consumed right after the wgmma wait, before the promotion. The PROBE_FIRST order
# avoids both: kb's stage is probed (mbarrier.test_wait, never suspends) before kb-1's wgmma wait, kb-1 released
# and promoted, kb waited for only if the probe failed, then issued; its B scales are loaded a k-block ahead.
# callY4_probe.patch is that change in the grouped kernel (with the warp-uniform warpgroup index); the base tree
# is this one with it reversed (the old order). Dense lab: fp8v7 (PROBE_FIRST), fp8v4u (the old order with the
# uniform index alone) beside fp8v4 and fp8v6 (ACQUIRE_FIRST, now the engine's), both widths, two rounds.
# Prediction (before the run): grouped lab new / base 0.96-1.00 on the 192-wide GEMM1s and _none controls,
# 0.97-1.01 on the GEMM2s; forward base / new 1.00-1.03. Dense: fp8v7 within 2% of fp8v6; fp8v4u within 2% of
# fp8v4 (so that the order, not the uniform index, is the dense gain). Suite passes, memcheck 0 errors.
set -u
. tools/device_call.sh
D=bench/results/2026-12-04-h200-session24
rm -rf /tmp/base && mkdir -p /tmp/base && tar --exclude=./build-device --exclude=./bench/results -cf - . | tar -xf - -C /tmp/base
(cd /tmp/base && patch -R -p1 < "$R/$D/callY4_probe.patch") > $O/base_patch.log 2>&1
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
DL=/tmp/moefuse-fp8lab-build/gemm_fp8_lab
timeout 100 $DL --variants fp8v4,fp8v4u,fp8v6,fp8v7,fp8v4_128,fp8v4u_128,fp8v6_128,fp8v7_128 > $O/dense/dense_r1.log 2>&1
timeout 100 $DL --variants fp8v7_128,fp8v6_128,fp8v4u_128,fp8v4_128,fp8v7,fp8v6,fp8v4u,fp8v4 > $O/dense/dense_r2.log 2>&1
mark "dense lab" $? $O/dense/dense_r2.log
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
