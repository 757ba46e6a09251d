#!/usr/bin/env bash
# Written in session 35 (too little device time was left to start a machine for it; ~5 min). From the repo
# root, carry .deps and build-device/glab (built and stripped on the CPU machine; next-session README):
#   PREBUILT=1 O=/tmp/o7 timeout 330 bash bench/results/2026-12-05-session36/session35_fill_ncu.sh; tar czf $OUT/o7.tgz -C /tmp/o7 .
# 1. The lab's fill variants (never run): GEMM1 with the permute pass inside it against the same kernel on
#    rows permuted beforehand, both orders, T = 16384, and memcheck on the small shapes (check only).
#    Prediction: fill / plain 1.00-1.05 on glm, qwen3, deepseek, mixtral, gptoss (240 wide); every fill
#    variant passes (its A buffer is poisoned before the check, so an uncopied row shows).
# 2. Where the time goes with MOEFUSE_HOPPER_A=fill (GEMM1's permute pass inside GEMM1), by ncu
# (tests/gpu/profile_on_device.sh: each kernel of one eager forward, cold caches, with DRAM bytes),
# glm-4.5-air and mixtral-8x7b at T = 16384, fill against permute. Any Hopper card: on an H200 run
# session35_fill3.sh (the decision) first.
# Prediction (before any run): GEMM1 with fill / the permuted GEMM1: glm 1.00-1.04, mixtral 1.00-1.02,
# and no permute kernel (glm's ~0.55-0.65 ms); GEMM1's DRAM writes grow by about the permuted rows'
# bytes (glm 1.13 GB, mixtral 0.27 GB), its reads by less than that (x rows re-read from L2). If the
# GEMM1 with fill is >= 3% slower than the permuted one, look at why (DRAM, L2 or issue) before building
# anything: pacing the copy just ahead of the tickets, so that TMA reads the rows from L2, needs the
# copied blocks to stay in the 50 MB L2 beside the expert's weights (glm: ~1 MB a block, 23 MB of W13 an
# expert, ~16 blocks in use at once), which is doubtful at these sizes.
set -u
. tools/device_call.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > $O/gpu.txt 2>&1
glab_prebuilt_or_build
LAB_SEED=1 timeout 60 compute-sanitizer --tool memcheck --error-exitcode 3 /tmp/glab --check-only \
  --shapes chk-swiglu-limit,chk-oai,chk-geglu --variants up_actfirst_dyn_exp,up_actfirst_dyn_exp_fill,up_acttma_dyn_exp_fill,up_bn240_dyn_exp_fill \
  > $O/memcheck_fill.log 2>&1
mark "lab memcheck, fill variants" $? $O/memcheck_fill.log
V=up_actfirst_dyn_exp,up_actfirst_dyn_exp_fill,up_acttma_dyn_exp,up_acttma_dyn_exp_fill,up_bn240_dyn_exp,up_bn240_dyn_exp_fill
R=up_bn240_dyn_exp_fill,up_bn240_dyn_exp,up_acttma_dyn_exp_fill,up_acttma_dyn_exp,up_actfirst_dyn_exp_fill,up_actfirst_dyn_exp
timeout 90 /tmp/glab --shapes glm,qwen3,deepseek,mixtral,gptoss --tokens 16384 --variants $V --json $O/lab_a.jsonl > $O/lab_a.log 2>&1
mark "lab fill, order a" $? $O/lab_a.log
timeout 90 /tmp/glab --shapes glm,qwen3,deepseek,mixtral,gptoss --tokens 16384 --variants $R --json $O/lab_b.jsonl > $O/lab_b.log 2>&1
mark "lab fill, order b" $? $O/lab_b.log
# 2. ncu of the forward.
for a in fill permute; do
  MOEFUSE_HOPPER_A=$a OUT=$O/prof_$a MODELS="glm-4.5-air mixtral-8x7b" TOKENS=16384 GEMMS=hopper \
    METRICS=dram__bytes_read.sum,dram__bytes_write.sum RUN_LIMIT=55 timeout 120 \
    bash tests/gpu/profile_on_device.sh > $O/prof_$a.log 2>&1
  mark "profile $a" $? $O/prof_$a.log
done
mark done 0 /dev/null
