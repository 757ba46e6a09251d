#!/usr/bin/env bash
# Written in session 33 (no machine could be started for it; ~8 min). From the repo root, carry .deps; with
# PREBUILT=1 also build-device/glab and build-device/row_gather_lab, built on the CPU machine first (the
# library itself does not fit the 64 MiB carry beside the tree); move it into the session's results
# directory first:
#   PREBUILT=1 O=$OUT timeout 590 bash bench/results/<session dir>/session33_epilogues.sh
# A. bf16 GEMM2's bulk epilogue with its row table loaded early (MOEFUSE_HOPPER_EARLY_ROWS=1, lab
#    down_bulk_dyn_exp_early): lanes 0-15 load their row's id during the tile's last k-block and its
#    routing weight before the last wgmma wait, instead of both (dependent) after it. Never run.
# B. GEMM1's TMA-stored A2 (EPI_ACT_TMA) everywhere it applies (MOEFUSE_HOPPER_EPI=tma; the default
#    only where H >= 7168 since session 32's H100 A/B), first time on an H200.
# C. GEMM1 gathering x's rows by one-row TMA boxes, one a producer thread (GATHER_TMA_ROWS,
#    MOEFUSE_HOPPER_A=rows; lab up_*_rows_dyn_exp): no permute pass, no cp.async, no consumer proxy
#    fence (the cp.async gather's consumers run a MEMBAR.ALL.CTA + FENCE.VIEW.ASYNC.S before every
#    k-block). Correct only if a one-row box's 128-byte swizzle follows the shared-memory address (the
#    CUDA Programming Guide's swizzle table says so): lab/row_gather_lab.cu checks that first. Never run.
# Predictions (before the run), new / base time:
#  A. The epilogue costs ~2.8 us a GEMM2 tile (qwen3, lab U1), of which the two dependent loads are
#     ~1-1.5k cycles (0.6-0.9 us). Lab GEMM2 at T = 16384: qwen3, qwen3next, glm 0.93-0.97; deepseek
#     0.97-0.99 (K = 2048, 18 us mainloop a tile); T = 4096 the same or smaller gains. Forward (GEMM2
#     ~1/3 of it): qwen3-30b-a3b, qwen3-next, glm, qwen3-235b 0.98-0.995; others 0.99-1.00 (gpt-oss and
#     mixtral, K > 2048, take the staged epilogue: no change, a control).
#  B. Forward tma / base: deepseek 1.00 (the same kernel in both arms); qwen3 family 0.97-1.00.
#  C. Layout: address-based (PASS). Row-gather lab: rows at 0.6-0.9 of box's rate at spin 0, equal at
#     spin 1000. Lab GEMM1 rows / permuted 0.98-1.03 (rows / cp.async gather 0.88-0.93). Forward rows /
#     base (permute + GEMM1) where the permute is large: glm, qwen3-235b, deepseek, mixtral 0.93-0.97;
#     qwen3 family 0.95-1.00.
# Ship A or C where the forward is >= 1.5% faster in every round and never slower elsewhere.
set -u
. tools/device_call.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > $O/gpu.txt 2>&1
if [ "${PREBUILT:-0}" = 1 ] && [ -x build-device/glab ] && [ -x build-device/row_gather_lab ]; then
  # The two labs built on the CPU machine and carried (the library does not fit the carry limit).
  cp build-device/glab /tmp/glab && cp build-device/row_gather_lab /tmp/row_gather_lab
  mark "labs prebuilt, carried" $? /dev/null
  build_device
else
  nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -Isrc/cuda/hopper -Ilab -Iinclude -Isrc/core -Isrc/cuda \
    -o /tmp/row_gather_lab lab/row_gather_lab.cu > $O/row_gather_build.log 2>&1 &
  rg_pid=$!
  build_device_and_glab
  wait $rg_pid
