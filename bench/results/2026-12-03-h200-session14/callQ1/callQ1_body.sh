# Device call Q1 (session 14): the idle second warpgroup (feaf542), and 240-wide tiles for gpt-oss.
# At T=16384 the bench's random routing puts ~512 rows on each deepseek / gpt-oss expert (~1024 on
# qwen3), so about half the experts end in a block with a few live rows: ~12% (6% on qwen3) of the
# grouped GEMMs' MMAs are on padding. feaf542 lets the second consumer warpgroup skip a block whose
# rows 64..127 are all padding (the producer reads the flag beside block_expert and passes it in the
# DYN stage header), so such a tile's MMAs are one warpgroup's.
# 1. lab (new binary): small shapes (six activations, N tails) and the PERF.md shapes at T=512 (most
#    blocks half idle) against fp64 and the shipped output: up_actfirst_dyn, down_dyn, up_bn240,
#    up_staged_bn240, down_bn240; racecheck of the DYN and bn240 variants.
# 2. lab A/B base (baa5080) vs skip (feaf542), up_actfirst_dyn + down_dyn, four shapes, T = 4096 and
#    16384, 3 alternated rounds.
# 3. lab A/B in the new binary, gpt-oss T = 4096 and 16384: b256 (up_actfirst_dyn, down_dyn) vs
#    b240 (up_bn240, down_bn240), 3 alternated rounds (session13_bn240.sh's runs).
# 4. library built twice (feaf542; skip.patch reversed = baa5080's kernel): test_gpu_forward --quick
#    on the new one, memcheck of --quick --gemm hopper, bench_gpu_forward bf16 --gemm hopper
#    new vs base, T = 512, 4096, 16384, 4 alternated rounds; racecheck of --quick --gemm hopper last.
# Prediction (before the run): all checks pass, racecheck 0 hazards.
#   skip/base, lab at T=16384: deepseek and gpt-oss 0.95-0.98 on both GEMMs, qwen3 0.97-0.99,
#   mixtral 0.99-1.01 (a half-idle tile runs in ~0.6 of a full one: one warpgroup's MMAs but the
#   same B bytes); at T=4096 (deepseek and gpt-oss ~128 rows an expert: a third of the blocks nearly
#   empty) deepseek and gpt-oss 0.85-0.95, qwen3 0.93-0.98, mixtral 0.99-1.01.
#   forward new/base: the lab's ratios diluted by dispatch/combine (~10-15% of the time): T=4096
#   deepseek/gpt-oss 0.88-0.96, T=16384 0.96-0.99, T=512 qwen3 0.85-0.95 (blocks of ~32 rows).
#   bn240/b256 (gpt-oss): GEMM2 0.94-0.98 at T=16384 and 0.95-1.0 at 4096, GEMM1 0.97-1.0.
set -u
export LD_LIBRARY_PATH=$PWD/.deps/cjson/lib
GL=$R/.snap/grouped_lab; GB=$R/.snap/grouped_lab_base_device; LB=$O/lab; L=$O/suite; F=$O/fwd; mkdir -p $LB/skip $LB/bn $L $F
B=build-device; T=$B/test_gpu_forward
t0=$SECONDS
mark() { echo "$1: rc=$2 at $((SECONDS - t0)) s; $(tail -n 1 $3 2>/dev/null)" >> $O/call.log; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,power.limit --format=csv > $LB/gpu.txt 2>&1
# The base lab is built here too (both binaries with the tree exceed the 64 MiB a call carries).
( STAGES=build OUT=$L timeout 150 bash tests/gpu/run_on_device.sh > $L/build_stdout.log 2>&1
  patch -R -p1 < bench/results/2026-12-03-h200-session14/callQ1/skip.patch > $L/patch.log 2>&1 &&
  { { nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -Iinclude -Isrc/core -Isrc/cuda -Isrc/cuda/hopper -Ilab \
      -o $GB.tmp lab/grouped_lab.cu > $LB/build_lab_base.log 2>&1 && mv $GB.tmp $GB; } &
    BUILD=build-base STAGES=build OUT=$L/base timeout 150 bash tests/gpu/run_on_device.sh > $L/build_base_stdout.log 2>&1
    wait; } ) &
CHK=chk-swiglu-limit,chk-geglu,chk-geglu-tanh,chk-reglu,chk-relu2,chk-oai
V=up_actfirst_dyn,down_dyn,up_bn240,up_staged_bn240,down_bn240
timeout 60 $GL --shapes $CHK --variants $V --check-only > $LB/chk.log 2>&1; mark chk $? $LB/chk.log
timeout 60 $GL --shapes qwen3,gptoss,mixtral,deepseek --tokens 512 --variants $V --check-only > $LB/chk512.log 2>&1; mark chk512 $? $LB/chk512.log
timeout 120 compute-sanitizer --error-exitcode 3 --tool racecheck $GL --shapes chk-geglu,chk-oai \
  --variants up_actfirst_dyn,down_dyn,up_bn240,down_bn240 --check-only > $LB/racecheck.log 2>&1; mark racecheck_lab $? $LB/racecheck.log
for w in $(seq 1 60); do [ -x $GB ] && break; sleep 2; done; sleep 1
mark build_lab_base 0 $LB/build_lab_base.log
for i in 1 2 3; do for t in 4096 16384; do
  for arm in base skip; do
    case $arm in base) G=$GB;; skip) G=$GL;; esac
    LAB_SEED=$((1400 + i)) timeout 60 $G --shapes qwen3,gptoss,mixtral,deepseek --tokens $t --variants up_actfirst_dyn,down_dyn \
      --json $LB/skip/lab_${t}_${arm}_$i.jsonl > $LB/skip/lab_${t}_${arm}_$i.log 2>&1
    mark "lab skip T=$t $arm $i" $? $LB/skip/lab_${t}_${arm}_$i.log
  done
  for arm in b256 b240; do
    case $arm in b256) V=up_actfirst_dyn,down_dyn;; b240) V=up_bn240,down_bn240;; esac
    LAB_SEED=$((1410 + i)) timeout 60 $GL --shapes gptoss --tokens $t --variants $V \
      --json $LB/bn/lab_${t}_${arm}_$i.jsonl > $LB/bn/lab_${t}_${arm}_$i.log 2>&1
    mark "lab bn T=$t $arm $i" $? $LB/bn/lab_${t}_${arm}_$i.log
  done
