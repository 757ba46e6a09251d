# Device call C2 (session 3): benches at one commit. Runs in the snapshot root.
set -u
export LD_LIBRARY_PATH=$PWD/.deps/cjson/lib
B=build-device
mkdir -p $O/bf16 $O/fp8 $O/untuned $O/v1vs $O/measure $O/makerun
t0=$SECONDS
mark() { echo "$1: rc=$2 at $((SECONDS - t0)) s" >> $O/call.log; }
left() { echo $((575 - (SECONDS - t0))); }
BENCH_COMMIT=$BENCH_COMMIT TOTAL_S=190 OUT=$O/bf16 bash bench/run_on_device.sh --target-s 0.1 > /dev/null 2>&1; mark "bench_moe bf16" $?
BENCH_COMMIT=$BENCH_COMMIT TOTAL_S=75 OUT=$O/fp8 bash bench/run_on_device.sh --dtype fp8 --target-s 0.1 --tokens 1,8,64,512 > /dev/null 2>&1; mark "bench_moe fp8 T<=512" $?
BENCH_COMMIT=$BENCH_COMMIT TOTAL_S=110 OUT=$O/untuned bash bench/run_on_device.sh --target-s 0.1 --shapes qwen3-235b-a22b,glm-4.5-air,qwen3-next-80b-a3b,gpt-oss-20b --tokens 4096,16384 > /dev/null 2>&1; mark "bench_moe untuned" $?
cmake --build $B -j16 --target bench_gpu_forward > $O/v1vs/build.log 2>&1
timeout 60 $B/bench_gpu_forward --tokens 4096 --gemm v1,hopper > $O/v1vs/bench_gpu_forward_4096.log 2>&1; mark "bench_gpu_forward 4096 v1,hopper" $?
OUT=$O/measure DEADLINE=$(( $(left) - 70 )) timeout $(( $(left) - 60 )) bash tests/gpu/measure_on_device.sh > $O/measure/stdout.log 2>&1; mark measure $?
timeout $(( $(left) )) make run > $O/makerun/make_run.log 2>&1; mark "make run" $?
