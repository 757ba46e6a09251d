# Device call K4 (session 9): HEAD (padding rows' codes not written, row128 one group a warp at small
# sizes, rotation knob, the suite's poisoned workspace) against 63b0725 (K3's new arm, "base" here);
# kb rotation A/B; then the FP8 bench with the peers on the faster kb order.
# Prediction (before the run): suite green with the poisoned workspace (--quick, --filter fp8 both
# paths), memcheck 0, racecheck 0. new/base: T = 1 0.93-0.97 (K3's +4 us back), deepseek T = 64
# ~0.98 (permute and A2 quantiser ~25 us less). rotate/straight at deepseek T = 64: 0.95-1.0
# (GEMM2 3.9 -> ~4.2 TB/s if the SMs' lockstep column offsets are what holds it back), T <= 8 ~1.0.
# Bench: FP8 block-scaled T <= 64 >= 1.5x torch._scaled_grouped_mm on all four shapes except perhaps
# deepseek T = 64 (~1.48-1.52x); per-tensor mixtral T = 1 and 8 >= 1.5x.
set -u
export LD_LIBRARY_PATH=$PWD/.deps/cjson/lib
B=build-device; T=$B/test_gpu_forward; L=$O/suite; P=$O/prof; F=$O/fwd
mkdir -p $L $P $F
t0=$SECONDS
mark() { echo "$1: rc=$2 at $((SECONDS - t0)) s; $(tail -n 1 $3 2>/dev/null)" >> $O/call.log; }
run() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $L/$n.log 2>&1; mark $n $? $L/$n.log; }
(cd /tmp/base && cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release -DMOEFUSE_CUDA=ON -DCJSON_INCLUDE_DIR=$PWD/.deps/cjson/include -DCJSON_LIBRARY=$PWD/.deps/cjson/lib/libcjson.so > /dev/null 2>&1;
 cmake --build $B -j 6 --target bench_gpu_forward > $L/build_base.log 2>&1; echo "base build rc=$?" >> $L/build_base.log) &
STAGES=build OUT=$L timeout 150 bash tests/gpu/run_on_device.sh > /dev/null 2>&1; mark build $? /dev/null
wait; mark build_base 0 $L/build_base.log
run test_quick 60 $T --quick
S4="--shapes qwen3-30b-a3b,gpt-oss-120b,mixtral-8x7b,deepseek-v3 --tokens 1,8,64,512 --gemm hopper"
for i in 1 2; do
  for arm in rotate straight base; do
    X=$B/bench_gpu_forward; [ $arm = base ] && X=/tmp/base/$B/bench_gpu_forward
    for d in fp8 fp8-tensor; do
      MOEFUSE_FP8_DECODE_KB=$arm timeout 60 $X $S4 --dtype $d > $F/${arm}_${d}_$i.log 2>&1; mark "fwd $arm $d $i" $? $F/${arm}_${d}_$i.log
    done
  done
done
for d in fp8 fp8-tensor; do
  mkdir -p $F/$d && for f in $F/*_${d}_*.log; do b=$(basename $f .log); cp $f $F/$d/${b%%_*}_${b##*_}.log; done
  python3 tools/ab_summary.py $F/$d straight base rotate > $F/ab_$d.md 2>&1
done
# The faster kb order at deepseek-v3 T = 64 (block-scaled) runs the bench.
KB=$(python3 - $F/fp8 <<'PY'
import glob, statistics, sys
m = {}
for arm in ("rotate", "straight"):
    v = [float(l.split()[3]) for f in glob.glob(f"{sys.argv[1]}/{arm}_*.log") for l in open(f)
         if l.startswith("deepseek-v3") and l.split()[1] == "64"]
    m[arm] = statistics.median(v) if v else 1e9
print("rotate" if m["rotate"] < m["straight"] else "straight")
PY
)
echo "kb order for the bench and ncu: $KB" >> $O/call.log
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,sm__cycles_elapsed.avg.per_second
for arm in rotate straight; do
  MOEFUSE_FP8_DECODE_KB=$arm timeout 60 ncu --clock-control none --cache-control none --metrics $M --csv --launch-count 30 \
    $B/bench_gpu_forward --shapes deepseek-v3 --tokens 64 --gemm hopper --dtype fp8 > $P/ncu_${arm}_deepseek-v3_64.csv 2>&1
  mark "ncu $arm" $? /dev/null
done
python3 tools/ncu_summary.py $P/ncu_*.csv > $P/summary.md 2>&1; mark summary $? /dev/null
MOEFUSE_FP8_DECODE_KB=$KB BENCH_COMMIT=$BENCH_COMMIT TOTAL_S=150 OUT=$O/fp8 timeout 170 bash bench/run_on_device.sh --dtype fp8 \
    --target-s 0.1 > $O/fp8_run.log 2>&1; mark "bench_moe fp8 ($KB)" $? $O/fp8_run.log
mv $O/fp8_run.log $O/fp8/ 2>/dev/null
run memcheck_fp8 60 compute-sanitizer --error-exitcode 3 --tool memcheck $T --quick --filter fp8
run racecheck_fp8 90 compute-sanitizer --error-exitcode 3 --tool racecheck $T --quick --gemm hopper --filter fp8-
run test_fp8_v1 100 $T --filter fp8 --gemm v1
left=$((545 - (SECONDS - t0))); [ $left -gt 150 ] && left=150
run test_fp8_hopper $left $T --filter fp8 --gemm hopper
mark done 0 /dev/null
