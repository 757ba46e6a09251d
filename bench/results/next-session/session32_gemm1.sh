#!/usr/bin/env bash
# Prepared in session 32 (run in part there, on an H100; ~8-9 min). From the repo root, carry
# .deps (move it into the session's results directory first):
#   O=/tmp/oN timeout 570 bash bench/results/<session dir>/session32_gemm1.sh; tar czf $OUT/oN.tgz -C /tmp/oN .
# Two changes to the bf16 grouped GEMM1, both off by default until this call measures them.
# A. The half-idle MMA skip. GEMM2 skips the second consumer warpgroup's MMAs on row blocks whose
#    second 64 rows are all padding; GEMM1 does not, because session 14's lab (Q1, each arm in one
#    block of 3 rounds, before interleaved timing) had deepseek's GEMM1 1.074x slower with it at
#    T = 16384, while gpt-oss's was 0.929x and qwen3's 0.989x. Now grouped_params.skip_idle;
#    MOEFUSE_HOPPER_SKIP_UP=1 turns it on for GEMM1; lab twins `*_skip`.
# B. EPI_ACT_TMA: GEMM1's activation written from the accumulators straight into two 64 x 64 boxes a
#    warpgroup in the 128-byte swizzle and stored by cp.async.bulk.tensor, instead of act-first's
#    staging, read-back and per-row 16-byte stores after a row-table load. MOEFUSE_HOPPER_EPI=tma
#    (256-wide tiles on tickets: not gpt-oss's 240-wide GEMM1); lab `up_acttma_*`. Never run before:
#    correctness first (the suite's hopper cases with it on, and racecheck of the tma- cases).
# Then the lab at T = 16384 and 4096, each arm interleaved with its twin, two processes with the list
# in opposite orders; then the forward, 4 processes an arm in rotated order, the eight issue 4 shapes.
# glm and qwen3next are new lab shapes (qwen3next: 16.7% of GEMM1's rows are padding at T = 16384).
# Predictions (before the run), new / base time:
#  A. The skip removes the second warpgroup's MMAs on about half the padding rows (the share of
#     GEMM1's MMAs: qwen3next 8.6%, deepseek and gptoss 5.4%, qwen3 and glm 2.9% at T = 16384, twice
#     that at 4096); a half-idle tile still loads all its bytes (L2 ~71% busy on full tiles), so it
#     runs ~1.4x faster, not 2x. Lab GEMM1 at 16384: qwen3next 0.95-0.98, gptoss 0.96-0.99, deepseek
#     0.98-1.01, qwen3 and glm 0.98-1.00; at 4096 the ~100-row-an-expert shapes 0.98-1.01. Forward:
#     qwen3-next T = 16384 0.97-0.99, the others 0.99-1.01.
#  B. act-first's epilogue costs ~5 us a GEMM1 tile (session 11, staged; act-first ~1% less); the
#     TMA store takes out the row-table load and the read-back and store chain, not the activation
#     math (~2.5k issue cycles a scheduler). Lab GEMM1 at 16384: qwen3, qwen3next (K = 2048)
#     0.93-0.97; glm (K = 4096) 0.96-0.99; deepseek, mixtral 0.98-1.00. Forward: qwen3-30b-a3b and
#     qwen3-next 0.96-0.99, the others 0.99-1.01.
# Ship either only where the forward is >= 1.5% faster in every round pair and never slower elsewhere.
# Session 32 ran parts of this on one H100 (bench/results/2026-12-05-session32/, calls 1-3): both
# correct; the lab at 16384 on qwen3, glm, qwen3next; the forward on four shapes at 16384. EPI_ACT_TMA
# then became the default where H >= 7168 (deepseek 3.3-4.9% faster in every round), so here the
# "base" arm has it on deepseek-v3 and the "tma" arm forces it everywhere (MOEFUSE_HOPPER_EPI=tma).
# Still to see, on an H200: the same at T = 4096 and on all eight shapes, the lab's T = 4096 and
# gptoss/mixtral/deepseek rows. Added: the wgrad stores interleaved (bulk was 8-19% faster than the
# default pairs on three of four shapes on that H100, against pairs 0.7-5.6% faster on session 22's
# H200 in separate processes); prediction for the H200: pairs / bulk 0.98-1.10, which decides the default.
set -u
. tools/device_call.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > $O/gpu.txt 2>&1
build_device_and_glab
# 1. Correctness with each change on.
MOEFUSE_HOPPER_EPI=tma timeout 120 $T --quick --gemm hopper > $O/suite_tma.log 2>&1
mark "suite --quick, EPI=tma" $? $O/suite_tma.log
# (the tma- cases have I = 64: one A2 box a warpgroup; the PERF shapes fill both)
MOEFUSE_HOPPER_EPI=tma timeout 120 $T --perf 512,4096 --gemm hopper > $O/suite_perf_tma.log 2>&1
mark "suite --perf 512,4096, EPI=tma" $? $O/suite_perf_tma.log
MOEFUSE_HOPPER_SKIP_UP=1 timeout 120 $T --quick --gemm hopper > $O/suite_skip_up.log 2>&1
mark "suite --quick, SKIP_UP=1" $? $O/suite_skip_up.log
MOEFUSE_HOPPER_EPI=tma timeout 120 compute-sanitizer --tool racecheck --error-exitcode 3 $T --quick --gemm hopper \
  --filter tma- > $O/racecheck_tma.log 2>&1