fi
# 0. Does a one-row TMA box land as the swizzled tile's row, and at what rate.
timeout 60 /tmp/row_gather_lab --spin 0,1000 > $O/row_gather.log 2>&1; mark "row gather lab" $? $O/row_gather.log
# 1. Correctness with A and C on: the quick suite (the PERF shapes and memcheck after the timings).
MOEFUSE_HOPPER_EARLY_ROWS=1 MOEFUSE_HOPPER_A=rows timeout 60 $T --quick --gemm hopper > $O/suite_early_rows.log 2>&1
rc=$?; mark "suite --quick, EARLY_ROWS=1 A=rows" $rc $O/suite_early_rows.log
# A failure (or a hang: a row box whose bytes never arrive) keeps the rows arms out of what follows.
R1=,up_actfirst_rows_dyn_exp,up_acttma_rows_dyn_exp; arms=(base early tma rows)
[ $rc -ne 0 ] && { R1=; arms=(base early tma); }
# 2. The lab: GEMM1 permuted / cp.async gather / rows at T = 16384 (GEMM2's after the forward).
t=16384
timeout 90 /tmp/glab --shapes deepseek,glm,qwen3,qwen3next --tokens $t --variants \
  up_actfirst_dyn_exp,up_actfirst_gather_dyn_exp$R1 --json $O/glab1_$t.jsonl > $O/glab1_$t.log 2>&1
mark "lab GEMM1 T=$t" $? $O/glab1_$t.log
# 3. The forward: four arms, 3 rounds, each round in a rotated order.
D=$O/fwd; mkdir -p $D
S=qwen3-30b-a3b,gpt-oss-120b,mixtral-8x7b,deepseek-v3,qwen3-235b-a22b,glm-4.5-air,qwen3-next-80b-a3b,gpt-oss-20b
n=${#arms[@]}
for i in 1 2 3; do
  for j in $(seq 0 $((n - 1))); do
    a=${arms[$(((i + j) % n))]}
    unset MOEFUSE_HOPPER_EARLY_ROWS MOEFUSE_HOPPER_EPI MOEFUSE_HOPPER_A
    [ $a = early ] && export MOEFUSE_HOPPER_EARLY_ROWS=1
    [ $a = tma ] && export MOEFUSE_HOPPER_EPI=tma
    [ $a = rows ] && export MOEFUSE_HOPPER_A=rows
    timeout 45 $B --shapes $S --tokens 4096,16384 --gemm hopper > $D/s33$a\_$i.log 2>&1
    mark "forward $a $i" $? $D/s33$a\_$i.log
  done
done
unset MOEFUSE_HOPPER_EARLY_ROWS MOEFUSE_HOPPER_EPI MOEFUSE_HOPPER_A
python3 tools/ab_summary.py $D ${arms[@]/#/s33} > $D/ab.md 2>&1; mark "forward summary" $? $D/ab.md
# GEMM2's lab: base / early.
timeout 80 /tmp/glab --shapes deepseek,glm,qwen3,qwen3next --tokens $t \
  --variants down_bulk_dyn_exp,down_bulk_dyn_exp_early --json $O/glab2_$t.jsonl > $O/glab2_$t.log 2>&1
mark "lab GEMM2 T=$t" $? $O/glab2_$t.log
# 4. Correctness on the PERF shapes (with B too), memcheck.
MOEFUSE_HOPPER_EARLY_ROWS=1 MOEFUSE_HOPPER_A=rows MOEFUSE_HOPPER_EPI=tma timeout 90 $T --perf 512,4096 --gemm hopper \
  > $O/suite_perf.log 2>&1
mark "suite --perf 512,4096, EARLY_ROWS=1 A=rows EPI=tma" $? $O/suite_perf.log
MOEFUSE_HOPPER_EARLY_ROWS=1 MOEFUSE_HOPPER_A=rows timeout 90 compute-sanitizer --tool memcheck --error-exitcode 3 $T \
  --quick --gemm hopper --filter tma- > $O/memcheck.log 2>&1
mark "memcheck tma- cases, EARLY_ROWS=1 A=rows" $? $O/memcheck.log
# 5. If time is left: the wgrad stores (pairs / bulk), which decide that default on this card.
left=$((570 - (SECONDS - call_t0)))
[ $left -gt 60 ] && { timeout $left build-device/test_gpu_wgrad --perf > $O/wgrad_perf.log 2>&1;
  mark "wgrad --perf (pairs vs bulk)" $? $O/wgrad_perf.log; }
mark done 0 /dev/null
