#!/usr/bin/env bash
# Written in session 37 before its first call (~3.5 min), the branch that runs when the card that comes
# is an H100 (the H200 branch runs session36_h200_gates.sh). From the repo root, carry .deps:
#   O=/tmp/o1 timeout 400 bash bench/results/2026-12-05-session37/session37_h100_arms.sh; tar czf $OUT/o1.tgz -C /tmp/o1 .
# The two switches still off, each against session 36's default (the token-order permute), 6 rotated
# rounds, the permuting cells (glm-4.5-air, qwen3-235b-a22b, mixtral-8x7b at 8192 and 16384; deepseek-v3
# at 16384) and deepseek-v3 at 8192 (gathers: the same code in base and fill, this run's noise).
# - fill (MOEFUSE_HOPPER_A=fill): session 35's rule, glm-4.5-air and qwen3-235b-a22b fill / base <= 0.97
#   in every round at 16384 and no permuting cell's median above 1.01. An H100 reading changes no
#   default (session 35's wording); it says whether the H200 arm is worth its minutes.
#   Prediction: the scatter took the permute pass from 744 to 485 us on glm (of ~8.4 ms), so the fill's
#   call-3 gain of ~2% shrinks: fill / base 0.99-1.02 at 16384 on glm and qwen3-235b; mixtral 1.00-1.02.
# - early (MOEFUSE_HOPPER_EARLY_ROWS=1, GEMM2's row table loaded during the last MMAs): session 34's lab
#   put GEMM2 2-4% faster on the H100. Prediction: early / base 0.99-1.00 on every cell (GEMM2 is about
#   a third of the forward). Same rule shape: it is worth an H200 arm if no cell's median is above 1.00
#   and at least half the cells read <= 0.99.
set -u
. tools/device_call.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > $O/gpu.txt 2>&1
build_device
MOEFUSE_HOPPER_EARLY_ROWS=1 timeout 60 $T --quick --gemm hopper > $O/suite_quick_early.log 2>&1
mark "suite --quick, early rows" $? $O/suite_quick_early.log
forward_arms $O/fwd s37h 6 glm-4.5-air,qwen3-235b-a22b,deepseek-v3,mixtral-8x7b 8192,16384 \
  base fill:MOEFUSE_HOPPER_A=fill early:MOEFUSE_HOPPER_EARLY_ROWS=1
mark done 0 /dev/null
