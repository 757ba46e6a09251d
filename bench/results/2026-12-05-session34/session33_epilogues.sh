#!/usr/bin/env bash
# Written in session 33 (no machine could be started for it; ~7 min). From the repo root, carry .deps; with
# PREBUILT=1 also build-device/glab, built on the CPU machine first (the library itself does not fit the
# 64 MiB carry beside the tree); move it into the session's results directory first:
#   PREBUILT=1 O=$OUT timeout 590 bash bench/results/2026-12-05-session34/session33_epilogues.sh
# A. bf16 GEMM2's bulk epilogue with its row table loaded early (MOEFUSE_HOPPER_EARLY_ROWS=1, lab
#    down_bulk_dyn_exp_early): lanes 0-15 load their row's id during the tile's last k-block and its
#    routing weight before the last wgmma wait, instead of both (dependent) after it. Never run.
# B. GEMM1's TMA-stored A2 (EPI_ACT_TMA) everywhere it applies (MOEFUSE_HOPPER_EPI=tma; the default
#    only where H >= 7168 since session 32's H100 A/B), first time on an H200.
# C. (ncu, no change) what the cp.async gather's per-k-block proxy fence costs: the gathering GEMM1 ran
#    13-14% slower than the permuted one (session 32's H100 lab, glm and qwen3 at T = 16384).
# Predictions (before the run), new / base time:
#  A. The epilogue costs ~2.8 us a GEMM2 tile (qwen3, lab U1), of which the two dependent loads are
#     ~1-1.5k cycles (0.6-0.9 us). Lab GEMM2 at T = 16384: qwen3, qwen3next, glm 0.93-0.97; deepseek
#     0.97-0.99 (K = 2048, 18 us mainloop a tile). Forward (GEMM2 ~1/3 of it): qwen3-30b-a3b,
#     qwen3-next, glm, qwen3-235b 0.98-0.995; others 0.99-1.00 (gpt-oss and mixtral, K > 2048, take the
#     staged epilogue: no change, a control).
#  B. Forward tma / base: deepseek 1.00 (the same kernel in both arms); qwen3 family 0.97-1.00.
#  C. The gathering kernel's consumer warps show a membar stall share of 5-15% that the permuted
#     kernel's do not.
# Ship A where the forward is >= 1.5% faster in every round and never slower elsewhere.
# D. (added in session 34, before the run) the gathering GEMM1 with each producer thread publishing its
#    stages itself, two stages late, after its own proxy fence (MOEFUSE_HOPPER_GATHER_FENCE=producer, lab
#    *_pfence), instead of a fence in each of the 256 consumer threads before every k-block. Prediction,
#    pfence / base time: lab GEMM1 (gather) at T = 16384 glm, qwen3, qwen3next 0.93-0.99, the mainloop
#    alone (up_none_gather) 0.93-0.99; at T = 4096 (deepseek gathers there) 0.95-1.00. Forward: the shapes
#    that gather (qwen3 family at both T, the rest at 4096) 0.97-1.00, the others 1.00 (a control).
#    Ship D where the forward is >= 1.5% faster in every round on the gathering shapes and never slower.
set -u
. tools/device_call.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > $O/gpu.txt 2>&1
if [ "${PREBUILT:-0}" = 1 ] && [ -x build-device/glab ]; then
  cp build-device/glab /tmp/glab
  mark "lab prebuilt, carried" $? /dev/null
  build_device
else
  build_device_and_glab
