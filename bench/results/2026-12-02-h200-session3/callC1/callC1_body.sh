# Device call C1 (session 3): the GPU suite and the sanitizers at one commit. Runs in the snapshot root.
set -u
export LD_LIBRARY_PATH=$PWD/.deps/cjson/lib
B=build-device; T=$B/test_gpu_forward; L=$O/suite
mkdir -p $L
t0=$SECONDS
mark() { echo "$1: rc=$2 at $((SECONDS - t0)) s; $(tail -n 1 $3 2>/dev/null)" >> $O/call.log; }
run() { # name limit command...: skipped past 480 s, its limit cut to what is left of 540 s
    local n=$1 lim=$2 used=$((SECONDS - t0)); shift 2
    if [ $used -gt 480 ]; then echo "$n: skipped at $used s" >> $O/call.log; return; fi
    [ $lim -gt $((540 - used)) ] && lim=$((540 - used))
    timeout $lim "$@" > $L/$n.log 2>&1; mark $n $? $L/$n.log
}
STAGES=build OUT=$L timeout 150 bash tests/gpu/run_on_device.sh > /dev/null 2>&1; mark build $? /dev/null
run selftest 30 $T --selftest
run test_quick 40 $T --quick
MOEFUSE_V1_TILE=decode run fp8_v1_decode_forced 60 $T --quick --gemm v1 --filter fp8
MOEFUSE_V1_TILE=wide run fp8_v1_wide_forced 60 $T --quick --gemm v1 --filter fp8
run test_perf 200 $T --perf 1,8,64,512,4096
CS="compute-sanitizer --error-exitcode 3"
run memcheck_quick 150 $CS --tool memcheck --leak-check no $T --quick
run initcheck_quick_hopper 90 $CS --tool initcheck $T --quick --gemm hopper
run initcheck_fp8_v1 60 $CS --tool initcheck $T --quick --gemm v1 --filter fp8
run racecheck_tma_hopper 60 $CS --tool racecheck $T --quick --gemm hopper --filter tma-swiglu-bias
run racecheck_fp8_v1_decode 60 $CS --tool racecheck $T --quick --gemm v1 --filter fp8-block-row128-tails
run synccheck_hopper 60 $CS --tool synccheck $T --quick --gemm hopper --filter tma-
