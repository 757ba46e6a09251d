#!/usr/bin/env bash
# Prepared in session 13 (not yet run: compile-checked only). From the repo root, after building the
# lab here or there:
#   nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -lineinfo -Iinclude -Isrc/core -Isrc/cuda \
#     -Isrc/cuda/hopper -Ilab -o .snap/grouped_lab lab/grouped_lab.cu      # ~40 s on 2 cores
#   O=$OUT GL=.snap/grouped_lab bash bench/results/next-session/session13_bn240.sh   (carry .snap/grouped_lab)
# The shipped bf16 grouped kernel with 240-wide tiles (grouped_gemm_kernel<..., BN = 240>; the
# library's SASS with BN = 256 is byte-identical to before the template parameter was added):
# gpt-oss's N (2880 for GEMM2, 5760 for GEMM1) is a multiple of 240, so no tile is a 64-column tail
# computed 256 wide (src/cuda/NOTES.md, session 13).
# 1. checks: the small shapes (N tails of n % 240 on every activation) with up_bn240,
#    up_staged_bn240, down_bn240 against fp64 and the shipped output; racecheck of the same;
# 2. A/B, 3 alternated rounds, gpt-oss at T = 4096 and 16384: up_actfirst_dyn vs up_bn240,
#    down_dyn vs down_bn240.
# Prediction (before any run): all checks pass, racecheck clean; bn240/256 GEMM2 0.94-0.98 at
# T = 16384 and 0.95-1.0 at 4096, GEMM1 0.97-1.0. If it holds: the library picks BN 240 when
# n % 240 == 0 and n % 256 != 0 (a pure function of n, printed in the config line).
set -u
O=${O:-$PWD/probe-out}; GL=${GL:-.snap/grouped_lab}; LB=$O/lab; mkdir -p $LB
t0=$SECONDS
mark() { echo "$1: rc=$2 at $((SECONDS - t0)) s; $(tail -n 1 $3 2>/dev/null)" >> $O/call.log; }
CHK=chk-swiglu-limit,chk-geglu,chk-geglu-tanh,chk-reglu,chk-relu2,chk-oai
V=up_actfirst_dyn,up_bn240,up_staged_bn240,down_dyn,down_bn240
timeout 40 $GL --shapes $CHK,gptoss --tokens 4096 --variants $V --check-only > $LB/chk.log 2>&1; mark chk $? $LB/chk.log
timeout 120 compute-sanitizer --error-exitcode 3 --tool racecheck $GL --shapes chk-geglu,chk-oai \
  --variants up_bn240,down_bn240 --check-only > $LB/racecheck.log 2>&1; mark racecheck $? $LB/racecheck.log
for i in 1 2 3; do for t in 4096 16384; do
  for arm in b256 b240; do
    case $arm in b256) V=up_actfirst_dyn,down_dyn;; b240) V=up_bn240,down_bn240;; esac
    LAB_SEED=$((1380 + i)) timeout 60 $GL --shapes gptoss --tokens $t --variants $V \
      --json $LB/lab_${t}_${arm}_$i.jsonl > $LB/lab_${t}_${arm}_$i.log 2>&1
    mark "lab T=$t $arm $i" $? $LB/lab_${t}_${arm}_$i.log
  done
done; done
python3 tools/lab_ab.py $LB b256 b240 > $LB/ab_lab.md 2>&1
mark done 0 /dev/null
