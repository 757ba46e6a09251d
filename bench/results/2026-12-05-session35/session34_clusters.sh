#!/usr/bin/env bash
# Written in session 34 (never run; ~5-8 min: the lab runs take seconds, the sanitizers and the build
# most). From the repo root, carry .deps and build-device/glab (built on the CPU machine: see the README
# here), or let it build (no PREBUILT):
#   PREBUILT=1 O=/tmp/o6 timeout 560 bash bench/results/<session dir>/session34_clusters.sh; tar czf $OUT/o6.tgz -C /tmp/o6 .
# The bf16 grouped kernel in clusters of 2 (lab variants *_c2, and the library's MOEFUSE_HOPPER_CLUSTERS=2;
# grouped_gemm_kernel's CM, pair_blocks): the two CTAs take adjacent row blocks; where both are one
# expert's, each loads half of the B tile and multicasts it to both. Why: GEMM1 runs L2 at 80-84% of its peak (session 34's ncu, glm T = 16384) and its
# 128 x 256 tiles read 0.0234 L2 bytes a MAC; sharing B reads 0.0156. The FP8 kernel's clusters (session
# 29) ran the mainloop 2-11% faster but the whole kernels 0.96-1.08x; bf16 mainloops are twice as long a
# tile, so the epilogue weighs half as much. Static stride (no tickets), with the grouped raster over all
# pairs and with the expert raster over pairs (*_exp_c2): against the same kernel and raster on single CTAs
# first, then against the shipped (tickets and the expert raster).
# Predictions (before any run), c2 / single-CTA time at T = 16384:
#   mainloop alone (up_none, down_none): deepseek, glm, mixtral 0.90-0.97; qwen3 0.93-0.99; qwen3next
#   0.95-1.00 (2.5 blocks an expert: many pairs straddle two experts and share nothing).
#   with their epilogues (up_actfirst, down_staged): 0.94-1.00.
#   the same ratios with the expert raster (*_exp_c2 / *_exp) within 0.02 of the grouped raster's.
#   up_actfirst_exp_c2 / up_actfirst_dyn_exp (the shipped GEMM1 on permuted x, tickets, expert raster):
#   0.96-1.03; down_staged_exp_c2 / down_bulk_dyn_exp (fp32 rows against bf16: not the same output) not judged.
#   The shipped kernels themselves in clusters, a ticket a pair handed from rank 0's producer to rank 1's
#   (up_actfirst_dyn_exp_c2, up_acttma_dyn_exp_c2, down_bulk_dyn_exp_c2, against their single-CTA twins):
#   0.95-1.01 on deepseek, glm, mixtral; 0.97-1.02 on qwen3, qwen3next. The gathering GEMM1 in clusters
#   (up_actfirst_gather_dyn_exp_c2 / up_actfirst_gather_dyn_exp; up_none_gather_c2 / up_none_gather):
#   0.95-1.01 on qwen3, glm, deepseek; 0.97-1.02 on qwen3next.
# Correctness: every variant passes the lab's checks (sampled fp64 reference, every output written, equal
# to the shipped kernel's); memcheck and racecheck clean on the c2 variants (step 1). If the shipped kernels
# in clusters gain >= 3% on two of the large-expert shapes in both orders, the next step is the library's
# switch for them and the forward A/B.
set -u
. tools/device_call.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > $O/gpu.txt 2>&1
glab_prebuilt_or_build
S=deepseek,glm,mixtral,qwen3,qwen3next
V1=up_none,up_none_c2,up_none_exp,up_none_exp_c2,up_actfirst,up_actfirst_c2,up_actfirst_exp,up_actfirst_exp_c2,up_actfirst_dyn_exp,up_actfirst_dyn_exp_c2,up_acttma_dyn_exp,up_acttma_dyn_exp_c2,up_none_gather,up_none_gather_c2,up_actfirst_gather_dyn_exp,up_actfirst_gather_dyn_exp_c2,up_acttma_gather_dyn_exp,up_acttma_gather_dyn_exp_c2
V2=down_none,down_none_c2,down_none_exp,down_none_exp_c2,down_staged,down_staged_c2,down_staged_exp,down_staged_exp_c2,down_bulk_dyn_exp,down_bulk_dyn_exp_c2
# 1. Correctness under the sanitizers (checks only, no timing): shapes whose pairs share an expert (the
#    multicast: deepseek's shared expert, mixtral's 1-2 block experts, qwen3 at 2048 tokens) and, with
#    two seeds, an odd block count somewhere (the ghost; the lab prints each shape's row blocks).
C2=up_actfirst_c2,up_actfirst_exp_c2,up_actfirst_dyn_exp_c2,up_acttma_dyn_exp_c2,up_actfirst_gather_dyn_exp_c2,up_acttma_gather_dyn_exp_c2,up_none_gather_c2,down_staged_c2,down_staged_exp_c2,down_bulk_dyn_exp_c2
hung=0 # a sanitizer run cut by its timeout: a clustered kernel may hang, so time none of them
for seed in 1 2; do
  LAB_SEED=$seed timeout 80 compute-sanitizer --tool memcheck --error-exitcode 3 /tmp/glab --check-only \
    --shapes deepseek,mixtral --tokens 512 --variants $C2 > $O/memcheck_$seed.log 2>&1
  rc=$?; [ $rc = 124 ] && hung=1
  mark "memcheck c2 deepseek, mixtral T=512 seed $seed" $rc $O/memcheck_$seed.log
