# Device call A (session 3): FP8 probe, quick suite, sanitizers. Runs in the snapshot root.
set -u
export LD_LIBRARY_PATH=$PWD/.deps/cjson/lib
B=build-device; T=$B/test_gpu_forward
mkdir -p $O/suite $O/probe
t0=$SECONDS
mark() { echo "$1: rc=$2 at $((SECONDS - t0)) s" >> $O/call.log; }
STAGES=build OUT=$O/suite timeout 150 bash tests/gpu/run_on_device.sh > /dev/null 2>&1; mark build $?
OUT=$O/probe PROBE_LIMIT=60 timeout 120 bash tests/gpu/fp8_a2_probe.sh 6 > $O/probe/stdout.log 2>&1; mark probe $?
timeout 30 $T --quick > $O/suite/test_quick.log 2>&1; mark "test --quick" $?
CS="compute-sanitizer --error-exitcode 3"
timeout 90 $CS --tool initcheck $T --quick --gemm hopper --filter stale > $O/suite/initcheck_stale.log 2>&1; mark "initcheck stale hopper" $?
timeout 180 $CS --tool memcheck --leak-check no $T --quick --gemm hopper > $O/suite/memcheck_quick_hopper.log 2>&1; mark "memcheck quick hopper" $?
timeout 100 $CS --tool racecheck $T --quick --gemm hopper --filter deepseek-v3-small > $O/suite/racecheck_dsv3_hopper.log 2>&1; mark "racecheck dsv3-small hopper" $?
timeout 60 $CS --tool synccheck $T --quick --gemm hopper --filter qwen3 > $O/suite/synccheck_qwen3_hopper.log 2>&1; mark "synccheck qwen3 hopper" $?
mkdir -p $O/measure
OUT=$O/measure DEADLINE=150 timeout 160 bash tests/gpu/measure_on_device.sh > $O/measure/stdout.log 2>&1; mark "measure" $?
