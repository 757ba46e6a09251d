# Device call J2 (session 8): the FP8 decode kernel with the operands swapped (decode_fp8_kernel.cuh,
# b50733c) in the library, first GPU run.
# Prediction (before the run): the suite passes on both FP8 kernels (every Hopper FP8 case runs on
# each: MOEFUSE_FP8_DECODE); sanitizers clean. Forward A/B (same build, MOEFUSE_FP8_DECODE=swap vs
# =tiles): T = 1-64 FP8 15-35% faster on gpt-oss and deepseek-v3, 10-25% on qwen3 and mixtral;
# T = 512 faster on gpt-oss and deepseek (one pass per block), slower on qwen3 (avg 32 rows: passes);
# T = 4096 forced swap much slower (4 passes per block). The one-process FP8 bench with peers: the
# T <= 64 cells >= 1.5x torch._scaled_grouped_mm (they were 1.20-1.50x on gpt-oss, deepseek, qwen3 T=64).
set -u
export LD_LIBRARY_PATH=$PWD/.deps/cjson/lib
B=build-device; T=$B/test_gpu_forward; L=$O/suite
mkdir -p $L $O/fwd $O/fp8
t0=$SECONDS
mark() { echo "$1: rc=$2 at $((SECONDS - t0)) s; $(tail -n 1 $3 2>/dev/null)" >> $O/call.log; }
run() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $L/$n.log 2>&1; mark $n $? $L/$n.log; }
STAGES=build OUT=$L timeout 150 bash tests/gpu/run_on_device.sh > /dev/null 2>&1; mark build $? /dev/null
run selftest 30 $T --selftest
run test_fp8 150 $T --filter fp8
run test_quick 60 $T --quick
run memcheck_fp8 120 compute-sanitizer --error-exitcode 3 --tool memcheck $T --quick --gemm hopper --filter fp8
run racecheck_fp8 150 compute-sanitizer --error-exitcode 3 --tool racecheck $T --quick --gemm hopper --filter fp8-
S4="--shapes qwen3-30b-a3b,gpt-oss-120b,mixtral-8x7b,deepseek-v3 --tokens 1,8,64,512,4096 --gemm hopper --dtype fp8"
for i in 1 2; do
  for arm in swap tiles; do
    MOEFUSE_FP8_DECODE=$arm timeout 60 $B/bench_gpu_forward $S4 > $O/fwd/${arm}_$i.log 2>&1; mark "fwd $arm $i" $? $O/fwd/${arm}_$i.log
  done
done
python3 tools/ab_summary.py $O/fwd swap tiles > $O/fwd/ab_swap_tiles.md 2>&1
run test_perf 150 $T --perf 1,8,64,512
left=$((545 - (SECONDS - t0)))
if [ $left -gt 80 ]; then
  BENCH_COMMIT=$BENCH_COMMIT TOTAL_S=$left OUT=$O/fp8 timeout $left bash bench/run_on_device.sh --dtype fp8 \
      --target-s 0.1 > /dev/null 2>&1; mark "bench_moe fp8" $? /dev/null
else
  mark "bench_moe fp8 skipped ($left s left)" 0 /dev/null
fi
mark done 0 /dev/null
