#!/usr/bin/env bash
# Prepared in session 9 for a later call (not yet run): why deepseek-v3 T=64's GEMM2 on the swapped
# FP8 decode kernel streams 3.9 TB/s (0.84-0.855 ms, K2-K4 ncu) where GEMM1 streams 4.37 and the lab's
# GEMM2 (lab/decode_swap_lab.cu, same shape and ring) 4.31 (J1, K1). ncu's warp-state, scheduler and
# memory sections of both GEMM2s, caches and clocks as they run.
# Prediction (before any run): the library's consumer warps stall longer on the full barrier (the
# producer is the bottleneck), with more L2 sectors per request on the A2 operand's 32-row boxes
# (its rows span 14.5 MB of a2q against the lab's 1 MB of packed rows) and lower DRAM throughput;
# the lab's stalls are the same kind, shorter. Then the FP8 MOEFUSE_SWAP_PIPELINE=1 check and A/B. ~2.5 min. From the repo root, after
# `STAGES=build OUT=$O bash tests/gpu/run_on_device.sh` built build-device:
#   O=$OUT bash bench/results/next-session/gemm2_stream_probe.sh
set -u
O=${O:-$PWD/probe-out}; mkdir -p $O
nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -Iinclude -Isrc/core -Isrc/cuda -Isrc/cuda/hopper -Ilab \
  -o /tmp/dsl lab/decode_swap_lab.cu -lcuda > $O/build_lab.log 2>&1 || exit 1
S="--section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats"
# The lab: its check launch first, then the timed ones; the second launch is a timed one.
timeout 120 ncu --clock-control none --cache-control none $S --kernel-name regex:swap_kernel --launch-skip 1 \
  --launch-count 1 /tmp/dsl --shapes deepseek --tokens 64 --nt 32 > $O/ncu_lab_gemm2.txt 2>&1
echo "lab rc=$?" >> $O/probe.log
# The library: GEMM2 of the second and third forwards (the first is the graph's warm-up).
timeout 120 ncu --clock-control none --cache-control none $S --kernel-name-base demangled \
  --kernel-name 'regex:decode_swap_kernel<1, false' --launch-skip 1 --launch-count 2 \
  build-device/bench_gpu_forward --shapes deepseek-v3 --tokens 64 --gemm hopper --dtype fp8 > $O/ncu_lib_gemm2.txt 2>&1
echo "lib rc=$?" >> $O/probe.log
# The FP8 form of MOEFUSE_SWAP_PIPELINE=1 (two k-blocks a wait): checked, then
# A/B against the shipped mainloop (prediction: GEMM2-heavy cells gain most; deepseek T=64 0.96-1.0).
MOEFUSE_SWAP_PIPELINE=1 timeout 90 build-device/test_gpu_forward --quick --gemm hopper --filter fp8 > $O/quick_fp8_pipe.txt 2>&1
echo "quick fp8 pipe rc=$?: $(tail -n 1 $O/quick_fp8_pipe.txt)" >> $O/probe.log
MOEFUSE_SWAP_PIPELINE=1 timeout 90 compute-sanitizer --error-exitcode 3 --tool racecheck build-device/test_gpu_forward \
  --quick --gemm hopper --filter fp8- > $O/racecheck_fp8_pipe.txt 2>&1
echo "racecheck fp8 pipe rc=$?: $(tail -n 1 $O/racecheck_fp8_pipe.txt)" >> $O/probe.log
mkdir -p $O/fwd
S4="--shapes qwen3-30b-a3b,gpt-oss-120b,mixtral-8x7b,deepseek-v3 --tokens 1,8,64 --gemm hopper --dtype fp8"
for i in 1 2; do
  MOEFUSE_SWAP_PIPELINE=1 timeout 60 build-device/bench_gpu_forward $S4 > $O/fwd/pipe_$i.log 2>&1
  MOEFUSE_SWAP_PIPELINE=0 timeout 60 build-device/bench_gpu_forward $S4 > $O/fwd/base_$i.log 2>&1
done
python3 tools/ab_summary.py $O/fwd pipe base > $O/fwd/ab.md 2>&1
cd $O && tar czf probe.tgz *.txt probe.log build_lab.log fwd && rm -rf *.txt fwd
