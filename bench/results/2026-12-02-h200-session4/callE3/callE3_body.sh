# Device call E3 (session 4): the FP8 kernels with the scale ring apart from the tiles' ring.
# Suite (--quick; FP8 --perf 1,8,64,512,4096), racecheck/memcheck on the FP8 Hopper cases, the FP8
# lab (fp8v1 / fp8v2 / engine), bench_gpu_forward fp8 on the four PERF.md shapes at T = 4096 and
# 16384, and Nsight Compute of the grouped GEMM1/GEMM2 of qwen3 T=16384.
set -u
export LD_LIBRARY_PATH=$PWD/.deps/cjson/lib
B=build-device; T=$B/test_gpu_forward; L=$O/suite
mkdir -p $L $O/fwd $O/lab $O/ncu
t0=$SECONDS
mark() { echo "$1: rc=$2 at $((SECONDS - t0)) s; $(tail -n 1 $3 2>/dev/null)" >> $O/call.log; }
run() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $L/$n.log 2>&1; mark $n $? $L/$n.log; }
STAGES=build OUT=$L timeout 150 bash tests/gpu/run_on_device.sh > /dev/null 2>&1; mark build $? /dev/null
run test_quick 40 $T --quick
timeout 60 $B/bench_gpu_forward --shapes qwen3-30b-a3b,gpt-oss-120b,mixtral-8x7b,deepseek-v3 --tokens 4096,16384 \
    --gemm hopper --dtype fp8 --json $O/fwd/fwd_fp8.jsonl > $O/fwd/fwd_fp8.log 2>&1; mark "bench_gpu_forward fp8" $? $O/fwd/fwd_fp8.log
QUICK=1 LAB_BUILD=/tmp/fp8lab OUT=$O/lab VARIANTS="fp8v1 fp8v2 fp8engine" LAB_LIMIT=45 \
    timeout 150 bash lab/run_fp8_on_device.sh > $O/lab/run.log 2>&1; mark lab $? $O/lab/run.log
run test_perf_fp8 100 $T --perf 1,8,64,512,4096 --filter fp8
CS="compute-sanitizer --error-exitcode 3"
run racecheck_fp8_hopper 60 $CS --tool racecheck $T --quick --gemm hopper --filter fp8-block-row128-tails
run memcheck_fp8_hopper 60 $CS --tool memcheck --leak-check no $T --quick --gemm hopper --filter fp8
run synccheck_fp8_hopper 60 $CS --tool synccheck $T --quick --gemm hopper --filter fp8-block-row128-tails
NCU="ncu --clock-control none --set full --import-source no"
run ncu_grouped 60 $NCU -k regex:grouped_fp8 --launch-count 2 -o $O/ncu/grouped_qwen3_16384 \
    $B/bench_gpu_forward --shapes qwen3-30b-a3b --tokens 16384 --gemm hopper --dtype fp8
for r in $O/ncu/*.ncu-rep; do
  ncu -i $r --page raw --csv > ${r%.ncu-rep}.raw.csv 2>&1
  timeout 60 ncu -i $r --page source --csv --print-source sass > ${r%.ncu-rep}.sass.csv 2>&1
done
mark done 0 /dev/null
