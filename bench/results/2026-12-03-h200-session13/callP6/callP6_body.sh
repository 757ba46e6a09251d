# Device call P6 (session 13): EPI_ACT_FIRST, the checks P5 could not make.
# P5's gpt-oss lab rows ran on a wrong shape (a sed of the lab's variant table, commit 1d6b0c4-era,
# had turned the gpt-oss model into T=300 with a shared expert; fixed here), and the forward A/B had
# mixtral T=4096 at 1.126 (two runs each, 4.96/5.07 against 4.31/4.59 ms) while the lab's GEMM1 was
# unchanged there (0.999-1.008).
# 1. lab, gpt-oss (bias, clamped SwiGLU) at T=4096 and 16384: up_dyn vs up_actfirst_dyn, plus
#    up_staged vs up_actfirst, 3 alternated rounds.
# 2. library: bench_gpu_forward bf16 default (act-first) vs MOEFUSE_HOPPER_EPI=staged, four shapes,
#    T = 4096 and 16384, 4 alternated rounds.
# Prediction (before the run): gpt-oss lab actfirst_dyn/dyn 0.97-1.00; forward ratios 0.98-1.00 at
# every point, mixtral T=4096 included (P5's 1.126 was drift).
set -u
export LD_LIBRARY_PATH=$PWD/.deps/cjson/lib
GL=$R/.snap/grouped_lab; LB=$O/lab; L=$O/suite; F=$O/fwd; mkdir -p $LB $L $F
B=build-device
t0=$SECONDS
mark() { echo "$1: rc=$2 at $((SECONDS - t0)) s; $(tail -n 1 $3 2>/dev/null)" >> $O/call.log; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,power.limit --format=csv > $LB/gpu.txt 2>&1
STAGES=build OUT=$L timeout 150 bash tests/gpu/run_on_device.sh > $L/build_stdout.log 2>&1 &
for i in 1 2 3; do for t in 4096 16384; do
  for arm in dyn actfirst_dyn staged actfirst; do
    LAB_SEED=$((1370 + i)) timeout 60 $GL --shapes gptoss --tokens $t --variants up_$arm \
      --json $LB/lab_${t}_${arm}_$i.jsonl > $LB/lab_${t}_${arm}_$i.log 2>&1
    mark "lab T=$t $arm $i" $? $LB/lab_${t}_${arm}_$i.log
  done
done; done
python3 $R/tools/lab_ab.py $LB dyn actfirst_dyn staged actfirst > $LB/ab_lab.md 2>&1
wait; mark build 0 $L/build_stdout.log
S4="--shapes qwen3-30b-a3b,gpt-oss-120b,mixtral-8x7b,deepseek-v3 --tokens 4096,16384 --gemm hopper --dtype bf16"
for i in 1 2 3 4; do
  timeout 45 $B/bench_gpu_forward $S4 > $F/actfirst_$i.log 2>&1; mark "fwd actfirst $i" $? /dev/null
  MOEFUSE_HOPPER_EPI=staged timeout 45 $B/bench_gpu_forward $S4 > $F/staged_$i.log 2>&1; mark "fwd staged $i" $? /dev/null
done
python3 tools/ab_summary.py $F actfirst staged > $F/ab_fwd.md 2>&1
mark done 0 /dev/null
