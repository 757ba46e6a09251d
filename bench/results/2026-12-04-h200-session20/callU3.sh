#!/usr/bin/env bash
# Session 20, call U3. From the repo root, carry .deps:
#   O=$OUT timeout 585 bash bench/results/2026-12-04-h200-session20/callU3.sh; then tar $OUT.
# What changed since U2: the FP8 forward takes tickets and the expert-by-expert walk by default
# where H * I >= 7 MiB (hopper_fp8_large_experts: deepseek-v3, gpt-oss, mixtral), the static stride
# and the grouped raster elsewhere (host code only; the kernels are U2's).
# 1. The full GPU suite (default paths), memcheck of --quick.
# 2. FP8 forward, 3 alternated rounds, 8 shapes, T = 4096, 16384: new (the default now) against old
#    (MOEFUSE_HOPPER_SCHEDULE=static MOEFUSE_HOPPER_RASTER=blocks: U2's default). fwd/fp8.md:
#    old / new (> 1: the new default is faster).
# Prediction (before the run): (1) all pass (653 + the 4 tails cases' reordered specs: the same
# count), memcheck 0 errors. (2) deepseek-v3 1.02-1.08, gpt-oss-120b 0.99-1.04, mixtral 0.98-1.04,
# gpt-oss-20b 0.98-1.02; the four others 0.99-1.01 (the same kernels).
set -u
R=$PWD; O=${O:-$OUT}; F=$O/fwd; mkdir -p $F
export LD_LIBRARY_PATH=$R/.deps/cjson/lib
t0=$SECONDS
mark() { echo "$1: rc=$2 at $((SECONDS - t0)) s; $(tail -n 1 $3 2>/dev/null)" >> $O/call.log; }
STAGES=build OUT=$O/build timeout 150 bash tests/gpu/run_on_device.sh > $O/build_stdout.log 2>&1; mark build $? $O/build_stdout.log
T=build-device/test_gpu_forward; B=build-device/bench_gpu_forward
S=qwen3-30b-a3b,gpt-oss-120b,mixtral-8x7b,deepseek-v3,qwen3-235b-a22b,glm-4.5-air,qwen3-next-80b-a3b,gpt-oss-20b
for i in 1 2 3; do
  timeout 40 $B --shapes $S --tokens 4096,16384 --gemm hopper --dtype fp8 > $F/fp8_new_$i.log 2>&1; mark "fp8 new $i" $? /dev/null
  MOEFUSE_HOPPER_SCHEDULE=static MOEFUSE_HOPPER_RASTER=blocks timeout 40 $B --shapes $S --tokens 4096,16384 --gemm hopper \
    --dtype fp8 > $F/fp8_old_$i.log 2>&1; mark "fp8 old $i" $? /dev/null
done
python3 tools/ab_summary.py $F fp8_old fp8_new > $F/fp8.md 2>&1
timeout 40 compute-sanitizer --tool memcheck $T --quick > $O/memcheck_quick.log 2>&1; mark "memcheck quick" $? $O/memcheck_quick.log
timeout 340 $T > $O/test_full.log 2>&1; mark test_full $? $O/test_full.log
mark done 0 /dev/null
