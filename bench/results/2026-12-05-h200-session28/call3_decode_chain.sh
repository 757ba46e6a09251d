#!/usr/bin/env bash
# Prepared in session 27 (no GPU was lent that session; ~7 min). From the repo root, carry .deps:
#   O=$OUT timeout 560 bash bench/results/next-session/session27_decode_chain.sh; then tar $OUT.
# (Move this script into the session's results directory first; it needs no patch: both changes
# are switched by environment variables in one build.)
# Two shorter decode chains on the swapped kernel (src/cuda/NOTES.md "Session 27"), both opt-in:
#  - FP8: GEMM1 quantises A2 in its epilogue (MOEFUSE_FP8_SWAP_A2=epilogue): the A2 quantiser's
#    launch goes (12.5-14.3 us at deepseek-v3 T=64 in session 9's ncu, K4), and the fp32 A2;
#  - bf16: GEMM1's producer gathers the x rows (MOEFUSE_BF16_SWAP_X=gather): the x permute's
#    launch goes (3-5 us at T = 1, session 10's L2), and the permuted copy.
# 1. Correctness: the suite's FP8 list --quick with the A2 epilogue on (its fp8-swap-a2-* cases: 2-tile
#    units, the last group's 1-tile unit, RELU2, an expert over two plan blocks, a fused shared expert
#    with weight_on_input; the stage-wise check compares every A2 code and scale with the oracle's;
#    fp8-swap-a2-bitexact: codes, scales and y bit for bit against the quantiser), the whole list
#    --quick with the gather on (swap-gather-bitexact: y bit for bit against the permuted path);
#    memcheck and racecheck of the two bitexact cases (each switches its opt-in on itself) come last.
# 2. bench_gpu_forward (CUDA-graph replays, medians of 30), PERF.md's four shapes at T = 1, 8, 64, 512,
#    --gemm hopper, 3 rotated rounds. FP8 (the swapped kernel up to 16 rows per expert): arms off / on
#    (A2 epilogue) / onpdl (and MOEFUSE_PDL=1, the other decode-chain change). bf16: the swapped
#    kernel runs by default only from half a row to 16 rows per expert (moe__bf16_swap_select: qwen3
#    and mixtral T = 8, 64; gpt-oss and deepseek T = 64, 512), where it was slower below half a row
#    partly by the permute's launch; so arms off (the default rule) / swap (MOEFUSE_BF16_DECODE=swap:
#    the swapped kernel at every T here) / swapgather (and the gather). swapgather / swap is the
#    gather's effect; swapgather / off at T = 1 says whether the swapped kernel should start lower.
#    Then one v1 bf16 run at T = 1, 8 (what --gemm v1 runs there; the default path at T = 1).
# Prediction (before any run): green, memcheck and racecheck clean. Time a2 / off: deepseek-v3 T=64
# 0.990-0.997 (the quantiser's ~13 us and a launch of ~2.45 ms; GEMM1's longer epilogue hides behind
# its 8-stage ring), T = 8 and 64 elsewhere 0.97-1.00, T = 1 0.90-1.00 (a ~4 us launch of 40-100 us,
# but a gated unit is two tiles, so T = 1's GEMM1 has half as many units: qwen3 8 blocks x 6 units =
# 48 CTAs for 132 SMs where it had 96; that may cost what the launch saves), T = 512 0.99-1.00.
# swapgather / swap: T = 1 0.90-0.97 (the permute is 3-5 us of ~0.05 ms), T = 8 and 64 0.95-1.00,
# T = 512 0.99-1.01; swapgather / off at T = 1: 0.95-1.05 (the swapped kernel was 1.04-1.19x v1 there).
# If an arm is <= 0.99 at its target cells and no cell is above 1.01, make it the default
# (hopper_fp8_swap_a2_in_epilogue, hopper_bf16_swap_gather) and re-run issue 3's tables; if T = 1
# loses with the A2 epilogue, take it from 2 rows per expert on.
set -u
. tools/device_call.sh
build_device
MOEFUSE_FP8_SWAP_A2=epilogue timeout 60 $T --quick --filter fp8 > $O/test_fp8_swap_a2.log 2>&1
mark "suite --quick --filter fp8, swap A2 on" $? $O/test_fp8_swap_a2.log
MOEFUSE_BF16_SWAP_X=gather timeout 75 $T --quick > $O/test_quick_gather.log 2>&1
mark "suite --quick, bf16 gather on" $? $O/test_quick_gather.log
F=$O/fwd; mkdir -p $F
S=qwen3-30b-a3b,gpt-oss-120b,mixtral-8x7b,deepseek-v3
for i in 1 2 3; do
  case $i in 1) order="1 2 3";; 2) order="2 3 1";; 3) order="3 1 2";; esac
  for j in $order; do
    case $j in 1) a=off q= v=0 d= g=;; 2) a=on q=epilogue v=0 d=swap g=;; 3) a=onpdl q=epilogue v=1 d=swap g=gather;; esac
    MOEFUSE_FP8_SWAP_A2=$q MOEFUSE_PDL=$v timeout 60 $B --shapes $S --tokens 1,8,64,512 --gemm hopper --dtype fp8 \
      > $F/fp8_${a}_$i.log 2>&1
    mark "fwd fp8 $a $i" $? /dev/null
    b=$([ $j = 1 ] && echo off || ([ $j = 2 ] && echo swap || echo swapgather))
    MOEFUSE_BF16_DECODE=$d MOEFUSE_BF16_SWAP_X=$g timeout 60 $B --shapes $S --tokens 1,8,64,512 --gemm hopper \
      --dtype bf16 > $F/bf16_${b}_$i.log 2>&1
    mark "fwd bf16 $b $i" $? /dev/null
  done
  timeout 60 $B --shapes $S --tokens 1,8 --gemm v1 --dtype bf16 > $F/bf16v1_$i.log 2>&1; mark "fwd bf16 v1 $i" $? /dev/null
done
python3 tools/ab_summary.py $F fp8_off fp8_on fp8_onpdl > $F/fp8.md 2>&1
python3 tools/ab_summary.py $F bf16_off bf16_swap bf16_swapgather bf16v1 > $F/bf16.md 2>&1
# 3. The sanitizers last: a call cut short loses them, not the timings.
timeout 100 compute-sanitizer --tool memcheck --error-exitcode 3 $T --quick --filter bitexact --gemm hopper \
  > $O/memcheck_bitexact.log 2>&1
mark "memcheck of the bitexact cases" $? $O/memcheck_bitexact.log
timeout 120 compute-sanitizer --tool racecheck --error-exitcode 3 $T --quick --filter bitexact --gemm hopper \
  > $O/racecheck_bitexact.log 2>&1
mark "racecheck of the bitexact cases" $? $O/racecheck_bitexact.log
mark done 0 /dev/null