done; done
python3 $R/tools/lab_ab.py $LB/skip base skip > $LB/ab_skip.md 2>&1
python3 $R/tools/lab_ab.py $LB/bn b256 b240 > $LB/ab_bn240.md 2>&1
wait; mark build 0 $L/build_stdout.log; mark build_base 0 $L/build_base_stdout.log
run() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $L/$n.log 2>&1; mark $n $? $L/$n.log; }
run test_quick 60 $T --quick
run memcheck 60 compute-sanitizer --error-exitcode 3 --tool memcheck $T --quick --gemm hopper
S4="--shapes qwen3-30b-a3b,gpt-oss-120b,mixtral-8x7b,deepseek-v3 --tokens 512,4096,16384 --gemm hopper --dtype bf16"
for i in 1 2 3 4; do
  timeout 45 $B/bench_gpu_forward $S4 > $F/skip_$i.log 2>&1; mark "fwd skip $i" $? /dev/null
  timeout 45 build-base/bench_gpu_forward $S4 > $F/base_$i.log 2>&1; mark "fwd base $i" $? /dev/null
done
python3 tools/ab_summary.py $F skip base > $F/ab_fwd.md 2>&1
run racecheck 150 compute-sanitizer --error-exitcode 3 --tool racecheck $T --quick --gemm hopper
mark done 0 /dev/null
