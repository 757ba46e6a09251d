# Device call L1 (session 10) on f132c21 (session 9's final code): the two scripts session 9 prepared,
# each with its own prediction in its header:
#   bench/results/next-session/gemm2_stream_probe.sh  (ncu lab vs library GEMM2 at deepseek T=64;
#     the FP8 MOEFUSE_SWAP_PIPELINE=1 check, racecheck and A/B)
#   bench/results/next-session/bf16_swap_validate.sh  (the bf16 decode on the swapped kernel, opt-in:
#     suite, memcheck, racecheck, A/B swap/pipe/v1/tiles)
# plus --quick on the default paths (prediction: 170/170; the code after K5 has not run on a GPU).
set -u
export LD_LIBRARY_PATH=$PWD/.deps/cjson/lib
B=build-device; T=$B/test_gpu_forward; L=$O/suite
mkdir -p $L
t0=$SECONDS
mark() { echo "$1: rc=$2 at $((SECONDS - t0)) s; $(tail -n 1 $3 2>/dev/null)" >> $O/call.log; }
run() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $L/$n.log 2>&1; mark $n $? $L/$n.log; }
[ -x $T ] || STAGES=build OUT=$L timeout 150 bash tests/gpu/run_on_device.sh > /dev/null 2>&1; mark build $? /dev/null
run test_quick 60 $T --quick
mkdir -p $L/gemm2 $L/bf16
O=$L/gemm2 timeout 220 bash $R/bench/results/2026-12-03-h200-session10/callL1/gemm2_stream_probe.sh > $L/gemm2_probe.log 2>&1
mark gemm2_probe $? $L/gemm2/probe.log
left=$((540 - (SECONDS - t0))); [ $left -gt 300 ] && left=300
O=$L/bf16 timeout $left bash $R/bench/results/2026-12-03-h200-session10/callL1/bf16_swap_validate.sh > $L/bf16_probe.log 2>&1
mark bf16_probe $? $L/bf16/probe.log
mark done 0 /dev/null
