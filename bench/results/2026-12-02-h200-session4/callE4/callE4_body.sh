# Device call E4 (session 4): the FP8 grouped kernel with its row tables filled ahead by producer
# warp 2. Suite (--quick; FP8 --perf 1,64,4096), racecheck / synccheck on FP8 Hopper cases,
# bench_gpu_forward fp8 (four shapes, T = 64, 4096, 16384) alternated with 45423dc's (call E3) built beside it, the grouped
# lab's FP8 epilogue variants (shipped vs no store), then the one-process FP8 bench with every peer.
set -u
export LD_LIBRARY_PATH=$PWD/.deps/cjson/lib
B=build-device; T=$B/test_gpu_forward; L=$O/suite
mkdir -p $L $O/fwd $O/glab $O/fp8
t0=$SECONDS
mark() { echo "$1: rc=$2 at $((SECONDS - t0)) s; $(tail -n 1 $3 2>/dev/null)" >> $O/call.log; }
run() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $L/$n.log 2>&1; mark $n $? $L/$n.log; }
C=(-DCJSON_INCLUDE_DIR=$PWD/.deps/cjson/include -DCJSON_LIBRARY=$PWD/.deps/cjson/lib/libcjson.so)
( cd /tmp/old && cmake -S . -B build-old -DCMAKE_BUILD_TYPE=Release -DMOEFUSE_CUDA=ON "${C[@]}" > /tmp/old.log 2>&1 \
  && cmake --build build-old -j 6 --target bench_gpu_forward >> /tmp/old.log 2>&1; echo $? > /tmp/old.rc ) &
STAGES=build OUT=$L timeout 150 bash tests/gpu/run_on_device.sh > /dev/null 2>&1; mark build $? /dev/null
wait; mark build_old "$(cat /tmp/old.rc)" /tmp/old.log
run test_quick 40 $T --quick
CS="compute-sanitizer --error-exitcode 3"
run racecheck_fp8_hopper 60 $CS --tool racecheck $T --quick --gemm hopper --filter fp8-block-row128-tails
run synccheck_fp8_hopper 60 $CS --tool synccheck $T --quick --gemm hopper --filter fp8
BG="--shapes qwen3-30b-a3b,gpt-oss-120b,mixtral-8x7b,deepseek-v3 --tokens 64,4096,16384 --gemm hopper --dtype fp8"
for i in 1 2; do
  timeout 60 $B/bench_gpu_forward $BG > $O/fwd/head_$i.log 2>&1; mark "fwd head $i" $? $O/fwd/head_$i.log
  timeout 60 /tmp/old/build-old/bench_gpu_forward $BG > $O/fwd/old_$i.log 2>&1; mark "fwd 45423dc $i" $? $O/fwd/old_$i.log
done
run test_perf_fp8 80 $T --perf 1,64,4096 --filter fp8
BENCH_COMMIT=$BENCH_COMMIT TOTAL_S=200 OUT=$O/fp8 timeout 230 bash bench/run_on_device.sh --dtype fp8 \
    --target-s 0.1 > /dev/null 2>&1; mark "bench_moe fp8" $? /dev/null
OUT=$O/glab LAB=fp8 SUITE=0 timeout $((540 - (SECONDS - t0))) bash lab/run_grouped_on_device.sh > $O/glab/run.log 2>&1
mark glab $? $O/glab/run.log
mark done 0 /dev/null
