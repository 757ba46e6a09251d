# Device call P5 (session 13): GEMM1's activation from the fragment (EPI_ACT_FIRST), first run.
# P4's trace says the epilogue's shared-memory/L1 traffic is what costs; GEMM1's staged epilogue
# moves every fp32 (gate, up) pair through shared memory (STS.64 x 64 + LDS.128 x 32 a thread a
# tile) and stores 4 bytes a lane; EPI_ACT_FIRST applies the activation in registers, stages only
# the bf16 outputs (a quarter of the bytes) and stores 16 bytes a lane.
# 1. lab: small shapes (all six activations; RELU2 takes the staged fallback; biases; N tails),
#    up_staged vs up_actfirst and up_actfirst_dyn against fp64 and the whole shipped output;
#    A/B 3 alternated rounds, T=4096 and 16384, PERF.md shapes: up_staged, up_dyn, up_actfirst,
#    up_actfirst_dyn.
# 2. library (EPI_ACT_FIRST now GEMM1's default): build, test_gpu_forward --quick, memcheck and
#    racecheck of --quick --gemm hopper; bench_gpu_forward bf16 default vs MOEFUSE_HOPPER_EPI=staged,
#    T = 512, 4096, 16384, alternated, 2 rounds.
# Prediction (before the run): all checks pass, racecheck 0 hazards; lab actfirst_dyn/dyn GEMM1 at
# T=16384: qwen3 0.90-0.95, gpt-oss 0.93-0.97, mixtral 0.97-0.99, deepseek 0.98-1.00; forward
# default/staged at T=16384: qwen3 0.95-0.97, the others 0.97-1.00.
set -u
export LD_LIBRARY_PATH=$PWD/.deps/cjson/lib
GL=$R/.snap/grouped_lab; LB=$O/lab; L=$O/suite; F=$O/fwd; mkdir -p $LB $L $F
B=build-device; T=$B/test_gpu_forward
t0=$SECONDS
mark() { echo "$1: rc=$2 at $((SECONDS - t0)) s; $(tail -n 1 $3 2>/dev/null)" >> $O/call.log; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,power.limit --format=csv > $LB/gpu.txt 2>&1
STAGES=build OUT=$L timeout 150 bash tests/gpu/run_on_device.sh > $L/build_stdout.log 2>&1 &
CHK=chk-swiglu-limit,chk-geglu,chk-geglu-tanh,chk-reglu,chk-relu2,chk-oai
timeout 40 $GL --shapes $CHK --variants up_staged,up_actfirst,up_actfirst_dyn --check-only > $LB/chk.log 2>&1; mark chk $? $LB/chk.log
for i in 1 2 3; do for t in 4096 16384; do
  for arm in staged dyn actfirst actfirst_dyn; do
    LAB_SEED=$((1360 + i)) timeout 60 $GL --shapes qwen3,gptoss,mixtral,deepseek --tokens $t --variants up_$arm \
      --json $LB/lab_${t}_${arm}_$i.jsonl > $LB/lab_${t}_${arm}_$i.log 2>&1
    mark "lab T=$t $arm $i" $? $LB/lab_${t}_${arm}_$i.log
  done
done; done
python3 $R/tools/lab_ab.py $LB dyn staged actfirst actfirst_dyn > $LB/ab_lab.md 2>&1
wait; mark build 0 $L/build_stdout.log
run() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $L/$n.log 2>&1; mark $n $? $L/$n.log; }
run test_quick 60 $T --quick
run memcheck 60 compute-sanitizer --error-exitcode 3 --tool memcheck $T --quick --gemm hopper
S4="--shapes qwen3-30b-a3b,gpt-oss-120b,mixtral-8x7b,deepseek-v3 --tokens 512,4096,16384 --gemm hopper --dtype bf16"
for i in 1 2; do
  timeout 45 $B/bench_gpu_forward $S4 > $F/actfirst_$i.log 2>&1; mark "fwd actfirst $i" $? /dev/null
  MOEFUSE_HOPPER_EPI=staged timeout 45 $B/bench_gpu_forward $S4 > $F/staged_$i.log 2>&1; mark "fwd staged $i" $? /dev/null
done
python3 tools/ab_summary.py $F actfirst staged > $F/ab_fwd.md 2>&1
run racecheck 150 compute-sanitizer --error-exitcode 3 --tool racecheck $T --quick --gemm hopper
mark done 0 /dev/null
