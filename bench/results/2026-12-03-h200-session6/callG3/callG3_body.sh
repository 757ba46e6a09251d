# Device call G3 (session 6): HEAD (663a618's code: the bf16 grouped kernel's N-tail box) against
# f6ef8a5 (old, call G2's code) built beside it.
# 1. HEAD: suite --selftest, --quick, --perf 1,8,64,512,4096; memcheck and racecheck on the Hopper
#    bf16 cases (the tail box: tma-* models with H = 192, I = 320, gpt-oss);
# 2. bench_gpu_forward bf16 HEAD vs old, T = 512, 4096, 16384, alternated twice;
# 3. roofline --measure run 7 on HEAD;
# 4. the one-process bf16 bench with every peer; make run.
set -u
export LD_LIBRARY_PATH=$PWD/.deps/cjson/lib
B=build-device; T=$B/test_gpu_forward; L=$O/suite
mkdir -p $L $O/fwd $O/measure $O/bf16 $O/makerun
t0=$SECONDS
mark() { echo "$1: rc=$2 at $((SECONDS - t0)) s; $(tail -n 1 $3 2>/dev/null)" >> $O/call.log; }
run() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $L/$n.log 2>&1; mark $n $? $L/$n.log; }
C=(-DCJSON_INCLUDE_DIR=$PWD/.deps/cjson/include -DCJSON_LIBRARY=$PWD/.deps/cjson/lib/libcjson.so)
( cd /tmp/old && cmake -S . -B build-old -DCMAKE_BUILD_TYPE=Release -DMOEFUSE_CUDA=ON "${C[@]}" > /tmp/old.log 2>&1 \
  && cmake --build build-old -j 6 --target bench_gpu_forward >> /tmp/old.log 2>&1; echo $? > /tmp/old.rc ) &
STAGES=build OUT=$L timeout 150 bash tests/gpu/run_on_device.sh > /dev/null 2>&1; mark build $? /dev/null
wait; mark build_old "$(cat /tmp/old.rc)" /tmp/old.log
run selftest 30 $T --selftest
run test_quick 60 $T --quick
run test_perf 120 $T --perf 1,8,64,512,4096
run memcheck_hopper 90 compute-sanitizer --error-exitcode 3 --tool memcheck $T --quick --gemm hopper --filter tma
run racecheck_hopper 120 compute-sanitizer --error-exitcode 3 --tool racecheck $T --quick --gemm hopper --filter tma-relu2
S4="--shapes qwen3-30b-a3b,gpt-oss-120b,mixtral-8x7b,deepseek-v3 --tokens 512,4096,16384 --gemm hopper"
for i in 1 2; do
  timeout 45 $B/bench_gpu_forward $S4 --dtype bf16 > $O/fwd/bf16head_$i.log 2>&1; mark "fwd head $i" $? $O/fwd/bf16head_$i.log
  timeout 45 /tmp/old/build-old/bench_gpu_forward $S4 --dtype bf16 > $O/fwd/bf16old_$i.log 2>&1
  mark "fwd old $i" $? $O/fwd/bf16old_$i.log
done
python3 tools/ab_summary.py $O/fwd bf16head bf16old > $O/fwd/ab_bf16.md 2>&1
OUT=$O/measure STAGES="build measure" DEADLINE=130 timeout 140 bash tests/gpu/measure_on_device.sh \
    > $O/measure/stdout.log 2>&1; mark measure $? $O/measure/stdout.log
left=$((545 - (SECONDS - t0)))
BENCH_COMMIT=$BENCH_COMMIT TOTAL_S=$left OUT=$O/bf16 timeout $left bash bench/run_on_device.sh --dtype bf16 \
    --target-s 0.1 > /dev/null 2>&1; mark "bench_moe bf16" $? /dev/null
C="-DCJSON_INCLUDE_DIR=$PWD/.deps/cjson/include -DCJSON_LIBRARY=$PWD/.deps/cjson/lib/libcjson.so"
timeout 25 make run CMAKE_FLAGS="$C" > $O/makerun/make_run.log 2>&1; mark "make run" $? $O/makerun/make_run.log
mark done 0 /dev/null
