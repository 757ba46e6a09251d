#!/usr/bin/env bash
# Session 23, call X6. From the repo root, carry .deps:
#   O=$OUT timeout 585 bash bench/results/2026-12-04-h200-session23/callX6.sh; then tar $OUT.
# 1. The GPU suite (--quick, the K-grouped GEMM, --perf 8,4096,512,129) on this tree: the staged
#    epilogue without per-row branches (X2), SiLU's ex2.ftz (X2), the K-grouped GEMM without its
#    32-row option, and the A2 quantiser's items of 4 consecutive groups across rows (not SCATTER).
# 2. That quantiser against the tree without it (callX6/quant.patch reversed, built in /tmp/base):
#    its kernel under ncu at qwen3-30b-a3b T = 16384 (A2: 6 groups a row, so items of one row left a
#    quarter of the lanes idle), and the FP8 forward, 3 alternated rounds.
#    Prediction: the A2 quantiser 0.70-0.85 of its time (X1-era profiles: ~210 us); forward
#    base / new qwen3-30b-a3b 1.01-1.03, glm-4.5-air (11 groups) 1.00-1.01, the others 0.99-1.01.
# 3. Issue 4's gates (bench/issue4_gates.sh). Prediction: 12-13 of 30; FP8 T=16384 qwen3 600-640,
#    deepseek 730-770 TFLOP/s (X3's forward: 619 / 763).
set -u
. tools/device_call.sh
rm -rf /tmp/base && mkdir -p /tmp/base && tar --exclude=./build-device --exclude=./bench/results -cf - . | tar -xf - -C /tmp/base
(cd /tmp/base && patch -R -p1 < "$R/bench/results/2026-12-04-h200-session23/callX6/quant.patch") > $O/base_patch.log 2>&1
(cd /tmp/base && cmake -S . -B build-base -DCMAKE_BUILD_TYPE=Release -DMOEFUSE_CUDA=ON -DCJSON_INCLUDE_DIR=$R/.deps/cjson/include \
   -DCJSON_LIBRARY=$R/.deps/cjson/lib/libcjson.so && cmake --build build-base -j 8 --target bench_gpu_forward) > $O/build_base.log 2>&1 &
build_device
wait
mark "base build" $? $O/build_base.log
BB=/tmp/base/build-base/bench_gpu_forward
timeout 70 $T --quick > $O/test_quick.log 2>&1; mark "suite --quick" $? $O/test_quick.log
timeout 60 build-device/test_gpu_wgrad > $O/test_gpu_wgrad.log 2>&1; mark "wgrad" $? $O/test_gpu_wgrad.log
timeout 150 $T --perf 8,4096,512,129 > $O/test_gpu_forward_perf.log 2>&1; mark "suite --perf" $? $O/test_gpu_forward_perf.log
for a in base new; do
  X=$B; [ $a = base ] && X=$BB
  timeout 60 ncu --clock-control none --kernel-name regex:quant_row128 --launch-count 6 --metrics gpu__time_duration.sum \
    $X --shapes qwen3-30b-a3b --tokens 16384 --gemm hopper --dtype fp8 > $O/ncu_quant_$a.log 2>&1
  mark "ncu quant $a" $? $O/ncu_quant_$a.log
done
D=$O/fwd; mkdir -p $D
S=qwen3-30b-a3b,gpt-oss-120b,mixtral-8x7b,deepseek-v3,qwen3-235b-a22b,glm-4.5-air,qwen3-next-80b-a3b,gpt-oss-20b
for i in 1 2 3; do
  timeout 60 $BB --shapes $S --tokens 4096,16384 --gemm hopper --dtype fp8 > $D/base_$i.log 2>&1; mark "fwd base $i" $? /dev/null
  timeout 60 $B --shapes $S --tokens 4096,16384 --gemm hopper --dtype fp8 > $D/new_$i.log 2>&1; mark "fwd new $i" $? /dev/null
done
python3 tools/ab_summary.py $D base new > $D/ab.md 2>&1
OUT=$O/gates timeout 330 bash bench/issue4_gates.sh > $O/gates_stdout.log 2>&1; mark "gates" $? $O/gates_stdout.log
mark done 0 /dev/null
