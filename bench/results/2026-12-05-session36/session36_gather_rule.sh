#!/usr/bin/env bash
# Written in session 36 after the token-order permute became the default (faea5ca), before this run
# (~3 min). Any Hopper card. From the repo root, carry .deps:
#   O=/tmp/o6 timeout 400 bash bench/results/2026-12-05-session36/session36_gather_rule.sh; tar czf $OUT/o6.tgz -C /tmp/o6 .
# Does the cheaper permute pass move the gather rule's boundary? moe__hopper_gather_select gathers GEMM1's
# A rows at <= 256 routed rows an expert or I <= 1024; it was set (session 14, H200) against the old
# plan-order pass, which the scatter makes ~35% cheaper (call 3's ncu). Arms: base (the rule) and
# permute (MOEFUSE_HOPPER_A=permute, now the scatter) on the cells that gather; glm-4.5-air and
# qwen3-235b-a22b at 8192 permute in both arms (same code: this run's noise).
# Rule (written before the run): MOE__HOPPER_GATHER_MAX_AVG_ROWS drops from 256 to 128 only if permute /
# gather medians are <= 0.98 on all four 256-rows-an-expert cells with I > 1024 (deepseek-v3 and
# gpt-oss-120b at 8192, glm-4.5-air and qwen3-235b-a22b at 4096). The I <= 1024 part is only reported
# (qwen3-30b-a3b and qwen3-next-80b-a3b): a change there needs its own run.
# Predictions: permute / gather at 256 rows an expert 0.97-1.03 (the rule likely stands); at 128 rows
# (deepseek-v3, gpt-oss-120b at 4096) 1.03-1.07; qwen3-30b-a3b at 16384 1.02-1.05; qwen3-next-80b-a3b
# 1.05-1.12; the same-code cells 0.98-1.02.
set -u
. tools/device_call.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > $O/gpu.txt 2>&1
build_device
forward_arms $O/fwd_a s36r 6 deepseek-v3,gpt-oss-120b,glm-4.5-air,qwen3-235b-a22b,qwen3-30b-a3b,qwen3-next-80b-a3b \
  4096,8192 base permute:MOEFUSE_HOPPER_A=permute
forward_arms $O/fwd_b s36r 6 qwen3-30b-a3b,qwen3-next-80b-a3b 16384 base permute:MOEFUSE_HOPPER_A=permute
mark done 0 /dev/null
