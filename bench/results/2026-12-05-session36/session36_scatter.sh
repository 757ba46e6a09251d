#!/usr/bin/env bash
# Written in session 36 before its run (~4 min; ~8 with the gates on an H200). From the repo root, carry .deps:
#   O=/tmp/o3 timeout 570 bash bench/results/2026-12-05-session36/session36_scatter.sh; tar czf $OUT/o3.tgz -C /tmp/o3 .
# MOEFUSE_HOPPER_PERMUTE=scatter: GEMM1's permute pass token by token (scatter_rows_kernel: each x row
# read once, stored to its k plan rows) instead of in plan order (permute_rows_kernel: each row read k
# times). Call 1's ncu (H100, glm-4.5-air T = 16384): the plan-order pass read 981 MB from DRAM for
# 134 MB of x and took 744 us of the 8044 us forward.
# Floor (before the change): the pass moves x once (glm 134 MB) + the plan rows (1.07 GB + padding) at
# ~3 TB/s on an H100, ~0.40-0.45 ms for glm; 4.8 TB/s on an H200.
# Rule (written before the run): scatter becomes the default where GEMM1 permutes if, on this card,
# scatter / base medians are <= 1.00 in all 10 cells below and <= 0.98 on glm-4.5-air at T = 16384.
# Predictions: scatter / base at 16384 glm 0.96-0.975, qwen3-235b 0.97-0.98, deepseek 0.98-0.99,
# gpt-oss-120b 0.985-0.995, mixtral (k = 2) 0.995-1.00; ncu glm scatter kernel 0.40-0.48 ms, DRAM read
# 0.14-0.2 GB. The fill arm is session 35's A/B (on an H200 its rule decides fill; on an H100 it is a
# third H100 reading).
set -u
. tools/device_call.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > $O/gpu.txt 2>&1
build_device
timeout 60 $T --quick --gemm hopper > $O/suite_quick.log 2>&1
mark "suite --quick (tma-scatter-*, tma-fill-* cases in it)" $? $O/suite_quick.log
MOEFUSE_HOPPER_PERMUTE=scatter timeout 60 $T --quick --gemm hopper > $O/suite_quick_scatter.log 2>&1
mark "suite --quick, PERMUTE=scatter" $? $O/suite_quick_scatter.log
timeout 90 compute-sanitizer --tool memcheck --error-exitcode 3 $T --quick --gemm hopper --filter tma- \
  > $O/memcheck_tma.log 2>&1
mark "memcheck tma- cases" $? $O/memcheck_tma.log
forward_arms $O/fwd s36s 6 glm-4.5-air,qwen3-235b-a22b,deepseek-v3,gpt-oss-120b,mixtral-8x7b 8192,16384 \
  base scatter:MOEFUSE_HOPPER_PERMUTE=scatter fill:MOEFUSE_HOPPER_A=fill
MOEFUSE_HOPPER_PERMUTE=scatter OUT=$O/prof_scatter MODELS="glm-4.5-air mixtral-8x7b" TOKENS=16384 GEMMS=hopper \
  METRICS=dram__bytes_read.sum,dram__bytes_write.sum RUN_LIMIT=55 timeout 120 \
  bash tests/gpu/profile_on_device.sh > $O/prof_scatter.log 2>&1
mark "profile scatter" $? $O/prof_scatter.log
left=$((560 - (SECONDS - call_t0)))
if grep -q H200 $O/gpu.txt && [ $left -gt 200 ]; then
  OUT=$O/gates timeout $((left < 330 ? left : 330)) bash bench/issue4_gates.sh > $O/gates_stdout.log 2>&1
  mark "gates" $? $O/gates_stdout.log
fi
mark done 0 /dev/null
