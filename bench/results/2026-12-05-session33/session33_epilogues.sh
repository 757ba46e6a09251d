#!/usr/bin/env bash
# Session 33, written before its run (~7 min). From the repo root, carry .deps:
#   O=$OUT timeout 590 bash bench/results/2026-12-05-session33/session33_epilogues.sh
# A. bf16 GEMM2's bulk epilogue with its row table loaded early (MOEFUSE_HOPPER_EARLY_ROWS=1, lab
#    down_bulk_dyn_exp_early): lanes 0-15 load their row's id during the tile's last k-block and its
#    routing weight before the last wgmma wait, instead of both (dependent) after it. Never run.
# B. GEMM1's TMA-stored A2 (EPI_ACT_TMA) everywhere it applies (MOEFUSE_HOPPER_EPI=tma; the default
#    only where H >= 7168 since session 32's H100 A/B), first time on an H200.
# C. The wgrad stores, pairs against bulk, interleaved (bulk 8-19% faster on three of four shapes on
#    session 32's H100): decides the default on this card.
# Predictions (before the run), new / base time:
#  A. The epilogue costs ~2.8 us a GEMM2 tile (qwen3, lab U1), of which the two dependent loads are
#     ~1-1.5k cycles (0.6-0.9 us). Lab GEMM2 at T = 16384: qwen3, qwen3next, glm 0.93-0.97; deepseek
#     0.97-0.99 (K = 2048, 18 us mainloop a tile); T = 4096 the same or smaller gains. Forward (GEMM2
#     ~1/3 of it): qwen3-30b-a3b, qwen3-next, glm, qwen3-235b 0.98-0.995; others 0.99-1.00 (gpt-oss and
#     mixtral, K > 2048, take the staged epilogue: no change, a control).
#  B. Forward tma / base: deepseek 1.00 (the same kernel in both arms); qwen3 family 0.97-1.00.
#  C. pairs / bulk 0.98-1.10.
#  D. (ncu, no prediction of a number) the gathering producer issues too slowly: the consumers'
#     warps wait on the full barriers more often than with TMA's A (long scoreboard / barrier stalls).
# Ship A where the forward is >= 1.5% faster in every round and never slower elsewhere.
set -u
. tools/device_call.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > $O/gpu.txt 2>&1
build_device_and_glab
# 0. lab/row_gather_lab.cu: does a one-row TMA box land as the swizzled tile's row (then TMA could
#    gather GEMM1's A rows, no cp.async and no consumer fence), and at what rate against the 128-row
#    box and the 16-byte cp.async gather. Prediction: the swizzle follows the shared-memory address
#    (layout PASS); rows reach 0.6-0.9 of box's rate at spin 0 and the same as box at spin 1000.
nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -Isrc/cuda/hopper -Ilab -Iinclude -Isrc/core -Isrc/cuda \
  -o /tmp/row_gather_lab lab/row_gather_lab.cu > $O/row_gather_build.log 2>&1
timeout 60 /tmp/row_gather_lab --spin 0,1000 > $O/row_gather.log 2>&1; mark "row gather lab" $? $O/row_gather.log
# 1. Correctness with A on: the whole quick suite, the PERF shapes, memcheck.
MOEFUSE_HOPPER_EARLY_ROWS=1 timeout 60 $T --quick --gemm hopper > $O/suite_early.log 2>&1
mark "suite --quick, EARLY_ROWS=1" $? $O/suite_early.log
MOEFUSE_HOPPER_EARLY_ROWS=1 MOEFUSE_HOPPER_EPI=tma timeout 90 $T --perf 512,4096 --gemm hopper > $O/suite_perf.log 2>&1
mark "suite --perf 512,4096, EARLY_ROWS=1 EPI=tma" $? $O/suite_perf.log
MOEFUSE_HOPPER_EARLY_ROWS=1 timeout 90 compute-sanitizer --tool memcheck --error-exitcode 3 $T --quick --gemm hopper \
  --filter tma- > $O/memcheck_early.log 2>&1
mark "memcheck tma- cases, EARLY_ROWS=1" $? $O/memcheck_early.log
# 2. The lab: GEMM2 base and early interleaved, T = 16384 then 4096.
for t in 16384 4096; do
  timeout 90 /tmp/glab --shapes deepseek,glm,qwen3,qwen3next,gptoss,mixtral --tokens $t \
    --variants down_bulk_dyn_exp,down_bulk_dyn_exp_early --json $O/glab_$t.jsonl > $O/glab_$t.log 2>&1
  mark "lab GEMM2 T=$t" $? $O/glab_$t.log
done
# 3. The forward: three arms, 4 rounds, each round in a rotated order.
D=$O/fwd; mkdir -p $D
S=qwen3-30b-a3b,gpt-oss-120b,mixtral-8x7b,deepseek-v3,qwen3-235b-a22b,glm-4.5-air,qwen3-next-80b-a3b,gpt-oss-20b
arms=(base early tma)
for i in 1 2 3 4; do
  for j in 0 1 2; do
    a=${arms[$(((i + j) % 3))]}
    unset MOEFUSE_HOPPER_EARLY_ROWS MOEFUSE_HOPPER_EPI
    [ $a = early ] && export MOEFUSE_HOPPER_EARLY_ROWS=1
    [ $a = tma ] && export MOEFUSE_HOPPER_EPI=tma
    timeout 45 $B --shapes $S --tokens 4096,16384 --gemm hopper > $D/s33$a\_$i.log 2>&1
    mark "forward $a $i" $? $D/s33$a\_$i.log
  done
done
unset MOEFUSE_HOPPER_EARLY_ROWS MOEFUSE_HOPPER_EPI
python3 tools/ab_summary.py $D s33base s33early s33tma > $D/ab.md 2>&1; mark "forward summary" $? $D/ab.md
# 4. wgrad stores.
timeout 120 build-device/test_gpu_wgrad --perf > $O/wgrad_perf.log 2>&1; mark "wgrad --perf (pairs vs bulk)" $? $O/wgrad_perf.log
# 5. Why the gathering GEMM1 is 13-14% slower than the permuted one (session 32's H100 lab, glm and
#    qwen3 at T = 16384) when it saves the permute pass (glm: 537 us, 7% of the forward): ncu's
#    speed-of-light, memory, warp-state and scheduler sections of each, glm at T = 16384.
#    Full set, saved; then the per-instruction stall samples (the SASS source page) as CSV: the
#    gathering consumers run a fence.proxy.async (MEMBAR.ALL.CTA + FENCE.VIEW.ASYNC.S in the SASS)
#    before every k-block's wgmmas, which the permuted kernel does not.
for v in up_actfirst_dyn_exp up_actfirst_gather_dyn_exp; do
  LAB_SEED=1001 timeout 100 ncu --clock-control none --kernel-name regex:grouped_gemm_kernel --launch-skip 2 \
    --launch-count 1 --set full --import-source no -o $O/ncu_glm_$v /tmp/glab --shapes glm --tokens 16384 \
    --variants $v > $O/ncu_glm_$v.log 2>&1
  mark "ncu glm $v" $? $O/ncu_glm_$v.log
  timeout 60 ncu --import $O/ncu_glm_$v.ncu-rep --page details > $O/ncu_glm_$v.txt 2>&1
  timeout 60 ncu --import $O/ncu_glm_$v.ncu-rep --page source --print-source sass --csv > $O/ncu_src_$v.csv 2>&1
  mark "ncu pages $v" $? $O/ncu_src_$v.csv
done
mark done 0 /dev/null
