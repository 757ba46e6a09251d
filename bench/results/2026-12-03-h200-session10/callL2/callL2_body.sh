# Device call L2 (session 10) on 526eaa1 (= f132c21's code): where the time goes.
# (a) ncu sections of the library's decode_swap_kernel at deepseek-v3 T=64 FP8 (L1's filter named
#     the demangled template and matched nothing): launches 4-5 = GEMM2 of the 2nd forward and GEMM1
#     of the 3rd, side by side with L1's lab GEMM2 (751.9 us, 4.38 TB/s, 0.39 eligible warps/scheduler).
#     Prediction: GEMM2 ~835 us at ~3.95 TB/s; its consumers' top stall is the full-barrier wait
#     (long scoreboard / barrier) with fewer eligible warps than the lab, i.e. the producer cannot
#     keep 8 stages filled across the 16-k-block units.
# (b) per-kernel times (ncu metrics) of the bf16 decode, v1 (mma.sync; the default) vs the swapped
#     kernel (MOEFUSE_BF16_DECODE=swap), where L1's A/B had swap 4-19% slower (T=1, gpt-oss T=8,
#     mixtral) and where it was 5-10% faster (qwen3 T=8/64, gpt-oss T=64).
#     Prediction: the GEMMs make the difference, not the permute; at T=1 the swapped GEMM2 (few
#     units: mixtral 64, gpt-oss 92 for 132 SMs) is the slower one.
set -u
export LD_LIBRARY_PATH=$PWD/.deps/cjson/lib
B=build-device; P=$O/prof
mkdir -p $P
t0=$SECONDS
mark() { echo "$1: rc=$2 at $((SECONDS - t0)) s; $(tail -n 1 $3 2>/dev/null)" >> $O/call.log; }
[ -x $B/bench_gpu_forward ] || STAGES=build OUT=$P timeout 150 bash tests/gpu/run_on_device.sh > /dev/null 2>&1; mark build $? /dev/null
S="--section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats --section LaunchStats --section Occupancy"
timeout 150 ncu --clock-control none --cache-control none $S --kernel-name regex:decode_swap_kernel --launch-skip 3 \
  --launch-count 2 $B/bench_gpu_forward --shapes deepseek-v3 --tokens 64 --gemm hopper --dtype fp8 > $P/ncu_lib_gemm.txt 2>&1
mark "ncu lib" $? /dev/null
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,sm__cycles_elapsed.avg.per_second
for c in "gpt-oss-120b 8" "gpt-oss-120b 64" "qwen3-30b-a3b 1" "qwen3-30b-a3b 64" "mixtral-8x7b 1" "deepseek-v3 8"; do
  set -- $c
  for arm in swap v1; do
    G=v1; [ $arm = swap ] && G=hopper
    MOEFUSE_BF16_DECODE=$([ $arm = swap ] && echo swap || echo off) timeout 60 ncu --clock-control none --cache-control none \
      --metrics $M --csv --launch-count 24 $B/bench_gpu_forward --shapes $1 --tokens $2 --gemm $G > $P/bf16_${arm}_$1_$2.csv 2>&1
    mark "ncu bf16 $arm $1 $2" $? /dev/null
  done
done
python3 tools/ncu_summary.py $P/bf16_*.csv > $P/bf16_summary.md 2>&1
mark done 0 /dev/null