fi
# 1. Correctness with A on: the quick suite (the PERF shapes and memcheck after the timings).
MOEFUSE_HOPPER_EARLY_ROWS=1 timeout 60 $T --quick --gemm hopper > $O/suite_early.log 2>&1
mark "suite --quick, EARLY_ROWS=1" $? $O/suite_early.log
MOEFUSE_HOPPER_GATHER_FENCE=producer timeout 60 $T --quick --gemm hopper > $O/suite_pfence.log 2>&1
mark "suite --quick, GATHER_FENCE=producer" $? $O/suite_pfence.log
# 2. GEMM2's lab: base / early, T = 16384.
t=16384
timeout 80 /tmp/glab --shapes deepseek,glm,qwen3,qwen3next --tokens $t \
  --variants down_bulk_dyn_exp,down_bulk_dyn_exp_early --json $O/glab2_$t.jsonl > $O/glab2_$t.log 2>&1
mark "lab GEMM2 T=$t" $? $O/glab2_$t.log
# 2b. GEMM1's gather: base / producer fence, the mainloop alone and shipped, T = 16384 and 4096.
for t in 16384 4096; do
  timeout 80 /tmp/glab --shapes deepseek,glm,qwen3,qwen3next --tokens $t --variants \
    up_actfirst_gather_dyn_exp,up_actfirst_gather_dyn_exp_pfence,up_none_gather,up_none_gather_pfence \
    --json $O/glab1_$t.jsonl > $O/glab1_$t.log 2>&1
  mark "lab GEMM1 gather fence T=$t" $? $O/glab1_$t.log
done
# 3. The forward: four arms, 3 rounds, each round in a rotated order.
S=qwen3-30b-a3b,gpt-oss-120b,mixtral-8x7b,deepseek-v3,qwen3-235b-a22b,glm-4.5-air,qwen3-next-80b-a3b,gpt-oss-20b
forward_arms $O/fwd s33 3 $S 4096,16384 base early:MOEFUSE_HOPPER_EARLY_ROWS=1 tma:MOEFUSE_HOPPER_EPI=tma \
  pfence:MOEFUSE_HOPPER_GATHER_FENCE=producer
# 4. Correctness on the PERF shapes (with B too), memcheck.
MOEFUSE_HOPPER_EARLY_ROWS=1 MOEFUSE_HOPPER_EPI=tma timeout 90 $T --perf 512,4096 --gemm hopper > $O/suite_perf.log 2>&1
mark "suite --perf 512,4096, EARLY_ROWS=1 EPI=tma" $? $O/suite_perf.log
MOEFUSE_HOPPER_EARLY_ROWS=1 timeout 90 compute-sanitizer --tool memcheck --error-exitcode 3 $T --quick --gemm hopper \
  --filter tma- > $O/memcheck.log 2>&1
mark "memcheck tma- cases, EARLY_ROWS=1" $? $O/memcheck.log
MOEFUSE_HOPPER_GATHER_FENCE=producer timeout 90 compute-sanitizer --tool racecheck --error-exitcode 3 $T --quick \
  --gemm hopper --filter tma- > $O/racecheck_pfence.log 2>&1
mark "racecheck tma- cases, GATHER_FENCE=producer" $? $O/racecheck_pfence.log
# 5. C: ncu's warp states of the permuted and the gathering GEMM1, glm at T = 16384.
for v in up_actfirst_dyn_exp up_actfirst_gather_dyn_exp up_actfirst_gather_dyn_exp_pfence; do
  LAB_SEED=1001 timeout 60 ncu --clock-control none --kernel-name regex:grouped_gemm_kernel --launch-skip 2 \
    --launch-count 1 --section SpeedOfLight --section WarpStateStats --section SchedulerStats \
    /tmp/glab --shapes glm --tokens 16384 --variants $v > $O/ncu_glm_$v.txt 2>&1
  mark "ncu glm $v" $? $O/ncu_glm_$v.txt
done
# 6. If time is left: the wgrad stores (pairs / bulk), which decide that default on this card.
left=$((570 - (SECONDS - call_t0)))
[ $left -gt 60 ] && { timeout $left build-device/test_gpu_wgrad --perf > $O/wgrad_perf.log 2>&1;
  mark "wgrad --perf (pairs vs bulk)" $? $O/wgrad_perf.log; }
mark done 0 /dev/null
