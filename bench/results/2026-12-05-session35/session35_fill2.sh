#!/usr/bin/env bash
# Written in session 35 after call 4 (session35_fill.sh), which found the forward failing with the switch: the
# zero kernel took at most 32 words (fixed: it loops). Rows now come from a counter (a review found that
# a fixed split could hang CTAs that wait on rows owned by a CTA not yet resident). Same predictions and rule.
# (~5 min) From the repo root, carry .deps:
#   O=/tmp/o5 timeout 420 bash bench/results/2026-12-05-session35/session35_fill2.sh; tar czf $OUT/o5.tgz -C /tmp/o5 .
# GEMM1's permute pass moved into GEMM1 (MOEFUSE_HOPPER_A=fill, off by default; grouped_kernel.cuh's
# fill_a_rows): with A by TMA only the producer's thread 0 works, so its warps 1-3 copy x's rows into plan
# order while the consumers' MMAs run; thread 0 acquires a block's count of 128 copied rows before its
# first A load. The permute kernel was 5-7% of the forward's kernel time on glm-4.5-air, qwen3-235b and
# deepseek-v3 at T = 16384 (H200 ncu, bench/results/2026-12-05-h200-session29/call5/out/prof/profile.md),
# memory-bound work beside compute-bound work. With the switch GEMM1 never gathers, so on the gathering
# shapes (qwen3-30b-a3b, qwen3-next) it is fill against the gather.
# Predictions (before any run): correct (the suite's Hopper cases with the switch pass against the CPU
# oracle; memcheck clean). Forward time fill / default (bench_gpu_forward, rotated rounds), T = 16384:
# glm-4.5-air and qwen3-235b-a22b 0.93-0.97, deepseek-v3 0.94-0.98, gpt-oss-120b 0.97-1.00, mixtral-8x7b
# 0.98-1.01 (k = 2: a small permute); qwen3-30b-a3b and qwen3-next (against the gather) 0.95-1.02. T = 4096:
# the same shapes 0.95-1.00 (less time to hide the copy behind; the first tiles wait for their rows).
# fill / permute (MOEFUSE_HOPPER_A=permute) at most the fill / default figure on the permuting shapes.
# Rule, written before the run: the switch becomes the default where GEMM1 permutes if glm-4.5-air and
# qwen3-235b-a22b read fill / default <= 0.97 in every round at T = 16384 and no permuting cell is slower
# than 1.01 in its median.
set -u
. tools/device_call.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > $O/gpu.txt 2>&1
build_device
# 1. Correctness with the switch: the Hopper cases (tma-*: every activation, biases, 240-wide tiles, a
#    fused shared expert with weight_on_input), the quick list, memcheck on the tma- cases, PERF shapes.
MOEFUSE_HOPPER_A=fill timeout 60 $T --gemm hopper --filter tma > $O/suite_tma_fill.log 2>&1
mark "suite tma- cases, fill" $? $O/suite_tma_fill.log
MOEFUSE_HOPPER_A=fill timeout 60 $T --quick --gemm hopper > $O/suite_quick_fill.log 2>&1
mark "suite --quick, fill" $? $O/suite_quick_fill.log
MOEFUSE_HOPPER_A=fill timeout 90 compute-sanitizer --tool memcheck --error-exitcode 3 $T --quick --gemm hopper \
  --filter tma > $O/memcheck_fill.log 2>&1
mark "memcheck tma- cases, fill" $? $O/memcheck_fill.log
MOEFUSE_HOPPER_A=fill timeout 75 $T --perf 4096 --gemm hopper > $O/suite_perf_fill.log 2>&1
mark "suite --perf 4096, fill (bf16 cases first)" $? $O/suite_perf_fill.log
# 2. The forward: default, fill and permute arms, 4 rotated rounds.
forward_arms $O/fwd s35 4 glm-4.5-air,qwen3-235b-a22b,deepseek-v3,gpt-oss-120b,mixtral-8x7b,qwen3-30b-a3b,qwen3-next-80b-a3b \
  4096,16384 base fill:MOEFUSE_HOPPER_A=fill permute:MOEFUSE_HOPPER_A=permute
mark done 0 /dev/null
