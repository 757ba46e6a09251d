# Device call F2 (session 5): FP8 GEMM1 quantising A2 in its epilogue (EPI_QUANT, cfa5de2) and FP8
# GEMM2 rows in bf16 for bf16 y (1b0cb93). Suite (--quick, the full FP8 list, the FP8 list again
# with MOEFUSE_FP8_A2=kernel: the separate quantiser), compute-sanitizer on the FP8 Hopper cases,
# bench_gpu_forward fp8 three ways, alternated three times: HEAD; HEAD with MOEFUSE_FP8_A2=kernel
# (isolates the epilogue quantiser); 35e4aea built beside it (fp32 rows: isolates the bf16 rows).
# Then FP8 --perf on the PERF.md shapes, the one-process FP8 bench with every peer, make run.
set -u
export LD_LIBRARY_PATH=$PWD/.deps/cjson/lib
B=build-device; T=$B/test_gpu_forward; L=$O/suite
mkdir -p $L $O/fwd $O/fp8 $O/makerun
t0=$SECONDS
mark() { echo "$1: rc=$2 at $((SECONDS - t0)) s; $(tail -n 1 $3 2>/dev/null)" >> $O/call.log; }
run() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $L/$n.log 2>&1; mark $n $? $L/$n.log; }
C=(-DCJSON_INCLUDE_DIR=$PWD/.deps/cjson/include -DCJSON_LIBRARY=$PWD/.deps/cjson/lib/libcjson.so)
( cd /tmp/old && cmake -S . -B build-old -DCMAKE_BUILD_TYPE=Release -DMOEFUSE_CUDA=ON "${C[@]}" > /tmp/old.log 2>&1 \
  && cmake --build build-old -j 6 --target bench_gpu_forward >> /tmp/old.log 2>&1; echo $? > /tmp/old.rc ) &
STAGES=build OUT=$L timeout 150 bash tests/gpu/run_on_device.sh > /dev/null 2>&1; mark build $? /dev/null
wait; mark build_old "$(cat /tmp/old.rc)" /tmp/old.log
run test_quick 40 $T --quick
run test_fp8_full 90 $T --filter fp8
run test_fp8_quick_a2kernel 40 env MOEFUSE_FP8_A2=kernel $T --quick --filter fp8
CS="compute-sanitizer --error-exitcode 3"
run racecheck_fp8 60 $CS --tool racecheck $T --quick --gemm hopper --filter fp8
run initcheck_fp8 60 $CS --tool initcheck $T --quick --gemm hopper --filter fp8
run memcheck_fp8 60 $CS --tool memcheck $T --quick --gemm hopper --filter fp8
BG="--shapes qwen3-30b-a3b,gpt-oss-120b,mixtral-8x7b,deepseek-v3 --tokens 64,4096,16384 --gemm hopper --dtype fp8"
for i in 1 2 3; do
  timeout 60 $B/bench_gpu_forward $BG > $O/fwd/epilogue_$i.log 2>&1; mark "fwd epilogue $i" $? $O/fwd/epilogue_$i.log
  MOEFUSE_FP8_A2=kernel timeout 60 $B/bench_gpu_forward $BG > $O/fwd/kernel_$i.log 2>&1
  mark "fwd kernel $i" $? $O/fwd/kernel_$i.log
  timeout 60 /tmp/old/build-old/bench_gpu_forward $BG > $O/fwd/rows_fp32_$i.log 2>&1
  mark "fwd 35e4aea $i" $? $O/fwd/rows_fp32_$i.log
done
run test_perf_fp8 90 $T --perf 1,64,4096 --filter fp8
BENCH_COMMIT=$BENCH_COMMIT TOTAL_S=200 OUT=$O/fp8 timeout 230 bash bench/run_on_device.sh --dtype fp8 \
    --target-s 0.1 > /dev/null 2>&1; mark "bench_moe fp8" $? /dev/null
C="-DCJSON_INCLUDE_DIR=$PWD/.deps/cjson/include -DCJSON_LIBRARY=$PWD/.deps/cjson/lib/libcjson.so"
timeout 40 make run CMAKE_FLAGS="$C" > $O/makerun/make_run.log 2>&1; mark "make run" $? $O/makerun/make_run.log
mark done 0 /dev/null