mark "racecheck tma- cases, EPI=tma" $? $O/racecheck_tma.log
MOEFUSE_HOPPER_EPI=tma timeout 60 compute-sanitizer --tool memcheck --error-exitcode 3 $T --quick --gemm hopper \
  --filter tma- > $O/memcheck_tma.log 2>&1
mark "memcheck tma- cases, EPI=tma" $? $O/memcheck_tma.log
timeout 120 build-device/test_gpu_wgrad --perf > $O/wgrad_perf.log 2>&1; mark "wgrad --perf (pairs vs bulk)" $? $O/wgrad_perf.log
# 2. The lab: T = 16384 then 4096, the twins in one process, two processes in opposite orders.
V1=up_actfirst_dyn_exp,up_actfirst_dyn_exp_skip,up_acttma_dyn_exp,up_actfirst_gather_dyn_exp,up_actfirst_gather_dyn_exp_skip,up_acttma_gather_dyn_exp,up_bn240_dyn_exp,up_bn240_dyn_exp_skip
V2=up_bn240_dyn_exp_skip,up_bn240_dyn_exp,up_acttma_gather_dyn_exp,up_actfirst_gather_dyn_exp_skip,up_actfirst_gather_dyn_exp,up_acttma_dyn_exp,up_actfirst_dyn_exp_skip,up_actfirst_dyn_exp
for t in 16384 4096; do
  i=1
  for v in $V1 $V2; do
    timeout 90 /tmp/glab --shapes deepseek,glm,qwen3,qwen3next,gptoss,mixtral --tokens $t --variants $v \
      --json $O/glab_${t}_$i.jsonl > $O/glab_${t}_$i.log 2>&1
    mark "lab T=$t order $i" $? $O/glab_${t}_$i.log
    i=$((i + 1))
  done
done
# 3. The forward: three arms, 4 rounds, each round in a rotated order.
S=qwen3-30b-a3b,gpt-oss-120b,mixtral-8x7b,deepseek-v3,qwen3-235b-a22b,glm-4.5-air,qwen3-next-80b-a3b,gpt-oss-20b
forward_arms $O/fwd g1 4 $S 4096,16384 base skip:MOEFUSE_HOPPER_SKIP_UP=1 tma:MOEFUSE_HOPPER_EPI=tma
mark done 0 /dev/null
