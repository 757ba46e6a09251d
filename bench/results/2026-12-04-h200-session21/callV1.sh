#!/usr/bin/env bash
# Session 21, call V1: session 20's two prepared scripts in one call (machine start once).
# Part 1 = bench/results/next-session/session20_rowtma.sh, part 2 = session20_cluster.sh; their
# headers (kept below, unchanged) hold the predictions, written in session 20 before any run.
# From the repo root, carry .deps:  O=$OUT timeout 585 bash bench/results/2026-12-04-h200-session21/callV1.sh
# Prepared in session 20 for a later session (not yet run). From the repo root, carry .deps:
#   O=$OUT timeout 420 bash bench/results/next-session/session20_rowtma.sh; then tar $OUT.
# bf16 GEMM1's gathered A rows by one TMA box each (grouped_kernel.cuh's ROW_TMA;
# MOEFUSE_HOPPER_A=rowtma, lab up_*_gather_rowtma*): each producer thread loads its tile row of
# every stage as a box of 1 row x 64 columns of x into row t of the 128-byte-swizzled stage, where
# the cp.async gather issues 8 copies of 16 bytes a thread. In the lab (session 7, qwen3 T=16384)
# the cp.async-gathered mainloop took 1.417 ms against 1.12 for TMA from permuted rows.
# The open question is correctness first: the layout is right only if TMA's swizzle follows the
# destination address (row t's 16-byte chunk c at c ^ (t % 8)) and if it accepts a swizzled
# destination aligned to 128 bytes (the PTX manual asks 1024 for the 128-byte swizzle). Compile-
# checked only: 168 registers, 0 spills; every other kernel's SASS unchanged.
# 1. --quick with MOEFUSE_HOPPER_A=rowtma (the tma-* cases gather: ~75 rows an expert), memcheck.
# 2. The grouped bf16 lab: up_none_gather, up_none_gather_rowtma, up_actfirst_gather_dyn,
#    up_actfirst_gather_rowtma_dyn (checked against the CPU reference and each other).
# 3. bf16 forward, the default (gathered by cp.async or permuted, by moe__hopper_gather_select) vs
#    rowtma (always gathered), 3 alternated rounds, qwen3-30b-a3b, qwen3-next-80b-a3b,
#    qwen3-235b-a22b, glm-4.5-air, deepseek-v3 at T = 4096 and 16384.
# Prediction (before the run): either (a) wrong results or an illegal-address / misaligned error
# in every rowtma case (the 1024-byte rule enforced, or a box-relative swizzle), or (b) correct, and
# then the gathered mainloop 0.80-0.90 of the cp.async one on qwen3 and the forward (default /
# rowtma) 1.04-1.10 on qwen3-30b-a3b and qwen3-next at T = 16384. I put (a) at 50%.
set -u
. tools/device_call.sh
build_device
MOEFUSE_HOPPER_A=rowtma timeout 40 $T --quick > $O/quick_rowtma.log 2>&1; mark "quick rowtma" $? $O/quick_rowtma.log
MOEFUSE_HOPPER_A=rowtma timeout 40 compute-sanitizer --tool memcheck $T --quick --filter tma- > $O/memcheck_rowtma.log 2>&1
mark "memcheck rowtma" $? $O/memcheck_rowtma.log
OUT=$O/glab LAB=bf16 SUITE=0 LAB_LIMIT=120 \
  VARIANTS=up_none_gather,up_none_gather_rowtma,up_actfirst_gather_dyn,up_actfirst_gather_rowtma_dyn \
  timeout 140 bash lab/run_grouped_on_device.sh > $O/glab_stdout.log 2>&1; mark "grouped bf16 lab" $? $O/glab_stdout.log
S=qwen3-30b-a3b,qwen3-next-80b-a3b,qwen3-235b-a22b,glm-4.5-air,deepseek-v3
for i in 1 2 3; do
  timeout 40 $B --shapes $S --tokens 4096,16384 --gemm hopper > $O/bf16_gather_$i.log 2>&1; mark "bf16 gather $i" $? /dev/null
  MOEFUSE_HOPPER_A=rowtma timeout 40 $B --shapes $S --tokens 4096,16384 --gemm hopper > $O/bf16_rowtma_$i.log 2>&1
  mark "bf16 rowtma $i" $? /dev/null
done
python3 tools/ab_summary.py $O bf16_gather bf16_rowtma > $O/rowtma.md 2>&1
# ---- part 2
# Prepared in session 20 for a later session (not yet run; after session20_followup.sh). From the
# repo root:   O=$OUT timeout 420 bash bench/results/next-session/session20_cluster.sh; then tar $OUT.
# The dense FP8 kernel's 128 x 192 tiles in clusters of 2 along M (lab fp8v5: fp8_config's
# CLUSTER_M = 2 on fp8v4 = the engine's large-shape kernel): each CTA loads its own A tile and half
# of the B tile, multicast to both CTAs; a stage is refilled when both CTAs' consumers have released
# it (remote arrives). Session 4 measured the same scheme at 128 wide 4-11% slower (the kernel was
# then far from the L2 limit). At 192 wide a stage brings 40 KB for 6.3 MFLOP; the cluster cuts
# that to 28 KB (B 24 -> 12 KB a CTA). Compile-checked only: 168 registers, 0 spills; SASS has the
# one UTMALDG.2D.MULTICAST and the remote arrive (SYNCS.ARRIVE.TRANS64.RED).
# 1. The FP8 lab, fp8v4 / fp8v5 / fp8engine against cuBLASLt in the same processes, every lab shape
#    (each variant checked against the CPU reference first, then timed).
# 2. compute-sanitizer memcheck and racecheck of fp8v5 on the quick shapes.
# Prediction (before the run): fp8v5 correct on every shape; 8192^3 fp8v5 / fp8v4 time 0.93-1.02
# (cuBLASLt runs clusters of 2 at this size; our barrier traffic doubles), the one-wave shapes
# 1.00-1.10 slower (fewer resident clusters than 132 CTAs: the odd SM idles). If 8192^3 gains >= 3%:
# the engine takes it where the tiles make >= 4 waves, then the grouped kernel's version (two row
# blocks of one expert share the B tile) is worth writing.
OUT=$O/lab VARIANTS="fp8v4 fp8v5 fp8engine" timeout 300 bash lab/run_fp8_on_device.sh > $O/lab_stdout.log 2>&1
mark "fp8 lab" $? $O/lab_stdout.log
L=/tmp/moefuse-fp8lab-build/gemm_fp8_lab
timeout 60 compute-sanitizer --tool memcheck $L --variants fp8v5 --quick > $O/memcheck_fp8v5.log 2>&1
mark "memcheck fp8v5" $? $O/memcheck_fp8v5.log
timeout 90 compute-sanitizer --tool racecheck $L --variants fp8v5 --quick > $O/racecheck_fp8v5.log 2>&1
mark "racecheck fp8v5" $? $O/racecheck_fp8v5.log
mark done 0 /dev/null
