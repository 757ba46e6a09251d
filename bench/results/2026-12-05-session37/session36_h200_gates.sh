#!/usr/bin/env bash
# Written in session 36 after the token-order permute became the default (faea5ca), before this run
# (~7-8 min). Needs an H200 (the FP8 bench's deepseek-v3 peers do not fit an H100's 80 GB). From the repo
# root, carry .deps:
#   O=/tmp/o5 timeout 570 bash bench/results/2026-12-05-session36/session36_h200_gates.sh; tar czf $OUT/o5.tgz -C /tmp/o5 .
# 1. Issue 4's gates with what is shipped (bench/issue4_gates.sh), the first H200 gate run since session 28.
#    Predictions: as session 28's 15 of 30 within run-to-run spread, except the bf16 time / dense ratios:
#    deepseek-v3 1.203 -> 1.12-1.17 (session 32's TMA A2 store ~3-5%, the scatter ~2%), glm-4.5-air 1.154
#    -> 1.11-1.14 and qwen3-235b-a22b 1.136 -> 1.10-1.13 (the scatter ~2.5%); all three still misses.
# 2. If time is left: session 35's fill decision against the new default (fill / default, 4 rounds,
#    rule as session35_fill3.sh's but over the rounds run: glm-4.5-air and qwen3-235b-a22b <= 0.97 in
#    every round at T = 16384, no permuting cell's median above 1.01).
set -u
. tools/device_call.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > $O/gpu.txt 2>&1
build_device
timeout 40 $T --quick > $O/test_quick.log 2>&1; mark "suite --quick" $? $O/test_quick.log
OUT=$O/gates timeout 330 bash bench/issue4_gates.sh > $O/gates_stdout.log 2>&1; mark "gates" $? $O/gates_stdout.log
left=$((560 - (SECONDS - call_t0)))
if [ $left -gt 100 ]; then
  forward_arms $O/fwd s36g 4 glm-4.5-air,qwen3-235b-a22b,deepseek-v3,mixtral-8x7b 16384 base fill:MOEFUSE_HOPPER_A=fill
fi
mark done 0 /dev/null
