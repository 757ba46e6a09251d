#!/usr/bin/env bash
# Session 20, call U2. From the repo root, carry .deps:
#   O=$OUT timeout 585 bash bench/results/2026-12-04-h200-session20/callU2.sh; then tar $OUT.
# What changed since U1: bf16 GEMM2's bulk-copy epilogue is the default where K <= 2048
# (hopper_gemm2_bulk); the FP8 GEMM1 rolled form is gone; the FP8 128 x 192 kernel also runs on the
# ticket schedule (DYN with the scales in the tile stage: the TMA thread alone takes the tickets),
# opt-in by MOEFUSE_HOPPER_SCHEDULE=dyn (default unchanged: the static stride).
# 1. Correctness: --quick (default; its FP8 tails cases now run T = 512, the 128 x 192 tiles, where
#    before they ran T = 3: no --quick case reached the prefill tiles), --quick --filter fp8 with
#    SCHEDULE=dyn; memcheck of --quick --filter fp8 and racecheck of fp8-block-row128-tails (T = 1,
#    512), each by default and with SCHEDULE=dyn; --perf 4096 --gemm hopper --filter fp8 with
#    SCHEDULE=dyn.
# 2. FP8 forward, 3 alternated rounds, 8 shapes, T = 4096, 16384; arms: default (static stride,
#    grouped raster over all blocks), expert (static, MOEFUSE_HOPPER_RASTER=expert), dyn_expert
#    (tickets + expert raster, as bf16's default), dyn_blocks (tickets + grouped raster).
#    fwd/fp8.md: default / arm (> 1: the arm is faster).
# Prediction (before the run): (1) all pass, 0 errors, 0 hazards. (2) expert 0.99-1.01 everywhere
# (as on the 128-wide ring, session 16); dyn_expert: deepseek-v3 1.02-1.08 (bf16's tickets + expert
# raster cut deepseek GEMM1's DRAM reads 32.7 -> 18.2 GB and its forward 0.87-0.99 of the time),
# gpt-oss 1.01-1.05, qwen3 family, mixtral, glm 0.98-1.02; dyn_blocks below dyn_expert on deepseek.
# If dyn_expert wins by >= 2% on deepseek and loses nowhere by > 1%: FP8 default to tickets + expert.
set -u
R=$PWD; O=${O:-$OUT}; F=$O/fwd; mkdir -p $F
export LD_LIBRARY_PATH=$R/.deps/cjson/lib
t0=$SECONDS
mark() { echo "$1: rc=$2 at $((SECONDS - t0)) s; $(tail -n 1 $3 2>/dev/null)" >> $O/call.log; }
STAGES=build OUT=$O/build timeout 150 bash tests/gpu/run_on_device.sh > $O/build_stdout.log 2>&1; mark build $? $O/build_stdout.log
T=build-device/test_gpu_forward; B=build-device/bench_gpu_forward
timeout 40 $T --quick > $O/quick.log 2>&1; mark "quick" $? $O/quick.log
timeout 40 compute-sanitizer --tool memcheck $T --quick --filter fp8 > $O/memcheck_fp8.log 2>&1; mark "memcheck fp8" $? $O/memcheck_fp8.log
timeout 60 compute-sanitizer --tool racecheck $T --quick --filter fp8-block-row128-tails > $O/racecheck_fp8.log 2>&1; mark "racecheck fp8" $? $O/racecheck_fp8.log
export MOEFUSE_HOPPER_SCHEDULE=dyn
timeout 30 $T --quick --filter fp8 > $O/quick_fp8_dyn.log 2>&1; mark "quick fp8 dyn" $? $O/quick_fp8_dyn.log
timeout 40 compute-sanitizer --tool memcheck $T --quick --filter fp8 > $O/memcheck_fp8_dyn.log 2>&1; mark "memcheck fp8 dyn" $? $O/memcheck_fp8_dyn.log
timeout 60 compute-sanitizer --tool racecheck $T --quick --filter fp8-block-row128-tails > $O/racecheck_fp8_dyn.log 2>&1; mark "racecheck fp8 dyn" $? $O/racecheck_fp8_dyn.log
timeout 120 $T --perf 4096 --gemm hopper --filter fp8 > $O/perf4096_fp8_dyn.log 2>&1; mark "perf4096 fp8 dyn" $? $O/perf4096_fp8_dyn.log
unset MOEFUSE_HOPPER_SCHEDULE
S=qwen3-30b-a3b,gpt-oss-120b,mixtral-8x7b,deepseek-v3,qwen3-235b-a22b,glm-4.5-air,qwen3-next-80b-a3b,gpt-oss-20b
arm() { # name: runs bench_gpu_forward under that arm's switches
  case $1 in
    default) env $2 ;;
    expert) env MOEFUSE_HOPPER_RASTER=expert $2 ;;
    dyn_expert) env MOEFUSE_HOPPER_SCHEDULE=dyn MOEFUSE_HOPPER_RASTER=expert $2 ;;
    dyn_blocks) env MOEFUSE_HOPPER_SCHEDULE=dyn MOEFUSE_HOPPER_RASTER=blocks $2 ;;
  esac
}
for i in 1 2 3; do
  for e in default expert dyn_expert dyn_blocks; do
    arm $e "timeout 40 $B --shapes $S --tokens 4096,16384 --gemm hopper --dtype fp8" > $F/fp8_${e}_$i.log 2>&1
    mark "fp8 $e $i" $? /dev/null
  done
done
python3 tools/ab_summary.py $F fp8_default fp8_expert fp8_dyn_expert fp8_dyn_blocks > $F/fp8.md 2>&1
MOEFUSE_HOPPER_SCHEDULE=dyn MOEFUSE_HOPPER_RASTER=expert timeout 30 $B --shapes qwen3-30b-a3b --tokens 16384 --gemm hopper --dtype fp8 --print-config > $O/print_config_dyn.log 2>&1
mark done 0 /dev/null
