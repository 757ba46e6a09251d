# Device call 4 body: runs inside the snapshot root; $O is the output dir.
set -u
export LD_LIBRARY_PATH=$PWD/.deps/cjson/lib
B=build-device
t0=$SECONDS
mark() { echo "$1: rc=$2 at $((SECONDS - t0)) s" >> $O/call.log; }
STAGES=build OUT=$O/suite timeout 120 bash tests/gpu/run_on_device.sh > /dev/null 2>&1; mark build $?
timeout 80 $B/test_gpu_forward --quick > $O/suite/test_quick.log 2>&1; mark "test --quick" $?
timeout 150 $B/test_gpu_forward --perf 1,8,64,512,4096 > $O/suite/test_perf.log 2>&1; mark "test --perf" $?
MOEFUSE_HOPPER_A=gather timeout 40 $B/test_gpu_forward --quick --gemm hopper > $O/suite/test_quick_gather.log 2>&1; mark "gather --quick" $?
MOEFUSE_HOPPER_A=gather timeout 60 $B/test_gpu_forward --perf 4096 --gemm hopper > $O/suite/test_perf_gather.log 2>&1; mark "gather --perf 4096" $?
MOEFUSE_PLAN=multi timeout 40 $B/test_gpu_forward --quick > $O/suite/test_quick_plan_multi.log 2>&1; mark "plan multi --quick" $?
MOEFUSE_V1_TILE=decode MOEFUSE_V1_DECODE_SPLIT=k timeout 40 $B/test_gpu_forward --quick --gemm v1 > $O/suite/test_quick_decode_k.log 2>&1; mark "decode k --quick" $?
mkdir -p $O/bench
for a in permute gather; do MOEFUSE_HOPPER_A=$a timeout 60 $B/bench_gpu_forward --tokens 4096,16384 --gemm hopper > $O/bench/hopper_$a.log 2>&1; mark "bench hopper $a" $?; done
timeout 30 $B/bench_gpu_forward --tokens 1,8,64 --gemm v1 > $O/bench/decode_default.log 2>&1; mark "bench decode default" $?
MOEFUSE_V1_DECODE_SPLIT=k timeout 30 $B/bench_gpu_forward --tokens 1,8,64 --gemm v1 > $O/bench/decode_sel_k.log 2>&1; mark "bench decode sel+k" $?
MOEFUSE_V1_TILE=decode MOEFUSE_V1_DECODE_SPLIT=k timeout 30 $B/bench_gpu_forward --tokens 1,8,64 --gemm v1 > $O/bench/decode_forced_k.log 2>&1; mark "bench decode forced k" $?
timeout 60 $B/bench_gpu_forward --dtype fp8 --tokens 1,64,512,4096,16384 --gemm v1,hopper > $O/bench/fp8.log 2>&1; mark "bench fp8" $?
