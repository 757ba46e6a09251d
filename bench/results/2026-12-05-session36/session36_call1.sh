#!/usr/bin/env bash
# Written in session 36 before its first call. From the repo root, carry .deps and build-device/glab:
#   if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
#     O=/tmp/o1 timeout 570 bash bench/results/2026-12-05-session36/session36_call1.sh;
#   else PREBUILT=1 O=/tmp/o1 timeout 330 bash bench/results/2026-12-05-session36/session35_fill_ncu.sh; fi;
#   tar czf $OUT/o1.tgz -C /tmp/o1 .
# On an H200 (this script): first session35_fill3.sh's decision on MOEFUSE_HOPPER_A=fill, same arms,
# rounds, shapes and rule (written in session 35, unchanged): fill becomes the default where GEMM1
# permutes only if glm-4.5-air and qwen3-235b-a22b read fill / default <= 0.97 in every round at
# T = 16384 and no permuting cell's median is above 1.01. Then issue 4's gates with what is shipped
# (bench/issue4_gates.sh, the default: fill off), the first H200 gate run since session 28.
# Predictions (before the run): fill / default at 16384 glm 0.94-0.97, qwen3-235b 0.95-0.98, deepseek
# 0.97-0.99, gpt-oss-120b 0.97-1.00, mixtral 0.99-1.01. Gates as session 28's (15 of 30) within spread,
# deepseek-v3 bf16 time/dense 1.203 -> 1.14-1.18 (session 32's TMA epilogue); still a miss.
set -u
. tools/device_call.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > $O/gpu.txt 2>&1
build_device
MOEFUSE_HOPPER_A=fill timeout 60 $T --quick --gemm hopper > $O/suite_quick_fill.log 2>&1
mark "suite --quick, fill" $? $O/suite_quick_fill.log
forward_arms $O/fwd s36c1 6 glm-4.5-air,qwen3-235b-a22b,deepseek-v3,gpt-oss-120b,mixtral-8x7b 8192,16384 \
  base fill:MOEFUSE_HOPPER_A=fill
left=$((560 - (SECONDS - call_t0)))
OUT=$O/gates timeout $((left < 330 ? left : 330)) bash bench/issue4_gates.sh > $O/gates_stdout.log 2>&1
mark "gates" $? $O/gates_stdout.log
mark done 0 /dev/null
