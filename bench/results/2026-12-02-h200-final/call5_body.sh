# Device call 5 body (the session's last): runs inside the snapshot root; $O is the output dir.
set -u
export LD_LIBRARY_PATH=$PWD/.deps/cjson/lib
B=build-device
t0=$SECONDS
mark() { echo "$1: rc=$2 at $((SECONDS - t0)) s" >> $O/call.log; }
STAGES=build OUT=$O/suite timeout 100 bash tests/gpu/run_on_device.sh > /dev/null 2>&1; mark build $?
timeout 30 $B/test_gpu_forward --quick > $O/suite/test_quick.log 2>&1; mark "test --quick" $?
BENCH_COMMIT=$BENCH_COMMIT TOTAL_S=125 OUT=$O/bf16 bash bench/run_on_device.sh --target-s 0.1 > /dev/null 2>&1; mark "bench_moe bf16" $?
BENCH_COMMIT=$BENCH_COMMIT TOTAL_S=65 OUT=$O/fp8 bash bench/run_on_device.sh --dtype fp8 --target-s 0.1 --shapes qwen3-30b-a3b --tokens 1,64,4096,16384 > /dev/null 2>&1; mark "bench_moe fp8" $?
