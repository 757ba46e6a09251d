#!/usr/bin/env bash
# Session 33: session33_epilogues.sh reordered for the ~4 min of device time left (written before
# its run; the same predictions, in that script's header). The labs need no library build, so they
# come first (carried prebuilt, PREBUILT=1), then the library, the quick suite and the forward.
#   PREBUILT=1 O=$OUT timeout 280 bash bench/results/2026-12-05-session33/session33_epilogues_short.sh
# (carry .deps, build-device/glab, build-device/row_gather_lab)
set -u
. tools/device_call.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > $O/gpu.txt 2>&1
cp build-device/glab /tmp/glab && cp build-device/row_gather_lab /tmp/row_gather_lab
timeout 40 /tmp/row_gather_lab --spin 0,1000 > $O/row_gather.log 2>&1; rc=$?; mark "row gather lab" $rc $O/row_gather.log
R1=,up_actfirst_rows_dyn_exp,up_acttma_rows_dyn_exp
grep -q "^PASS" $O/row_gather.log || R1=
t=16384
timeout 80 /tmp/glab --shapes glm,qwen3,deepseek,qwen3next --tokens $t --variants \
  up_actfirst_dyn_exp,up_actfirst_gather_dyn_exp$R1 --json $O/glab1_$t.jsonl > $O/glab1_$t.log 2>&1
mark "lab GEMM1 T=$t" $? $O/glab1_$t.log
timeout 60 /tmp/glab --shapes qwen3,glm,deepseek,qwen3next --tokens $t \
  --variants down_bulk_dyn_exp,down_bulk_dyn_exp_early --json $O/glab2_$t.jsonl > $O/glab2_$t.log 2>&1
mark "lab GEMM2 T=$t" $? $O/glab2_$t.log
build_device
MOEFUSE_HOPPER_EARLY_ROWS=1 MOEFUSE_HOPPER_A=rows timeout 40 $T --quick --gemm hopper > $O/suite_early_rows.log 2>&1
mark "suite --quick, EARLY_ROWS=1 A=rows" $? $O/suite_early_rows.log
D=$O/fwd; mkdir -p $D
S=qwen3-30b-a3b,deepseek-v3,qwen3-235b-a22b,glm-4.5-air,qwen3-next-80b-a3b
arms=(base early rows)
for i in 1 2; do
  for j in 0 1 2; do
    a=${arms[$(((i + j) % 3))]}
    unset MOEFUSE_HOPPER_EARLY_ROWS MOEFUSE_HOPPER_A
    [ $a = early ] && export MOEFUSE_HOPPER_EARLY_ROWS=1
    [ $a = rows ] && export MOEFUSE_HOPPER_A=rows
    timeout 30 $B --shapes $S --tokens 16384 --gemm hopper > $D/s33$a\_$i.log 2>&1
    mark "forward $a $i" $? $D/s33$a\_$i.log
  done
done
unset MOEFUSE_HOPPER_EARLY_ROWS MOEFUSE_HOPPER_A
python3 tools/ab_summary.py $D s33base s33early s33rows > $D/ab.md 2>&1; mark "forward summary" $? $D/ab.md
mark done 0 /dev/null
