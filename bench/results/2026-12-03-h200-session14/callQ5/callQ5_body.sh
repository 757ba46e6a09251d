# Device call Q5 (session 14): GEMM1 gathering its own A rows, now on the ticket schedule with the
# act-first epilogue (MOEFUSE_HOPPER_A=gather). The permute pass writes and re-reads the plan-order
# copy of x (qwen3 T=16384: 0.6 GB, ~0.25 ms; deepseek ~1 ms); in session 2 the gathering producer
# won on qwen3 (2.69 vs 2.81 ms) and lost at T=16384 on gpt-oss/deepseek, but since then only the
# permute path got the ticket schedule, act-first and (GEMM2) the skip: gather ran GEMM1 on the
# static stride, staged, and GEMM2 on the static stride too.
# 1. lab: small shapes (six activations, N tails) and the PERF.md shapes at T=512: up_gather_dyn,
#    up_actfirst_gather_dyn against fp64 and the shipped output; racecheck of both.
# 2. lab A/B, 3 alternated rounds, four shapes, T = 4096 and 16384: up_actfirst_dyn (TMA from the
#    permuted copy; the pass not timed) vs up_actfirst_gather_dyn.
# 3. library: build; test_gpu_forward --quick with MOEFUSE_HOPPER_A=gather, memcheck of the same
#    on --gemm hopper, racecheck of --filter tma --gemm hopper --quick under gather; bench_gpu_forward
#    bf16 --gemm hopper T = 4096, 16384, four shapes, 4 alternated rounds: permute (default) vs
#    gather.
# Prediction (before the run): all checks pass, 0 hazards. Lab gather/permute GEMM1 1.00-1.06 (the
#   cp.async stream costs the producer more than one TMA; the pass it replaces is not in the lab's
#   time). Forward gather/permute at T=16384: qwen3 0.90-0.95, gpt-oss 0.95-0.99, deepseek
#   0.95-1.00, mixtral 0.98-1.02; at T=4096 similar or a little less gain.
set -u
export LD_LIBRARY_PATH=$PWD/.deps/cjson/lib
GL=$R/.snap/grouped_lab; LB=$O/lab; L=$O/suite; F=$O/fwd; mkdir -p $LB $L $F
B=build-device; T=$B/test_gpu_forward
t0=$SECONDS
mark() { echo "$1: rc=$2 at $((SECONDS - t0)) s; $(tail -n 1 $3 2>/dev/null)" >> $O/call.log; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,power.limit --format=csv > $LB/gpu.txt 2>&1
STAGES=build OUT=$L timeout 150 bash tests/gpu/run_on_device.sh > $L/build_stdout.log 2>&1 &
CHK=chk-swiglu-limit,chk-geglu,chk-geglu-tanh,chk-reglu,chk-relu2,chk-oai
V=up_staged_gather,up_gather_dyn,up_actfirst_gather_dyn
timeout 60 $GL --shapes $CHK --variants $V --check-only > $LB/chk.log 2>&1; mark chk $? $LB/chk.log
timeout 60 $GL --shapes qwen3,gptoss,mixtral,deepseek --tokens 512 --variants $V --check-only > $LB/chk512.log 2>&1; mark chk512 $? $LB/chk512.log
timeout 120 compute-sanitizer --error-exitcode 3 --tool racecheck $GL --shapes chk-geglu,chk-oai \
  --variants up_gather_dyn,up_actfirst_gather_dyn --check-only > $LB/racecheck.log 2>&1; mark racecheck_lab $? $LB/racecheck.log
for i in 1 2 3; do for t in 4096 16384; do
  for arm in permute gather; do
    case $arm in permute) V=up_actfirst_dyn;; gather) V=up_actfirst_gather_dyn;; esac
    LAB_SEED=$((1450 + i)) timeout 60 $GL --shapes qwen3,gptoss,mixtral,deepseek --tokens $t --variants $V \
      --json $LB/lab_${t}_${arm}_$i.jsonl > $LB/lab_${t}_${arm}_$i.log 2>&1
    mark "lab T=$t $arm $i" $? $LB/lab_${t}_${arm}_$i.log
  done
done; done
python3 $R/tools/lab_ab.py $LB permute gather > $LB/ab_lab.md 2>&1
wait; mark build 0 $L/build_stdout.log
run() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $L/$n.log 2>&1; mark $n $? $L/$n.log; }
MOEFUSE_HOPPER_A=gather run test_quick_gather 60 $T --quick
MOEFUSE_HOPPER_A=gather run memcheck_gather 60 compute-sanitizer --error-exitcode 3 --tool memcheck $T --quick --gemm hopper
MOEFUSE_HOPPER_A=gather run racecheck_gather 120 compute-sanitizer --error-exitcode 3 --tool racecheck $T --filter tma --gemm hopper --quick
S4="--shapes qwen3-30b-a3b,gpt-oss-120b,mixtral-8x7b,deepseek-v3 --tokens 4096,16384 --gemm hopper --dtype bf16"
for i in 1 2 3 4; do
  timeout 45 $B/bench_gpu_forward $S4 > $F/permute_$i.log 2>&1; mark "fwd permute $i" $? /dev/null
  MOEFUSE_HOPPER_A=gather timeout 45 $B/bench_gpu_forward $S4 > $F/gather_$i.log 2>&1; mark "fwd gather $i" $? /dev/null
done
python3 tools/ab_summary.py $F gather permute > $F/ab_fwd.md 2>&1
mark done 0 /dev/null
