# Device call E5 (session 4): the code that lands (the row-table change reverted): suite --quick,
# the one-process FP8 bench with every peer (PERF.md's four shapes x six T), make run.
set -u
export LD_LIBRARY_PATH=$PWD/.deps/cjson/lib
B=build-device; T=$B/test_gpu_forward; L=$O/suite
mkdir -p $L $O/fp8 $O/makerun
t0=$SECONDS
mark() { echo "$1: rc=$2 at $((SECONDS - t0)) s; $(tail -n 1 $3 2>/dev/null)" >> $O/call.log; }
run() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $L/$n.log 2>&1; mark $n $? $L/$n.log; }
STAGES=build OUT=$L timeout 150 bash tests/gpu/run_on_device.sh > /dev/null 2>&1; mark build $? /dev/null
run test_quick 40 $T --quick
BENCH_COMMIT=$BENCH_COMMIT TOTAL_S=220 OUT=$O/fp8 timeout 250 bash bench/run_on_device.sh --dtype fp8 \
    --target-s 0.1 > /dev/null 2>&1; mark "bench_moe fp8" $? /dev/null
C="-DCJSON_INCLUDE_DIR=$PWD/.deps/cjson/include -DCJSON_LIBRARY=$PWD/.deps/cjson/lib/libcjson.so"
timeout 60 make run CMAKE_FLAGS="$C" > $O/makerun/make_run.log 2>&1; mark "make run" $? $O/makerun/make_run.log
mark done 0 /dev/null
