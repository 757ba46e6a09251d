# Device call M5 (session 11, the budget's last): the ticket-counter schedule (DYN) in the library
# for the bf16 tiled grouped GEMMs (the workspace holds the counter, zeroed before GEMM1; the ticket
# is now taken after a unit's last load, not at its start: M4 had qwen3 3% slower with it there).
# 1. build; --quick (every Hopper bf16 case now on DYN, each also replayed from a graph);
#    racecheck and memcheck of --quick --gemm hopper;
# 2. grouped_lab static vs dyn, alternated, three rounds, T=4096 and 16384 (as M4);
# 3. bench_gpu_forward bf16, default (dyn) vs MOEFUSE_HOPPER_SCHEDULE=static, T=512..16384, alternated;
# 4. --perf 1,3,8,64,129,512,4096 with what time is left (issue 3's T list on the final kernels).
# Prediction (before the run): all checks pass, racecheck 0 hazards; lab dyn/static: deepseek
# 0.93-0.95 at T=4096, 0.97-1.0 at 16384, mixtral 0.94-1.0, gpt-oss and qwen3 0.98-1.01 (the
# ticket's stall gone); forward dyn/static at T>=4096: deepseek 0.94-0.97, others 0.98-1.01.
set -u
export LD_LIBRARY_PATH=$PWD/.deps/cjson/lib
B=build-device; T=$B/test_gpu_forward; L=$O/suite; LB=$O/lab; F=$O/fwd
mkdir -p $L $LB $F
t0=$SECONDS
mark() { echo "$1: rc=$2 at $((SECONDS - t0)) s; $(tail -n 1 $3 2>/dev/null)" >> $O/call.log; }
run() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $L/$n.log 2>&1; mark $n $? $L/$n.log; }
STAGES=build OUT=$L timeout 150 bash tests/gpu/run_on_device.sh > /dev/null 2>&1; mark build $? /dev/null
nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -lineinfo -Xptxas -v -Iinclude -Isrc/core -Isrc/cuda \
  -Isrc/cuda/hopper -Ilab -o /tmp/grouped_lab lab/grouped_lab.cu > $LB/build.log 2>&1; mark build_lab $? /dev/null
run test_quick 60 $T --quick
run racecheck 120 compute-sanitizer --error-exitcode 3 --tool racecheck $T --quick --gemm hopper
run memcheck 60 compute-sanitizer --error-exitcode 3 --tool memcheck $T --quick --gemm hopper
for i in 1 2 3; do for t in 4096 16384; do for arm in static dyn; do
  V=up_staged,down_staged; [ $arm = dyn ] && V=up_dyn,down_dyn
  LAB_SEED=$((1000 + i)) timeout 60 /tmp/grouped_lab --shapes qwen3,gptoss,mixtral,deepseek --tokens $t --variants $V \
    --json $LB/lab_${t}_${arm}_$i.jsonl > $LB/lab_${t}_${arm}_$i.log 2>&1
  mark "lab T=$t $arm $i" $? $LB/lab_${t}_${arm}_$i.log
done; done; done
S4="--shapes qwen3-30b-a3b,gpt-oss-120b,mixtral-8x7b,deepseek-v3 --tokens 512,4096,16384 --gemm hopper --dtype bf16"
for i in 1 2; do
  timeout 45 $B/bench_gpu_forward $S4 > $F/dyn_$i.log 2>&1; mark "fwd dyn $i" $? /dev/null
  MOEFUSE_HOPPER_SCHEDULE=static timeout 45 $B/bench_gpu_forward $S4 > $F/static_$i.log 2>&1; mark "fwd static $i" $? /dev/null
done
mkdir -p $F/bf16 && for f in $F/*_?.log; do b=$(basename $f .log); cp $f $F/bf16/${b%%_*}_${b##*_}.log; done
python3 tools/ab_summary.py $F/bf16 dyn static > $F/ab_bf16.md 2>&1
left=$((578 - (SECONDS - t0))); [ $left -lt 5 ] && left=5
run perf $left $T --perf 1,3,8,64,129,512,4096
mark done 0 /dev/null
