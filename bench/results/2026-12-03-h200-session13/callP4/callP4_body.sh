# Device call P4 (session 13): where the pingpong kernel's time goes, and the DYN hang.
# P3: neither a made-up row table (pp_notable ~ pp) nor one loaded during the mainloop (pp_pre ~ pp)
# helps: the row table's loads are not why the epilogue fails to hide. And down_pp_pre_dyn hung once
# at T=16384 (round 3 of 3); racecheck of the DYN/PRE variants ran past its 120 s limit.
# 1. clock64 traces (TRACE: thread 0 of each consumer warpgroup of CTAs 0-3, 5 points a unit) of
#    pp and pp_none, GEMM1 and GEMM2, on qwen3, gpt-oss and deepseek at T=16384: per warpgroup the
#    medians of the turn wait, the mainloop's issue, the MMA drain and the epilogue.
# 2. The hang: down_pp_dyn, down_pp_pre_dyn, down_pp_pre (static) at T=16384 on qwen3 and deepseek,
#    8 seeds each, 25 s limit a run (a run is ~3 s): which variants hang, how often.
# Prediction (before the run), qwen3 GEMM2: pp_none issue ~6.5 kcycles (about 4.4 us), turn wait
# about the same (the other's mainloop); pp epilogue 10-13 kcycles (> issue, so the turn wait ~0)
# and its issue 7-8 kcycles. Hang: DYN variants only, one run in 5-10.
set -u
GL=$R/.snap/grouped_lab; LB=$O/lab; mkdir -p $LB
t0=$SECONDS
mark() { echo "$1: rc=$2 at $((SECONDS - t0)) s; $(tail -n 1 $3 2>/dev/null)" >> $O/call.log; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,power.limit --format=csv > $LB/gpu.txt 2>&1
for t in 16384 4096; do
  LAB_SEED=1340 timeout 60 $GL --shapes qwen3,gptoss,deepseek --tokens $t \
    --variants up_pp_none_trace,up_pp_trace,down_pp_none_trace,down_pp_trace > $LB/trace_$t.log 2>&1
  mark "trace T=$t" $? $LB/trace_$t.log
done
for i in 1 2 3 4 5 6 7 8; do for v in down_pp_dyn down_pp_pre_dyn down_pp_pre; do
  LAB_SEED=$((1350 + i)) timeout 25 $GL --shapes qwen3,deepseek --tokens 16384 --variants $v > $LB/hang_${v}_$i.log 2>&1
  mark "hang $v $i" $? $LB/hang_${v}_$i.log
done; done
mark done 0 /dev/null
