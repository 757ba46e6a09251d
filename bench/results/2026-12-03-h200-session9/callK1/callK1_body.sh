# Device call K1 (session 9): (a) the first run of the swapped decode kernel in bf16 (lab), (b) the GPU
# suite on the review mends b5958f5/8d37512 (never run on a GPU), (c) ncu of the per-tensor FP8 decode
# forwards against the block-scaled ones.
# Prediction (before the run): (a) --check passes on all shapes; at T=64 the bf16 stream reaches >= 90%
# of the read ceiling on gpt-oss/deepseek, >= 80% on qwen3. (b) --quick 170/170, --filter fp8 --gemm
# hopper 221/221, memcheck 0 errors, racecheck 0 hazards. (c) per-tensor's extra time is the amax and
# quantiser passes of x and A2 (~10 us each at T=1) plus slower GEMMs from the scale loads.
set -u
export LD_LIBRARY_PATH=$PWD/.deps/cjson/lib
B=build-device; T=$B/test_gpu_forward; L=$O/suite
mkdir -p $L $O/lab $O/probe
t0=$SECONDS
mark() { echo "$1: rc=$2 at $((SECONDS - t0)) s; $(tail -n 1 $3 2>/dev/null)" >> $O/call.log; }
run() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $L/$n.log 2>&1; mark $n $? $L/$n.log; }
STAGES=build OUT=$L timeout 150 bash tests/gpu/run_on_device.sh > /dev/null 2>&1; mark build $? /dev/null
cmake --build $B -j 16 --target moefuse > $L/build_lib.log 2>&1; mark build_lib $? $L/build_lib.log
O=$O/lab timeout 150 bash bench/results/next-session/decode_swap_bf16_probe.sh; mark bf16_lab $? $O/lab/bf16_check.log
run selftest 30 $T --selftest
run test_quick 60 $T --quick
run memcheck_fp8 60 compute-sanitizer --error-exitcode 3 --tool memcheck $T --quick --gemm hopper --filter fp8
run racecheck_fp8 90 compute-sanitizer --error-exitcode 3 --tool racecheck $T --quick --gemm hopper --filter fp8-
run test_fp8_hopper 150 $T --filter fp8 --gemm hopper
MOEFUSE_LIB=$PWD/$B/libmoefuse.so O=$O/probe timeout 150 bash bench/results/next-session/fp8_tensor_decode_probe.sh
mark probe $? $O/probe/probe.log
mark done 0 /dev/null
