#!/usr/bin/env bash
# Prepared in session 9 for a later call (not yet run): the first GPU run of the bf16 decode path on
# the swapped kernel (c519f4f, opt-in MOEFUSE_BF16_DECODE=swap: decode_swap_kernel<MODE, true>).
# Prediction (before any run): the suite with the variable set is green (every bf16 case at <= 16
# routed rows per expert on Hopper-capable shapes takes the swapped kernel: "[... ran hopper swap]",
# block 32), memcheck 0 errors, racecheck 0 hazards; forward A/B swap/v1 (v1's mma.sync decode
# kernel: what the default runs there) at T = 1/8/64: 0.85-0.95 on qwen3, gpt-oss and deepseek (the lab's bf16
# GEMM2 streamed 83/94/98% of the read ceiling at T = 64, K1), ~1.0 on mixtral (8 experts: up to
# 16 rows each only at T <= 64); pipe/swap 0.95-1.0 (MOEFUSE_SWAP_PIPELINE=1: the pipelined bf16
# mainloop). ~4 min. From the repo root, after
#   STAGES=build OUT=$O bash tests/gpu/run_on_device.sh   (builds build-device):
#   O=$OUT bash bench/results/next-session/bf16_swap_validate.sh
set -u
O=${O:-$PWD/probe-out}; mkdir -p $O/fwd
B=build-device; T=$B/test_gpu_forward
export MOEFUSE_BF16_DECODE=swap
timeout 90 $T --quick > $O/quick_swap.log 2>&1; echo "quick rc=$?: $(tail -n 1 $O/quick_swap.log)" >> $O/probe.log
timeout 120 $T --perf 1,3,8,64 --gemm hopper > $O/perf_swap.log 2>&1; echo "perf rc=$?: $(tail -n 1 $O/perf_swap.log)" >> $O/probe.log
timeout 60 compute-sanitizer --error-exitcode 3 --tool memcheck $T --quick --gemm hopper > $O/memcheck_swap.log 2>&1
echo "memcheck rc=$?: $(tail -n 1 $O/memcheck_swap.log)" >> $O/probe.log
timeout 90 compute-sanitizer --error-exitcode 3 --tool racecheck $T --quick --gemm hopper > $O/racecheck_swap.log 2>&1
echo "racecheck rc=$?: $(tail -n 1 $O/racecheck_swap.log)" >> $O/probe.log
S4="--shapes qwen3-30b-a3b,gpt-oss-120b,mixtral-8x7b,deepseek-v3 --tokens 1,8,64"
# Arms: swap (the new kernel), pipe (it with the pipelined mainloop, MOEFUSE_SWAP_PIPELINE=1),
# v1 (what the default takes at these T), tiles (the Hopper tiles).
MOEFUSE_SWAP_PIPELINE=1 timeout 90 $T --quick --gemm hopper > $O/quick_pipe_swap.log 2>&1
echo "quick pipe rc=$?: $(tail -n 1 $O/quick_pipe_swap.log)" >> $O/probe.log
MOEFUSE_SWAP_PIPELINE=1 timeout 90 compute-sanitizer --error-exitcode 3 --tool racecheck $T --quick --gemm hopper \
  > $O/racecheck_pipe_swap.log 2>&1
echo "racecheck pipe rc=$?: $(tail -n 1 $O/racecheck_pipe_swap.log)" >> $O/probe.log
for i in 1 2; do
  MOEFUSE_BF16_DECODE=swap timeout 60 $B/bench_gpu_forward $S4 --gemm hopper > $O/fwd/swap_$i.log 2>&1
  MOEFUSE_SWAP_PIPELINE=1 MOEFUSE_BF16_DECODE=swap timeout 60 $B/bench_gpu_forward $S4 --gemm hopper > $O/fwd/pipe_$i.log 2>&1
  MOEFUSE_BF16_DECODE=off timeout 60 $B/bench_gpu_forward $S4 --gemm v1 > $O/fwd/v1_$i.log 2>&1
  MOEFUSE_BF16_DECODE=off timeout 60 $B/bench_gpu_forward $S4 --gemm hopper > $O/fwd/tiles_$i.log 2>&1
done
python3 tools/ab_summary.py $O/fwd swap pipe v1 tiles > $O/fwd/ab.md 2>&1
cd $O && tar czf probe.tgz *.log fwd && rm -rf *_swap.log fwd
