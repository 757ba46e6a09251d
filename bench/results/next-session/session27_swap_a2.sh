#!/usr/bin/env bash
# Prepared in session 27 (no GPU was lent that session; ~5 min). From the repo root, carry .deps:
#   O=$OUT timeout 500 bash bench/results/next-session/session27_swap_a2.sh; then tar $OUT.
# (Move this script into the session's results directory first; it needs no patch: the change is
# switched by MOEFUSE_FP8_SWAP_A2 in one build.)
# The swapped FP8 decode kernel's GEMM1 quantising A2 in its epilogue (decode_swap_kernel.cuh's
# QUANT, opt-in MOEFUSE_FP8_SWAP_A2=epilogue; src/cuda/NOTES.md "Session 27"): one launch fewer in
# the FP8 decode chain (the A2 quantiser: 12.5-14.3 us at deepseek-v3 T=64 in session 9's ncu, K4)
# and no fp32 A2.
# 1. Correctness: the suite's FP8 list --quick with it on (its fp8-swap-a2-* cases: 2-tile units,
#    the last group's 1-tile unit, RELU2, an expert over two plan blocks, a fused shared expert with
#    weight_on_input; the stage-wise check compares every A2 code and scale with the oracle's), the
#    same cases on the default path, then memcheck and racecheck of those cases with it on (the
#    named barrier and the shared row-maximum buffer).
# 2. bench_gpu_forward FP8 (block-scaled, CUDA-graph replays, medians of 30), the eight shapes at
#    T = 1, 8, 64, 512 (the swapped kernel runs up to 16 rows per expert), arms off / a2 / a2pdl
#    (a2 with MOEFUSE_PDL=1, the other decode-chain change) in 3 rotated rounds.
# Prediction (before any run): green, memcheck and racecheck clean. Time a2 / off: deepseek-v3
# T=64 0.990-0.997 (the quantiser's ~13 us and a launch of ~2.45 ms; GEMM1's longer epilogue hides
# behind its 8-stage ring), T = 8 and 64 elsewhere 0.97-1.00, T = 1 0.90-1.00 (a ~4 us launch of
# 40-100 us, but a gated unit is two tiles, so T = 1's GEMM1 has half as many units: qwen3 8
# blocks x 6 units = 48 CTAs for 132 SMs where it had 96; that may cost what the launch saves),
# T = 512 0.99-1.00. If a2 / off <= 0.99 at T = 64 on deepseek and no cell is above 1.01, make it
# the default (hopper_fp8_swap_a2_in_epilogue) and re-run issue 3's FP8 table; if T = 1 loses,
# take it from 2 rows per expert on.
set -u
. tools/device_call.sh
build_device
MOEFUSE_FP8_SWAP_A2=epilogue timeout 60 $T --quick --filter fp8 > $O/test_fp8_swap_a2.log 2>&1
mark "suite --quick --filter fp8, swap A2 on" $? $O/test_fp8_swap_a2.log
timeout 30 $T --quick --filter fp8-swap-a2 > $O/test_fp8_swap_a2_default.log 2>&1
mark "the fp8-swap-a2 cases, default path" $? $O/test_fp8_swap_a2_default.log
MOEFUSE_FP8_SWAP_A2=epilogue timeout 90 compute-sanitizer --tool memcheck --error-exitcode 3 $T --quick \
  --filter fp8-swap-a2 --gemm hopper > $O/memcheck_swap_a2.log 2>&1
mark "memcheck fp8-swap-a2, on" $? $O/memcheck_swap_a2.log
MOEFUSE_FP8_SWAP_A2=epilogue timeout 120 compute-sanitizer --tool racecheck --error-exitcode 3 $T --quick \
  --filter fp8-swap-a2 --gemm hopper > $O/racecheck_swap_a2.log 2>&1
mark "racecheck fp8-swap-a2, on" $? $O/racecheck_swap_a2.log
F=$O/fwd; mkdir -p $F
S=qwen3-30b-a3b,gpt-oss-120b,mixtral-8x7b,deepseek-v3,qwen3-235b-a22b,glm-4.5-air,qwen3-next-80b-a3b,gpt-oss-20b
for i in 1 2 3; do
  case $i in 1) order="off a2 a2pdl";; 2) order="a2 a2pdl off";; 3) order="a2pdl off a2";; esac
  for a in $order; do
    q=; [ $a != off ] && q=epilogue
    v=0; [ $a = a2pdl ] && v=1
    MOEFUSE_FP8_SWAP_A2=$q MOEFUSE_PDL=$v timeout 60 $B --shapes $S --tokens 1,8,64,512 --gemm hopper --dtype fp8 \
      > $F/fp8_${a}_$i.log 2>&1
    mark "fwd fp8 $a $i" $? /dev/null
  done
done
python3 tools/ab_summary.py $F fp8_off fp8_a2 fp8_a2pdl > $F/fp8.md 2>&1
mark done 0 /dev/null
