#!/usr/bin/env bash
# Prepared in session 19, run in session 20 as call U1. From the repo root, carry
# .deps:   O=$OUT timeout 585 bash bench/results/2026-12-04-h200-session20/callU1.sh; then tar $OUT.
# The bf16 grouped kernel's GEMM2 with the bulk-copy epilogue (EPI_BULK, as the FP8 kernel's since
# session 19: each consumer warp's 16 finished bf16 rows in shared memory, one bulk copy a row while
# the next tile runs), 3 stages instead of 4 to make room (16 x 528 bytes a warp at 256 wide);
# opt-in by MOEFUSE_HOPPER_EPI2=bulk (ticket schedule, bf16 rows). Compile-checked only: 0 spills;
# every other kernel's SASS unchanged. About 8 minutes.
# Also the FP8 GEMM1's bulk epilogue with its activations in a rolled loop (EPI_BULK_ROLLED,
# MOEFUSE_HOPPER_FP8_EPI=rolled: bulk at every K, GEMM1 rolled): the unrolled form's SASS is 3.1x
# the staged kernel's (8200 instructions, 406 MUFU), the rolled one 1.65x (4352, 126); the
# hypothesis is that code size, not the fifth stage, cost the lab's gpt-oss GEMM1 its 16-18%.
# 1. Correctness with them: --quick, --perf 4096 --gemm hopper, memcheck of --quick, racecheck of
#    the tma-bn240-oai-bias and tma-woi-shared-fused cases (bf16 bulk); --quick --filter fp8 and
#    memcheck with rolled.
# 2. Grouped bf16 lab: down_none, down_dyn_b16 (staged, bf16 rows), down_bulk, down_bulk_bn240 on
#    PERF.md's shapes at T=16384 and the check shapes.
# 3. bf16 forward staged vs bulk, 3 alternated rounds, 8 shapes, T = 4096, 16384 (fwd/bulk.md by
#    tools/ab_summary.py prints staged / bulk, the inverse of the ratios predicted below).
# 4. Grouped FP8 lab GEMM1: fp8_up_192 (staged), _bulk, _rolled; FP8 forward staged / default /
#    rolled, 3 alternated rounds (fwd/fp8.md: staged / arm).
# Prediction (before the run): (1) all pass, 0 errors, 0 hazards. (2) GEMM2 bulk/staged qwen3
# 0.85-0.92 (the FP8 kernel's went 0.88; the bf16 staged epilogue costs ~4 us a tile there), deepseek
# 0.95-1.02, gpt-oss (bn240) 0.95-1.05, mixtral 1.00-1.05 (K 14336 on 3 stages). (3) qwen3-30b-a3b and
# qwen3-next-80b-a3b 0.94-0.97, the others 0.98-1.02. If it holds: default where K <= 2048 (as FP8),
# then issue 4's gates (bf16 qwen3 time / dense 1.169 in session 19's run: 1.10-1.14 expected).
# (4) rolled/staged GEMM1: qwen3 0.93-0.97 (unrolled 0.97), gpt-oss 0.97-1.02 (unrolled 1.16-1.18),
# deepseek 0.98-1.01 (unrolled 1.03-1.05); forward rolled/staged: qwen3 family 0.93-0.95, gpt-oss and
# deepseek 0.97-1.00.
set -u
R=$PWD; O=${O:-$OUT}; F=$O/fwd; mkdir -p $F
export LD_LIBRARY_PATH=$R/.deps/cjson/lib
t0=$SECONDS
mark() { echo "$1: rc=$2 at $((SECONDS - t0)) s; $(tail -n 1 $3 2>/dev/null)" >> $O/call.log; }
STAGES=build OUT=$O/build timeout 150 bash tests/gpu/run_on_device.sh > $O/build_stdout.log 2>&1; mark build $? $O/build_stdout.log
T=build-device/test_gpu_forward; B=build-device/bench_gpu_forward
export MOEFUSE_HOPPER_EPI2=bulk
timeout 40 $T --quick > $O/quick_bulk.log 2>&1; mark "quick bulk" $? $O/quick_bulk.log
timeout 40 compute-sanitizer --tool memcheck $T --quick > $O/memcheck_bulk.log 2>&1; mark "memcheck bulk" $? $O/memcheck_bulk.log
for c in tma-bn240-oai-bias tma-woi-shared-fused; do
  timeout 40 compute-sanitizer --tool racecheck $T --quick --filter $c > $O/racecheck_$c.log 2>&1; mark "racecheck $c" $? $O/racecheck_$c.log
done
unset MOEFUSE_HOPPER_EPI2
OUT=$O/glab LAB=bf16 SUITE=0 LAB_LIMIT=100 VARIANTS=down_none,down_dyn_b16,down_bulk,down_bulk_bn240 \
  timeout 140 bash lab/run_grouped_on_device.sh > $O/glab_stdout.log 2>&1; mark "grouped bf16 lab" $? $O/glab_stdout.log
S=qwen3-30b-a3b,gpt-oss-120b,mixtral-8x7b,deepseek-v3,qwen3-235b-a22b,glm-4.5-air,qwen3-next-80b-a3b,gpt-oss-20b
for i in 1 2 3; do
  for e in staged bulk; do
    MOEFUSE_HOPPER_EPI2=$e timeout 40 $B --shapes $S --tokens 4096,16384 --gemm hopper > $F/bf16_${e}_$i.log 2>&1
    mark "bf16 $e $i" $? /dev/null
  done
done
python3 tools/ab_summary.py $F bf16_staged bf16_bulk > $F/bulk.md 2>&1 # staged / bulk: > 1 = bulk faster
MOEFUSE_HOPPER_FP8_EPI=rolled timeout 30 $T --quick --filter fp8 > $O/quick_fp8_rolled.log 2>&1; mark "quick fp8 rolled" $? $O/quick_fp8_rolled.log
MOEFUSE_HOPPER_FP8_EPI=rolled timeout 30 compute-sanitizer --tool memcheck $T --quick --filter fp8 > $O/memcheck_fp8_rolled.log 2>&1
mark "memcheck fp8 rolled" $? $O/memcheck_fp8_rolled.log
OUT=$O/glab8 LAB=fp8 SUITE=0 LAB_LIMIT=90 VARIANTS=fp8_up_192,fp8_up_192_bulk,fp8_up_192_rolled \
  timeout 130 bash lab/run_grouped_on_device.sh > $O/glab8_stdout.log 2>&1; mark "grouped fp8 lab" $? $O/glab8_stdout.log
for i in 1 2 3; do
  for e in staged default rolled; do
    MOEFUSE_HOPPER_FP8_EPI=$e timeout 40 $B --shapes $S --tokens 4096,16384 --gemm hopper --dtype fp8 > $F/fp8_${e}_$i.log 2>&1
    mark "fp8 $e $i" $? /dev/null
  done
done
python3 tools/ab_summary.py $F fp8_staged fp8_default fp8_rolled > $F/fp8.md 2>&1
MOEFUSE_HOPPER_EPI2=bulk MOEFUSE_HOPPER_FP8_EPI=rolled timeout 150 $T --perf 4096 --gemm hopper > $O/perf4096_bulk.log 2>&1
mark "perf4096 bulk rolled" $? $O/perf4096_bulk.log
mark done 0 /dev/null
