# Device call E1 (session 4): re-check a3ac3dc/7dada76 (suite, FP8 perf, FP8 bench at prefill,
# --print-config), the FP8 lab (fp8v1, the cluster-2 variant fp8v3, the engine), and Nsight
# Compute of the FP8 kernels (dense engine vs cuBLASLt at 4096^3; grouped GEMM1/GEMM2 of qwen3
# T=16384) to find what limits them. Clocks untouched (--clock-control none).
set -u
export LD_LIBRARY_PATH=$PWD/.deps/cjson/lib
B=build-device; T=$B/test_gpu_forward; L=$O/suite
mkdir -p $L $O/fp8 $O/lab $O/ncu
t0=$SECONDS
mark() { echo "$1: rc=$2 at $((SECONDS - t0)) s; $(tail -n 1 $3 2>/dev/null)" >> $O/call.log; }
run() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $L/$n.log 2>&1; mark $n $? $L/$n.log; }
STAGES=build OUT=$L timeout 150 bash tests/gpu/run_on_device.sh > /dev/null 2>&1; mark build $? /dev/null
run test_quick 40 $T --quick
run test_perf_fp8 100 $T --perf 1,8,64,512,4096 --filter fp8
run print_config 30 $B/moefuse run --model qwen3-30b-a3b --tokens 8 --print-config
run print_config_v1 30 env MOEFUSE_GEMM=v1 $B/moefuse run --model qwen3-30b-a3b --tokens 8 --print-config
NCU="ncu --clock-control none --set full --import-source no"
run ncu_grouped 120 $NCU -k regex:grouped_fp8 --launch-count 2 -o $O/ncu/grouped_qwen3_16384 \
    $B/bench_gpu_forward --shapes qwen3-30b-a3b --tokens 16384 --gemm hopper --dtype fp8
BENCH_COMMIT=$BENCH_COMMIT TOTAL_S=100 OUT=$O/fp8 timeout 130 bash bench/run_on_device.sh --dtype fp8 \
    --tokens 4096,16384 --target-s 0.1 > /dev/null 2>&1; mark "bench_moe fp8" $? /dev/null
QUICK=1 LAB_BUILD=/tmp/fp8lab OUT=$O/lab VARIANTS="fp8v1 fp8v3 fp8engine" LAB_LIMIT=60 timeout 240 \
    bash lab/run_fp8_on_device.sh > $O/lab/run.log 2>&1; mark lab $? $O/lab/run.log
run ncu_dense_engine 60 $NCU -k regex:fp8_gemm_kernel --launch-count 1 -o $O/ncu/dense_engine_4096 \
    /tmp/fp8lab/gemm_fp8_lab --variants fp8engine --filter square-4096
run ncu_dense_cublaslt 60 $NCU -k regex:'sm90|cutlass|xmma' --launch-count 1 -o $O/ncu/dense_cublaslt_4096 \
    /tmp/fp8lab/gemm_fp8_lab --variants fp8engine --filter square-4096
for r in $O/ncu/*.ncu-rep; do
    ncu -i $r --page details --print-units base > ${r%.ncu-rep}.details.txt 2>&1
    ncu -i $r --page raw --csv > ${r%.ncu-rep}.raw.csv 2>&1
done
mark done 0 /dev/null
