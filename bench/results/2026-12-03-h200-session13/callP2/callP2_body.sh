# Device call P2 (session 13): why the pingpong kernel did not gain (P1: pp_dyn/dyn 0.93-1.07).
# Two questions: is the 128x128 mainloop itself slower than half a 128x256 one (wgmma m64n128
# reads 23 bytes of shared memory a kflop against m64n256's 19), and does the staged epilogue,
# itself shared-memory work, slow the other warpgroup's MMAs?
# 1. A/B, 3 alternated rounds, T = 4096 and 16384, four shapes: none (shipped 128x256 mainloop
#    alone), pp_none (pingpong mainloop alone), pp (staged epilogue), pp_regs (epilogue from the
#    fragment: no shared memory), dyn (shipped). Correctness of pp_regs on the small shapes first.
# 2. ncu (SpeedOfLight, ComputeWorkloadAnalysis, MemoryWorkloadAnalysis) of down_none,
#    down_pp_none, down_staged, down_pp on qwen3 T=16384 (GEMM2, K=768: the epilogue's largest share).
# Prediction (before the run), medians at T=16384: pp_none/none 1.10-1.30 on qwen3 and gpt-oss (the
# 128-wide tile is shared-memory bound), ~1.0-1.1 on mixtral/deepseek; pp_regs/pp 0.90-0.97 on
# GEMM2 (8-byte stores, no smem), 0.95-1.1 on GEMM1 (2-byte stores); ncu: shared-memory pipe
# >= 80% busy in down_pp_none.
set -u
GL=$R/.snap/grouped_lab; LB=$O/lab; P=$O/prof; mkdir -p $LB $P
t0=$SECONDS
mark() { echo "$1: rc=$2 at $((SECONDS - t0)) s; $(tail -n 1 $3 2>/dev/null)" >> $O/call.log; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,power.limit --format=csv > $LB/gpu.txt 2>&1
CHK=chk-swiglu-limit,chk-geglu,chk-geglu-tanh,chk-reglu,chk-relu2,chk-oai
timeout 40 $GL --shapes $CHK --variants up_staged,up_pp_regs,down_staged,down_pp_regs --check-only > $LB/chk.log 2>&1; rc=$?; mark chk $rc $LB/chk.log
if [ $rc -eq 124 ]; then echo "hang: stop" >> $O/call.log; exit 0; fi
for i in 1 2 3; do for t in 4096 16384; do
  for arm in none pp_none pp pp_regs dyn; do
    case $arm in none) V=up_none,down_none;; pp_none) V=up_pp_none,down_pp_none;; pp) V=up_pp,down_pp;;
      pp_regs) V=up_pp_regs,down_pp_regs;; dyn) V=up_dyn,down_dyn;; esac
    LAB_SEED=$((1310 + i)) timeout 60 $GL --shapes qwen3,gptoss,mixtral,deepseek --tokens $t --variants $V \
      --json $LB/lab_${t}_${arm}_$i.jsonl > $LB/lab_${t}_${arm}_$i.log 2>&1
    mark "lab T=$t $arm $i" $? $LB/lab_${t}_${arm}_$i.log
  done
done; done
python3 $R/tools/lab_ab.py $LB dyn none pp_none pp pp_regs > $LB/ab_lab.md 2>&1
for v in down_none down_pp_none down_staged down_pp; do
  timeout 90 ncu --clock-control none --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
    --kernel-name regex:grouped_ --launch-skip 2 --launch-count 1 -o $P/$v $GL --shapes qwen3 --tokens 16384 --variants $v > $P/ncu_$v.log 2>&1
  mark "ncu $v" $? $P/ncu_$v.log
  ncu --import $P/$v.ncu-rep --page details --csv > $P/${v}_details.csv 2>&1
done
mark done 0 /dev/null
