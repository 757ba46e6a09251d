# Device call P3 (session 13): is it the row table's loads that keep the pingpong epilogue from
# hiding? P2: the pingpong mainloop alone is only 3-5% slower than the shipped one on qwen3
# (pp_none/none 1.03-1.05), yet pp with its staged epilogue takes 1.45x pp_none: one warpgroup's
# epilogue takes ~8 us a 128x128 tile against the other's ~4.4 us mainloop, twice what the
# shipped kernel's epilogue takes for the same work a warp. Each half's epilogue starts with two
# dependent global round trips (plan id, then routing weight), four a tile, at an L2 loaded by the
# other warpgroup's operand traffic.
# Arms (3 alternated rounds, T = 4096, 16384, four shapes): dyn (shipped), pp_none, pp,
# pp_notable (row table made up: no loads), pp_pre (the table loaded during the mainloop),
# pp_pre_dyn (the same on the ticket schedule); correctness and racecheck of pp_pre, pp_pre_dyn and
# pp_dyn (turn barriers now per warp) on the small shapes first.
# Prediction (before the run), T=16384 medians: if the loads are the cause, pp_notable and pp_pre
# within 10% of pp_none on qwen3 and gpt-oss (pp_pre/dyn: qwen3 GEMM2 ~0.76, GEMM1 ~0.88); if
# not, pp_notable ~ pp. deepseek stays slower on 128x128 tiles (pp_none 1.45x dyn at GEMM1).
# racecheck 0 hazards.
set -u
GL=$R/.snap/grouped_lab; LB=$O/lab; mkdir -p $LB
t0=$SECONDS
mark() { echo "$1: rc=$2 at $((SECONDS - t0)) s; $(tail -n 1 $3 2>/dev/null)" >> $O/call.log; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,power.limit --format=csv > $LB/gpu.txt 2>&1
CHK=chk-swiglu-limit,chk-geglu,chk-geglu-tanh,chk-reglu,chk-relu2,chk-oai
PV=up_pp_pre,up_pp_pre_dyn,up_pp_dyn,down_pp_pre,down_pp_pre_dyn,down_pp_dyn
timeout 40 $GL --shapes $CHK --variants up_staged,down_staged,$PV --check-only > $LB/chk.log 2>&1; rc=$?; mark chk $rc $LB/chk.log
if [ $rc -eq 124 ]; then echo "hang: stop" >> $O/call.log; exit 0; fi
timeout 120 compute-sanitizer --error-exitcode 3 --tool racecheck $GL --shapes chk-geglu,chk-oai --variants $PV --check-only > $LB/racecheck.log 2>&1; mark racecheck $? $LB/racecheck.log
timeout 60 compute-sanitizer --error-exitcode 3 --tool memcheck $GL --shapes $CHK --variants $PV --check-only > $LB/memcheck.log 2>&1; mark memcheck $? $LB/memcheck.log
for i in 1 2 3; do for t in 4096 16384; do
  for arm in dyn pp_none pp pp_notable pp_pre pp_pre_dyn; do
    V=up_$arm,down_$arm
    LAB_SEED=$((1320 + i)) timeout 60 $GL --shapes qwen3,gptoss,mixtral,deepseek --tokens $t --variants $V \
      --json $LB/lab_${t}_${arm}_$i.jsonl > $LB/lab_${t}_${arm}_$i.log 2>&1
    mark "lab T=$t $arm $i" $? $LB/lab_${t}_${arm}_$i.log
  done
done; done
python3 $R/tools/lab_ab.py $LB dyn pp_none pp pp_notable pp_pre pp_pre_dyn > $LB/ab_lab.md 2>&1
mark done 0 /dev/null
