# Device call K5 (session 9, the budget's last ~300 s): the final code (padding rows' codes unwritten
# by the permute too, batched combine, 1/4/16 groups a warp in the row128 quantiser, the kb knob gone)
# validated where it changed, and the FP8 bench with the peers.
# Prediction (before the run): --quick 170/170; "fp8 quantiser" all (the new 12000 x 1400 shape bit for
# bit); fp8-perf-deepseek on the Hopper path 14/14; memcheck 0. Bench: deepseek-v3 block-scaled T=64
# ~2.445 ms (K4: 2.471; permute -17 us, combine -4, A2 quantiser -5), 1.49-1.50x torch's
# _scaled_grouped_mm; every other FP8 cell T <= 64 >= 1.5x as in K4.
set -u
export LD_LIBRARY_PATH=$PWD/.deps/cjson/lib
B=build-device; T=$B/test_gpu_forward; L=$O/suite
mkdir -p $L
t0=$SECONDS
mark() { echo "$1: rc=$2 at $((SECONDS - t0)) s; $(tail -n 1 $3 2>/dev/null)" >> $O/call.log; }
run() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $L/$n.log 2>&1; mark $n $? $L/$n.log; }
STAGES=build OUT=$L timeout 150 bash tests/gpu/run_on_device.sh > /dev/null 2>&1; mark build $? /dev/null
run test_quick 60 $T --quick
BENCH_COMMIT=$BENCH_COMMIT TOTAL_S=130 OUT=$O/fp8 timeout 150 bash bench/run_on_device.sh --dtype fp8 \
    --target-s 0.1 > $O/fp8_run.log 2>&1; mark "bench_moe fp8" $? $O/fp8_run.log
mv $O/fp8_run.log $O/fp8/ 2>/dev/null
run memcheck_fp8 40 compute-sanitizer --error-exitcode 3 --tool memcheck $T --quick --filter fp8
run quantiser 40 $T --filter "fp8 quantiser"
left=$((255 - (SECONDS - t0))); [ $left -gt 60 ] && left=60; [ $left -lt 5 ] && left=5
run perf_deepseek $left $T --filter fp8-perf-deepseek --gemm hopper
mark done 0 /dev/null
