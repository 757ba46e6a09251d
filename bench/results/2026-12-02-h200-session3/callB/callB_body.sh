# Device call B (session 3): the quantiser fix under initcheck/racecheck, then the FP8 bench of
# all four PERF.md shapes x six T in one process. Runs in the snapshot root.
set -u
export LD_LIBRARY_PATH=$PWD/.deps/cjson/lib
B=build-device; T=$B/test_gpu_forward
mkdir -p $O/suite $O/fp8
t0=$SECONDS
mark() { echo "$1: rc=$2 at $((SECONDS - t0)) s" >> $O/call.log; }
STAGES=build OUT=$O/suite timeout 150 bash tests/gpu/run_on_device.sh > /dev/null 2>&1; mark build $?
timeout 30 $T --quick > $O/suite/test_quick.log 2>&1; mark "test --quick" $?
CS="compute-sanitizer --error-exitcode 3"
timeout 60 $CS --tool initcheck $T --quick --gemm hopper --filter fp8 > $O/suite/initcheck_fp8_hopper.log 2>&1; mark "initcheck fp8 hopper" $?
timeout 90 $CS --tool racecheck $T --quick --gemm hopper --filter fp8-block-row128-tails > $O/suite/racecheck_fp8_tails_hopper.log 2>&1; mark "racecheck fp8-block-row128-tails hopper" $?
BENCH_COMMIT=$BENCH_COMMIT TOTAL_S=$((560 - (SECONDS - t0))) OUT=$O/fp8 bash bench/run_on_device.sh --dtype fp8 --target-s 0.1 > /dev/null 2>&1; mark "bench_moe fp8" $?