done
[ $hung = 1 ] && { mark "a clustered kernel hung under memcheck: no timings" 1 /dev/null; exit 1; }
LAB_SEED=1 timeout 120 compute-sanitizer --tool racecheck --error-exitcode 3 /tmp/glab --check-only \
  --shapes deepseek,mixtral --tokens 512 --variants $C2 > $O/racecheck_1.log 2>&1
mark "racecheck c2 deepseek, mixtral T=512 seed 1" $? $O/racecheck_1.log
LAB_SEED=3 timeout 60 compute-sanitizer --tool memcheck --error-exitcode 3 /tmp/glab --check-only --shapes qwen3 \
  --tokens 2048 --variants $C2 > $O/memcheck_qwen3.log 2>&1
mark "memcheck c2 qwen3 T=2048" $? $O/memcheck_qwen3.log
# 2. Timings: two processes a GEMM, the variant lists in opposite orders.
rev() { echo "$1" | tr ',' '\n' | tac | paste -sd, -; }
for g in 1 2; do
  eval v=\$V$g
  timeout 120 /tmp/glab --shapes $S --tokens 16384 --variants $v --json $O/c2_g${g}_a.jsonl > $O/c2_g${g}_a.log 2>&1
  mark "lab GEMM$g T=16384 order a" $? $O/c2_g${g}_a.log
  timeout 120 /tmp/glab --shapes $S --tokens 16384 --variants $(rev $v) --json $O/c2_g${g}_b.jsonl > $O/c2_g${g}_b.log 2>&1
  mark "lab GEMM$g T=16384 order b" $? $O/c2_g${g}_b.log
done
# 3. T = 4096, one process a GEMM.
for g in 1 2; do
  eval v=\$V$g
  timeout 60 /tmp/glab --shapes $S --tokens 4096 --variants $v --json $O/c2_g${g}_4096.jsonl > $O/c2_g${g}_4096.log 2>&1
  mark "lab GEMM$g T=4096" $? $O/c2_g${g}_4096.log
done
# 4. The FP8 kernel's clusters again (session 29's variants and shapes, two orders): its clustered launches
#    then carried per-launch host setup inside the timed events (fixed in session 34). Prediction: the full
#    variants' c2 / single 0.94-1.02, a little lower than session 29's 0.96-1.08 (same sign per shape).
A=fp8_up_192_none,fp8_up_192_none_c2,fp8_up_192_bulk,fp8_up_192_bulk_c2,fp8_up_192,fp8_up_192_c2,fp8_down_192_none,fp8_down_192_none_c2,fp8_down_192_b16,fp8_down_192_b16_c2,fp8_down_192_bulk,fp8_down_192_bulk_c2
timeout 100 /tmp/glab --fp8 --shapes qwen3,deepseek,mixtral,gptoss --variants $A > $O/fp8_c2_a.log 2>&1
mark "FP8 c2 order a" $? $O/fp8_c2_a.log
timeout 100 /tmp/glab --fp8 --shapes qwen3,deepseek,mixtral,gptoss --variants $(rev $A) > $O/fp8_c2_b.log 2>&1
mark "FP8 c2 order b" $? $O/fp8_c2_b.log
# 5. The library's switch (MOEFUSE_HOPPER_CLUSTERS=2: the shipped GEMMs in clusters where tiles are 256 wide
#    on tickets): the GPU suite's PERF-shape cases (the bf16 ones come first), its --quick cases, and the
#    forward, base against clusters, 3 rotated rounds. Prediction: all correct; forward c2 / base time at
#    T = 16384 on deepseek, glm, qwen3-235b, mixtral, qwen3 0.96-1.01; qwen3-next 0.98-1.01.
build_device
MOEFUSE_HOPPER_CLUSTERS=2 timeout 120 $T --perf 512,4096 --gemm hopper > $O/suite_perf_c2.log 2>&1
mark "suite --perf, CLUSTERS=2 (bf16 cases first)" $? $O/suite_perf_c2.log
MOEFUSE_HOPPER_CLUSTERS=2 timeout 60 $T --quick --gemm hopper > $O/suite_quick_c2.log 2>&1
mark "suite --quick, CLUSTERS=2" $? $O/suite_quick_c2.log
forward_arms $O/fwd s34 3 deepseek-v3,glm-4.5-air,qwen3-235b-a22b,mixtral-8x7b,qwen3-30b-a3b,qwen3-next-80b-a3b \
  4096,16384 base c2:MOEFUSE_HOPPER_CLUSTERS=2
mark done 0 /dev/null
