# Device call K3 (session 9): 63b0725 (quantiser passes by (row, span) items, batched x permute, the
# swapped decode kernel's epilogue inputs loaded at unit start) against 53fd79d (base: the library of
# session 8), and the suite with v1's FP8 stage-wise checks.
# Prediction (before the run): suite green: --quick 170/170, --filter fp8 --gemm hopper all, --filter
# fp8 --gemm v1 all (v1 flips <= 8 per run: the probe's 3e-8 A2 error), memcheck 0, racecheck 0.
# A/B new/base (bench_gpu_forward, medians of 30 graph replays, two rounds alternated): per-tensor
# FP8 T <= 64 0.75-0.9 (mixtral T=1 0.178 -> ~0.133 ms: the amax/quantise passes ~45 us -> ~8 us);
# block-scaled deepseek T=64 2.525 -> ~2.42 ms (GEMM2 850 -> ~790 us, permute 22 -> ~8 us, A2
# quantiser 23 -> ~8 us); T = 512 (tiled kernel, same GEMMs) 0.97-1.0.
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
  for arm in new base; do
    X=$B/bench_gpu_forward; [ $arm = base ] && X=/tmp/base/$B/bench_gpu_forward
    for d in fp8 fp8-tensor; do
      timeout 60 $X $S4 --dtype $d > $F/${arm}_${d}_$i.log 2>&1; mark "fwd $arm $d $i" $? $F/${arm}_${d}_$i.log
    done
  done
done
for d in fp8 fp8-tensor; do
  mkdir -p $F/$d && for f in $F/*_${d}_*.log; do b=$(basename $f .log); cp $f $F/$d/${b%%_*}_${b##*_}.log; done
  python3 tools/ab_summary.py $F/$d new base > $F/ab_$d.md 2>&1
done
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,sm__cycles_elapsed.avg.per_second
for d in fp8 fp8-tensor; do
  for st in mixtral-8x7b:1 deepseek-v3:64; do
    timeout 60 ncu --clock-control none --cache-control none --metrics $M --csv --launch-count 30 \
      $B/bench_gpu_forward --shapes ${st%:*} --tokens ${st#*:} --gemm hopper --dtype $d > $P/ncu_${d}_${st%:*}_${st#*:}.csv 2>&1
    mark "ncu $d $st" $? /dev/null
  done
done
python3 tools/ncu_summary.py $P/ncu_*.csv > $P/summary.md 2>&1; mark summary $? /dev/null
run memcheck_fp8 60 compute-sanitizer --error-exitcode 3 --tool memcheck $T --quick --filter fp8
run racecheck_fp8 90 compute-sanitizer --error-exitcode 3 --tool racecheck $T --quick --gemm hopper --filter fp8-
run test_fp8_v1 100 $T --filter fp8 --gemm v1
left=$((540 - (SECONDS - t0))); [ $left -gt 150 ] && left=150
run test_fp8_hopper $left $T --filter fp8 --gemm hopper
mark done 0 /dev/null
