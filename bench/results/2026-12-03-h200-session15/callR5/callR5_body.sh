# Device call R5 (session 15): the bf16 path rule after R4 (Hopper tiles above 16 routed rows per
# expert instead of from 128; moe__gemm_select). The GPU suite --quick on it (selection case,
# workspace monotonicity across the paths, every case on both paths), and the CLI's forward with
# the default path against MOEFUSE_GEMM=v1 at two shapes the change moves (qwen3-next-80b-a3b
# T=4096: 80 rows per expert; qwen3-30b-a3b T=512: 32), routing from router weights included.
# Prediction (before the run): --quick all pass; the config line names hopper for both cells
# under the default; default / v1 time 0.5-0.6 (qwen3-next) and 0.8-0.9 (qwen3), as R4's forced
# runs (0.509, 0.822) plus the routing both share.
set -u
export LD_LIBRARY_PATH=$PWD/.deps/cjson/lib
L=$O/suite; C=$O/cli; mkdir -p $L $C
t0=$SECONDS
mark() { echo "$1: rc=$2 at $((SECONDS - t0)) s; $(tail -n 1 $3 2>/dev/null)" >> $O/call.log; }
STAGES=build OUT=$L timeout 150 bash tests/gpu/run_on_device.sh > $L/build_stdout.log 2>&1; mark build $? $L/build_stdout.log
timeout 60 cmake --build build-device -j 16 --target moefuse_cli > $L/cli_build.log 2>&1; mark cli_build $? $L/cli_build.log
timeout 100 build-device/test_gpu_forward --quick > $L/test_quick.log 2>&1; mark test_quick $? $L/test_quick.log
M=build-device/moefuse
for cell in "qwen3-next-80b-a3b 4096" "qwen3-30b-a3b 512"; do
  set -- $cell
  timeout 60 $M run --model $1 --tokens $2 --json > $C/$1_$2_default.json 2> $C/$1_$2_default.err; mark "$1 $2 default" $? /dev/null
  MOEFUSE_GEMM=v1 timeout 60 $M run --model $1 --tokens $2 --json > $C/$1_$2_v1.json 2> $C/$1_$2_v1.err; mark "$1 $2 v1" $? /dev/null
done
# 3. ncu of the dense FP8 8192^3 GEMM: the library's FP8 engine and cuBLASLt's kernel, clock as
#    found (issue 4's largest gap: 0.665-0.671x in R2/R3). Prediction: our tensor pipe ~45-50%
#    active against cuBLASLt's ~70%; shared-memory pipe busier per MMA on ours (128 x 128 tiles).
P=$O/prof; mkdir -p $P
VARIANTS=fp8engine LAB_LIMIT=60 LAB=fp8 OUT=$O/lab_fp8 timeout 90 bash lab/run_on_device.sh > $P/lab_fp8_stdout.log 2>&1; mark lab_fp8 $? $P/lab_fp8_stdout.log
G=/tmp/moefuse-fp8lab-build/gemm_fp8_lab
S="--section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats --section LaunchStats --metrics sm__cycles_elapsed.avg.per_second,smsp__inst_executed.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum"
timeout 40 ncu --clock-control none $S -k regex:fp8_gemm_kernel -c 1 $G --variants fp8engine --filter square-8192 > $P/ncu_fp8engine.txt 2>&1; mark ncu_fp8engine $? /dev/null
timeout 40 ncu --clock-control none $S -k regex:'nvjet|xmma|cutlass|sm90' -c 1 $G --variants fp8engine --filter square-8192 > $P/ncu_cublaslt.txt 2>&1; mark ncu_cublaslt $? /dev/null
mark done 0 /dev/null
