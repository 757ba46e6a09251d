#!/usr/bin/env bash
# Prepared in session 32 (no GPU that session; not yet run; ~4-5 min: the labs took 3-8 s a process
# before, a bench_gpu_forward process of 8 shapes at one T ~5 s). From the repo root, carry
# .deps (move it into the session's results directory first):
#   O=/tmp/oN timeout 590 bash bench/results/<session dir>/session32_skip_up.sh
# GEMM1's half-idle MMA skip, re-measured. GEMM2 skips the second consumer warpgroup's MMAs on row
# blocks whose second 64 rows are all padding; GEMM1 does not, because session 14's lab (Q1, each arm
# in one block of 3 rounds, before interleaved timing) had deepseek's GEMM1 1.074x slower with it at
# T = 16384, while gpt-oss's was 0.929x and qwen3's 0.989x. Session 32 made the skip a parameter
# (grouped_params.skip_idle; MOEFUSE_HOPPER_SKIP_UP=1 turns it on for GEMM1 in the library) and added
# the library's three GEMM1 forms to the grouped lab with their _skip twins, plus glm and qwen3next
# (issue 4's untuned shapes; qwen3next has the most padding: 16.7% of GEMM1's rows at T = 16384).
# 1. Correctness: the suite's --quick hopper cases with MOEFUSE_HOPPER_SKIP_UP=1.
# 2. The lab at T = 16384 and 4096, each variant interleaved with its twin, two processes with the
#    list in opposite orders: permute form (deepseek, glm: the forms the library runs there at 16384),
#    gather form (qwen3, qwen3next), 240 wide (gptoss).
# 3. The forward, 4 processes each arm in ABBA order, T = 4096 and 16384, the eight issue 4 shapes.
# Prediction (before the run), skip / base time. The skip removes the second warpgroup's MMAs on about
# half the padding rows (the expected share of GEMM1's MMAs: qwen3next 8.6%, deepseek and gptoss 5.4%,
# qwen3 and glm 2.9% at T = 16384; twice that at 4096); a half-idle tile still loads all its bytes, so
# it runs at most ~1.6x faster, not 2x. Lab GEMM1 at 16384: qwen3next 0.93-0.97, gptoss 0.94-0.98,
# deepseek 0.97-1.01, qwen3 and glm 0.97-1.00. At 4096 the memory-bound shapes (deepseek, gptoss,
# qwen3next ~80-128 rows an expert) 0.98-1.01. Forward: qwen3-next T = 16384 0.96-0.98, the others
# 0.98-1.01. Ship it (for GEMM1 by a rule) only where the forward is >= 1.5% faster in every round pair.
set -u
. tools/device_call.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > $O/gpu.txt 2>&1
build_device_and_glab
# 1. Correctness with the skip on in GEMM1.
MOEFUSE_HOPPER_SKIP_UP=1 timeout 120 $T --quick --gemm hopper > $O/suite_skip_up.log 2>&1
mark "suite --quick, SKIP_UP=1" $? $O/suite_skip_up.log
# 2. The lab: T = 16384 then 4096, the twins in one process, two processes in opposite orders.
V1=up_actfirst_dyn_exp,up_actfirst_dyn_exp_skip,up_actfirst_gather_dyn_exp,up_actfirst_gather_dyn_exp_skip,up_bn240_dyn_exp,up_bn240_dyn_exp_skip
V2=up_bn240_dyn_exp_skip,up_bn240_dyn_exp,up_actfirst_gather_dyn_exp_skip,up_actfirst_gather_dyn_exp,up_actfirst_dyn_exp_skip,up_actfirst_dyn_exp
for t in 16384 4096; do
  i=1
  for v in $V1 $V2; do
    timeout 90 /tmp/glab --shapes deepseek,glm,qwen3,qwen3next,gptoss --tokens $t --variants $v \
      --json $O/glab_${t}_$i.jsonl > $O/glab_${t}_$i.log 2>&1
    mark "lab T=$t order $i" $? $O/glab_${t}_$i.log
    i=$((i + 1))
  done
done
# 3. The forward A/B.
D=$O/fwd; mkdir -p $D
S=qwen3-30b-a3b,gpt-oss-120b,mixtral-8x7b,deepseek-v3,qwen3-235b-a22b,glm-4.5-air,qwen3-next-80b-a3b,gpt-oss-20b
for i in 1 2 3 4; do
  for a in $([ $((i % 2)) = 1 ] && echo "base skip" || echo "skip base"); do
    if [ $a = skip ]; then export MOEFUSE_HOPPER_SKIP_UP=1; else unset MOEFUSE_HOPPER_SKIP_UP; fi
    timeout 45 $B --shapes $S --tokens 4096,16384 --gemm hopper > $D/skip$a\_$i.log 2>&1
    mark "forward $a $i" $? $D/skip$a\_$i.log
  done
done
unset MOEFUSE_HOPPER_SKIP_UP
python3 tools/ab_summary.py $D skipbase skipskip > $D/ab.md 2>&1; mark "forward summary" $? $D/ab.md
mark done 0 /dev/null
