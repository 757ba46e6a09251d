# Device call L4 (session 10, the budget's last call) on 9688803: the swapped kernel's plan reads in
# two steps (ids at unit start, targets two k-blocks later), bf16 on it up to 16 rows per expert.
# Validation, the A/B against L3's code (b31b48e, built beside it), both benches with the peers,
# sanitizers.
# Prediction (before the run): --quick and --perf 1,8,64,512 --gemm hopper all pass; racecheck 0
# hazards, memcheck 0 errors. A/B new/base FP8: deepseek T=64 0.96-0.98 (GEMM2 846 -> ~780 us),
# other T <= 64 cells 0.98-1.0; bf16 T=512 gpt-oss/deepseek ~0.89 (v1 -> swapped). FP8 bench:
# deepseek T=64 block-scaled ~2.40 ms, >= 1.52x. bf16 bench: gpt-oss T=512 ~1.45x, deepseek T=512
# ~1.37x, T <= 64 as L3 (+1-2% where GEMM2's unit starts mattered).
set -u
export LD_LIBRARY_PATH=$PWD/.deps/cjson/lib
B=build-device; T=$B/test_gpu_forward; L=$O/suite; F=$O/fwd
mkdir -p $L $F
t0=$SECONDS
mark() { echo "$1: rc=$2 at $((SECONDS - t0)) s; $(tail -n 1 $3 2>/dev/null)" >> $O/call.log; }
run() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $L/$n.log 2>&1; mark $n $? $L/$n.log; }
(cd /tmp/base && cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release -DMOEFUSE_CUDA=ON -DCJSON_INCLUDE_DIR=$PWD/.deps/cjson/include \
   -DCJSON_LIBRARY=$PWD/.deps/cjson/lib/libcjson.so > /dev/null 2>&1;
 cmake --build $B -j 6 --target bench_gpu_forward > $L/build_base.log 2>&1; echo "base build rc=$?" >> $L/build_base.log) &
STAGES=build OUT=$L timeout 150 bash tests/gpu/run_on_device.sh > /dev/null 2>&1; mark build $? /dev/null
run test_quick 60 $T --quick
run perf_hopper 90 $T --perf 1,8,64,512 --gemm hopper
BENCH_COMMIT=$BENCH_COMMIT TOTAL_S=150 OUT=$O/fp8 timeout 160 bash bench/run_on_device.sh --dtype fp8 --target-s 0.1 \
  > $O/fp8_run.log 2>&1; mark "bench_moe fp8" $? $O/fp8_run.log
mv $O/fp8_run.log $O/fp8/ 2>/dev/null
BENCH_COMMIT=$BENCH_COMMIT TOTAL_S=120 OUT=$O/bf16 timeout 130 bash bench/run_on_device.sh --target-s 0.1 \
  > $O/bf16_run.log 2>&1; mark "bench_moe bf16" $? $O/bf16_run.log
mv $O/bf16_run.log $O/bf16/ 2>/dev/null
wait; mark build_base 0 $L/build_base.log
S4="--shapes qwen3-30b-a3b,gpt-oss-120b,mixtral-8x7b,deepseek-v3 --tokens 1,8,64,512"
for i in 1 2; do
  [ $((SECONDS - t0)) -gt 400 ] && break
  for arm in new base; do
    X=$B/bench_gpu_forward; [ $arm = base ] && X=/tmp/base/$B/bench_gpu_forward
    for d in fp8 bf16; do
      timeout 30 $X $S4 --dtype $d > $F/${arm}_${d}_$i.log 2>&1; mark "fwd $arm $d $i" $? /dev/null
    done
  done
done
for d in fp8 bf16; do
  mkdir -p $F/$d && for f in $F/*_${d}_*.log; do b=$(basename $f .log); cp $f $F/$d/${b%%_*}_${b##*_}.log; done
  python3 tools/ab_summary.py $F/$d new base > $F/ab_$d.md 2>&1
done
left=$((535 - (SECONDS - t0))); [ $left -gt 90 ] && left=90; [ $left -lt 5 ] && left=5
run racecheck $left compute-sanitizer --error-exitcode 3 --tool racecheck $T --quick --gemm hopper
left=$((540 - (SECONDS - t0))); [ $left -gt 60 ] && left=60; [ $left -lt 5 ] && left=5
run memcheck $left compute-sanitizer --error-exitcode 3 --tool memcheck $T --quick --gemm hopper
mark done 0 /dev/null
