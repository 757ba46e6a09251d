# Device call R2 (session 15): issue 4's must-show items that no call has measured on what landed.
# 1. Dense mode at 8192^3 against cuBLAS / cuBLASLt in the same process (lab/run_on_device.sh,
#    variants v1 = the library's dense kernel configuration, v2 = clusters of 2, engine = the
#    library's entry moe__hopper_gemm_dense; LAB=fp8: fp8engine = moe__hopper_gemm_fp8).
# 2. The forward on the Hopper path against v1 (mma.sync) at T = 4096 (issue 4: >= 1.3x on all
#    four PERF.md shapes and the untuned ones) and 16384, both paths in one process per shape,
#    2 rounds; bench_gpu_forward, bf16.
# 3. ncu of the dense 8192^3 GEMM, the library's kernel and cuBLAS's, with the clock left as
#    found: SM clock, tensor-pipe activity, shared-memory traffic, warp stalls; where the dense
#    mainloop loses to cuBLAS.
# Prediction (before the run): bf16 dense engine 0.88-0.97x cuBLAS at 8192^3 (first lab run:
#   649 vs 680 TFLOP/s, 0.955x); FP8 dense 0.55-0.65x cuBLASLt. hopper/v1 forward speed-up at
#   T=4096 1.6-2.6x on every shape (>= 1.3x everywhere), at 16384 2.2-2.8x. ncu: same SM clock
#   within 3%; our kernel's tensor pipe lower by about the time ratio; the difference in the
#   stall mix is the consumers' wait on `full` (the ring) rather than the epilogue (K = 8192).
set -u
export LD_LIBRARY_PATH=$PWD/.deps/cjson/lib
L=$O/lab; F=$O/fwd; P=$O/prof; mkdir -p $L $F $P
t0=$SECONDS
mark() { echo "$1: rc=$2 at $((SECONDS - t0)) s" >> $O/call.log; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,power.limit --format=csv > $O/gpu.txt 2>&1
VARIANTS="v1 v2 engine" LAB_LIMIT=60 OUT=$L/bf16 timeout 150 bash lab/run_on_device.sh > $L/bf16_stdout.log 2>&1; mark lab_bf16 $?
VARIANTS="fp8v1 fp8engine" LAB_LIMIT=60 LAB=fp8 OUT=$L/fp8 timeout 120 bash lab/run_on_device.sh > $L/fp8_stdout.log 2>&1; mark lab_fp8 $?
# ncu on the lab binary just built: the dense engine's kernel, then cuBLAS's, at 8192^3.
G=/tmp/moefuse-lab-build/gemm_lab
S="--section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats --section LaunchStats --metrics sm__cycles_elapsed.avg.per_second,smsp__inst_executed.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum"
timeout 60 ncu --clock-control none $S -k regex:gemm_kernel -c 2 $G --variants engine --filter square-8192 > $P/ncu_engine.txt 2>&1; mark ncu_engine $?
timeout 60 ncu --clock-control none $S -k regex:'nvjet|xmma|cutlass|sm90' -c 2 $G --variants engine --filter square-8192 > $P/ncu_cublas.txt 2>&1; mark ncu_cublas $?
STAGES=build OUT=$O/build timeout 150 bash tests/gpu/run_on_device.sh > $O/build_stdout.log 2>&1; mark build $?
B=build-device/bench_gpu_forward
for i in 1 2; do
  timeout 70 $B --shapes qwen3-30b-a3b,gpt-oss-120b,mixtral-8x7b,deepseek-v3 --tokens 4096,16384 --gemm v1,hopper --dtype bf16 > $F/perf_$i.log 2>&1; mark "fwd perf $i" $?
  timeout 50 $B --shapes qwen3-235b-a22b,glm-4.5-air,qwen3-next-80b-a3b,gpt-oss-20b --tokens 4096 --gemm v1,hopper --dtype bf16 > $F/untuned_$i.log 2>&1; mark "fwd untuned $i" $?
done
python3 - $F > $F/hopper_vs_v1.md 2>&1 <<'PY'
import glob, statistics, sys
t = {}
for f in sorted(glob.glob(sys.argv[1] + "/*_[0-9].log")):
    for line in open(f):
        p = line.split()
        if len(p) >= 4 and p[1].isdigit():
            t.setdefault((p[0], int(p[1])), {}).setdefault(p[2], []).append(float(p[3]))
print("| shape | T | v1 ms | hopper ms | v1 / hopper | runs |\n|---|---|---|---|---|---|")
for k in sorted(t):
    v1, hp = t[k].get("v1", []), [x for g, xs in t[k].items() if g != "v1" for x in xs]
    if v1 and hp:
        a, b = statistics.median(v1), statistics.median(hp)
        print(f"| {k[0]} | {k[1]} | {a:.4f} | {b:.4f} | {a/b:.2f}x | {len(v1)}/{len(hp)} |")
PY
mark done 0
