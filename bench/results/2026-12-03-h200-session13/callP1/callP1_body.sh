# Device call P1 (session 13): the pingpong grouped kernel (lab/grouped_pingpong_kernel.cuh), first run.
# Lab binary built on the dev machine from the tree of this commit (nvcc 13.0, -lineinfo), carried.
# 1. correctness gate on the small shapes (every activation, N tails): up/down_pp, _pp_dyn against the
#    fp64 reference and the shipped kernel's whole output; then memcheck and racecheck of the same.
# 2. A/B, 3 alternated rounds, T = 4096 and 16384, PERF.md's four shapes: arms dyn (the shipped
#    kernel as the library runs it: 128x256 tiles, ticket schedule), pp (pingpong, static stride),
#    pp_dyn (pingpong, tickets); round 1 also the shipped mainloop alone (up_none/down_none).
# Prediction (before the run), pp_dyn/dyn at T=16384 (medians): qwen3 GEMM1 0.85-0.92, GEMM2
# 0.80-0.90; gpt-oss 0.88-0.95 both; mixtral GEMM1 0.92-1.0, GEMM2 0.97-1.05; deepseek GEMM1
# 0.95-1.02 (power-bound), GEMM2 0.85-0.92. pp (static) 1-3% above pp_dyn on deepseek/mixtral.
# Checks all pass; racecheck 0 hazards.
set -u
GL=$R/.snap/grouped_lab; LB=$O/lab; mkdir -p $LB
t0=$SECONDS
mark() { echo "$1: rc=$2 at $((SECONDS - t0)) s; $(tail -n 1 $3 2>/dev/null)" >> $O/call.log; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,power.limit --format=csv > $LB/gpu.txt 2>&1
CHK=chk-swiglu-limit,chk-geglu,chk-geglu-tanh,chk-reglu,chk-relu2,chk-oai
PPV=up_staged,up_pp,up_pp_dyn,down_staged,down_pp,down_pp_dyn
timeout 40 $GL --shapes $CHK --variants $PPV --check-only > $LB/chk.log 2>&1; rc=$?; mark chk $rc $LB/chk.log
if [ $rc -eq 124 ]; then echo "hang: stop" >> $O/call.log; exit 0; fi
timeout 90 compute-sanitizer --error-exitcode 3 --tool memcheck $GL --shapes $CHK --variants up_pp,up_pp_dyn,down_pp,down_pp_dyn --check-only > $LB/memcheck.log 2>&1; mark memcheck $? $LB/memcheck.log
timeout 120 compute-sanitizer --error-exitcode 3 --tool racecheck $GL --shapes chk-geglu,chk-oai --variants up_pp,up_pp_dyn,down_pp,down_pp_dyn --check-only > $LB/racecheck.log 2>&1; mark racecheck $? $LB/racecheck.log
for i in 1 2 3; do for t in 4096 16384; do
  arms="dyn pp pp_dyn"; [ $i = 1 ] && arms="none dyn pp pp_dyn"
  for arm in $arms; do
    case $arm in none) V=up_none,down_none;; dyn) V=up_dyn,down_dyn;; pp) V=up_pp,down_pp;; pp_dyn) V=up_pp_dyn,down_pp_dyn;; esac
    LAB_SEED=$((1300 + i)) timeout 60 $GL --shapes qwen3,gptoss,mixtral,deepseek --tokens $t --variants $V \
      --json $LB/lab_${t}_${arm}_$i.jsonl > $LB/lab_${t}_${arm}_$i.log 2>&1
    mark "lab T=$t $arm $i" $? $LB/lab_${t}_${arm}_$i.log
  done
done; done
python3 $R/tools/lab_ab.py $LB dyn pp pp_dyn none > $LB/ab_lab.md 2>&1
nvidia-smi --query-gpu=clocks.sm,power.draw --format=csv >> $LB/gpu.txt 2>&1
mark done 0 /dev/null
