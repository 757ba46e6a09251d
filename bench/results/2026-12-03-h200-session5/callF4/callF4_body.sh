# Device call F4 (session 5): the landing code. The GLU with __expf/__fdividef (HEAD) against
# bf8fae1 built beside it (expf and an IEEE division), bench_gpu_forward bf16 and fp8, alternated
# twice; suite --quick and the FP8 list under MOEFUSE_FP8_A2=epilogue; memcheck on the FP8 list;
# the one-process benches with every peer (fp8, then bf16); make run.
set -u
export LD_LIBRARY_PATH=$PWD/.deps/cjson/lib
B=build-device; T=$B/test_gpu_forward; L=$O/suite
mkdir -p $L $O/fwd $O/fp8 $O/bf16 $O/makerun
t0=$SECONDS
mark() { echo "$1: rc=$2 at $((SECONDS - t0)) s; $(tail -n 1 $3 2>/dev/null)" >> $O/call.log; }
run() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $L/$n.log 2>&1; mark $n $? $L/$n.log; }
C=(-DCJSON_INCLUDE_DIR=$PWD/.deps/cjson/include -DCJSON_LIBRARY=$PWD/.deps/cjson/lib/libcjson.so)
( cd /tmp/old && cmake -S . -B build-old -DCMAKE_BUILD_TYPE=Release -DMOEFUSE_CUDA=ON "${C[@]}" > /tmp/old.log 2>&1 \
  && cmake --build build-old -j 6 --target bench_gpu_forward >> /tmp/old.log 2>&1; echo $? > /tmp/old.rc ) &
STAGES=build OUT=$L timeout 150 bash tests/gpu/run_on_device.sh > /dev/null 2>&1; mark build $? /dev/null
wait; mark build_old "$(cat /tmp/old.rc)" /tmp/old.log
run test_quick 40 $T --quick
run test_fp8_a2_epilogue 40 env MOEFUSE_FP8_A2=epilogue $T --quick --filter fp8
run memcheck_fp8 60 compute-sanitizer --error-exitcode 3 --tool memcheck $T --quick --gemm hopper --filter fp8
S4="--shapes qwen3-30b-a3b,gpt-oss-120b,mixtral-8x7b,deepseek-v3 --tokens 64,4096,16384 --gemm hopper"
for i in 1 2; do
  for d in bf16 fp8; do
    timeout 60 $B/bench_gpu_forward $S4 --dtype $d > $O/fwd/${d}head_$i.log 2>&1; mark "fwd $d head $i" $? $O/fwd/${d}head_$i.log
    timeout 60 /tmp/old/build-old/bench_gpu_forward $S4 --dtype $d > $O/fwd/${d}old_$i.log 2>&1
    mark "fwd $d bf8fae1 $i" $? $O/fwd/${d}old_$i.log
  done
done
python3 tools/ab_summary.py $O/fwd bf16head bf16old > $O/fwd/ab_bf16.md 2>&1
python3 tools/ab_summary.py $O/fwd fp8head fp8old > $O/fwd/ab_fp8.md 2>&1
BENCH_COMMIT=$BENCH_COMMIT TOTAL_S=150 OUT=$O/fp8 timeout 175 bash bench/run_on_device.sh --dtype fp8 \
    --target-s 0.1 > /dev/null 2>&1; mark "bench_moe fp8" $? /dev/null
BENCH_COMMIT=$BENCH_COMMIT TOTAL_S=150 OUT=$O/bf16 timeout $((560 - (SECONDS - t0))) bash bench/run_on_device.sh \
    --dtype bf16 --target-s 0.1 > /dev/null 2>&1; mark "bench_moe bf16" $? /dev/null
C="-DCJSON_INCLUDE_DIR=$PWD/.deps/cjson/include -DCJSON_LIBRARY=$PWD/.deps/cjson/lib/libcjson.so"
timeout 25 make run CMAKE_FLAGS="$C" > $O/makerun/make_run.log 2>&1; mark "make run" $? $O/makerun/make_run.log
mark done 0 /dev/null
