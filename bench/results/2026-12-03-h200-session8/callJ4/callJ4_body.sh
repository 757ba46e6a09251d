# Device call J4 (session 8): the swapped FP8 decode kernel on a plan of 32-row blocks (no passes),
# validated and benched: the last call of the session's budget, so the bench comes early.
# Prediction (before the run): suite green on both kernels (--quick, --filter fp8 on the Hopper
# path), memcheck 0 errors, racecheck 0 hazards. Forward A/B swap/tiles: T <= 64 0.80-0.95 (the
# permute and A2 quantiser no longer walk 128-row padding: ~130 us less at deepseek T=64, J3);
# deepseek T=64 ~2.45 ms. FP8 bench with peers: block-scaled T <= 64 cells all >= 1.5x
# torch._scaled_grouped_mm (deepseek T=64 1.44 -> ~1.51x); per-tensor cells closer but some below.
set -u
export LD_LIBRARY_PATH=$PWD/.deps/cjson/lib
B=build-device; T=$B/test_gpu_forward; L=$O/suite
mkdir -p $L $O/fwd $O/fp8
t0=$SECONDS
mark() { echo "$1: rc=$2 at $((SECONDS - t0)) s; $(tail -n 1 $3 2>/dev/null)" >> $O/call.log; }
run() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $L/$n.log 2>&1; mark $n $? $L/$n.log; }
STAGES=build OUT=$L timeout 150 bash tests/gpu/run_on_device.sh > /dev/null 2>&1; mark build $? /dev/null
run selftest 30 $T --selftest
run test_quick 60 $T --quick
S4="--shapes qwen3-30b-a3b,gpt-oss-120b,mixtral-8x7b,deepseek-v3 --tokens 1,8,64,512 --gemm hopper --dtype fp8"
for i in 1 2; do
  for arm in swap tiles; do
    MOEFUSE_FP8_DECODE=$arm timeout 60 $B/bench_gpu_forward $S4 > $O/fwd/${arm}_$i.log 2>&1; mark "fwd $arm $i" $? $O/fwd/${arm}_$i.log
  done
done
python3 tools/ab_summary.py $O/fwd swap tiles > $O/fwd/ab_swap_tiles.md 2>&1
BENCH_COMMIT=$BENCH_COMMIT TOTAL_S=150 OUT=$O/fp8 timeout 150 bash bench/run_on_device.sh --dtype fp8 \
    --target-s 0.1 > /dev/null 2>&1; mark "bench_moe fp8" $? /dev/null
run memcheck_fp8 60 compute-sanitizer --error-exitcode 3 --tool memcheck $T --quick --gemm hopper --filter fp8
run racecheck_fp8 90 compute-sanitizer --error-exitcode 3 --tool racecheck $T --quick --gemm hopper --filter fp8-
left=$((470 - (SECONDS - t0)))
run test_fp8_hopper $left $T --filter fp8 --gemm hopper
mark done 0 /dev/null
