#!/usr/bin/env bash
# Prepared in session 11 for a later call (not yet run; the FP8 DYN variant has only been compiled):
# the ticket-counter schedule in the FP8 grouped kernel (grouped_fp8_kernel<..., DYN = true>, lab
# variants fp8_up_dyn / fp8_down_dyn; the library still runs the static stride), against the
# shipped kernel, arms alternated by invocation, three rounds, the four shapes at T=4096 and 16384,
# then ncu DRAM bytes of deepseek GEMM1 at T=16384 in both arms. From the repo root:
#   O=$OUT bash bench/results/next-session/session11_fp8_dyn.sh
# Prediction (before any run): every lab check passes; M1's ncu had the FP8 deepseek GEMM1 at
# T=16384 with DRAM 50% busy over 9.9 ms (~24 GB for 7.5 GB of weights): DYN brings that towards
# 10-15 GB and the launch 3-8% faster; T=4096 deepseek 0.93-0.96 as in bf16; others within +-2%.
# Then the library with it (opt-in since session 11: MOEFUSE_HOPPER_SCHEDULE=dyn makes forward_fp8
# zero a counter and the launcher take the DYN instantiation at prefill): --quick and the FP8 cases
# on Hopper under racecheck with it, and the forward A/B (bench_gpu_forward --dtype fp8, dyn vs
# default, T=512..16384, alternated). Prediction for the forward: deepseek T >= 4096 0.95-0.98,
# others 0.98-1.01. ~5 min. If it wins: make it the FP8 default in hopper_ticket_schedule.
set -u
O=${O:-$PWD/probe-out}; LB=$O/lab; mkdir -p $LB
t0=$SECONDS
mark() { echo "$1: rc=$2 at $((SECONDS - t0)) s; $(tail -n 1 $3 2>/dev/null)" >> $O/call.log; }
nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -lineinfo -Xptxas -v -Iinclude -Isrc/core -Isrc/cuda \
  -Isrc/cuda/hopper -Ilab -o /tmp/grouped_lab lab/grouped_lab.cu > $LB/build.log 2>&1; mark build_lab $? /dev/null
for i in 1 2 3; do for t in 4096 16384; do for arm in static dyn; do
  V=fp8_up_staged,fp8_down_staged; [ $arm = dyn ] && V=fp8_up_dyn,fp8_down_dyn
  LAB_SEED=$((1000 + i)) timeout 60 /tmp/grouped_lab --fp8 --shapes qwen3,gptoss,mixtral,deepseek --tokens $t \
    --variants $V --json $LB/lab_${t}_${arm}_$i.jsonl > $LB/lab_${t}_${arm}_$i.log 2>&1
  mark "lab T=$t $arm $i" $? $LB/lab_${t}_${arm}_$i.log
done; done; done
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,sm__cycles_elapsed.avg.per_second
for v in fp8_up_staged fp8_up_dyn; do
  LAB_SEED=1001 timeout 60 ncu --clock-control none --cache-control none --metrics $M --csv \
    --kernel-name regex:grouped_fp8_kernel --launch-skip 2 --launch-count 2 \
    /tmp/grouped_lab --fp8 --shapes deepseek --tokens 16384 --variants $v > $LB/ncu_deepseek_16384_$v.csv 2>&1
  mark "ncu $v" $? /dev/null
done
python3 tools/ncu_summary.py $LB/ncu_*.csv > $LB/ncu_summary.md 2>&1
export LD_LIBRARY_PATH=$PWD/.deps/cjson/lib
B=build-device; T=$B/test_gpu_forward; L=$O/suite; F=$O/fwd; mkdir -p $L $F
STAGES=build OUT=$L timeout 150 bash tests/gpu/run_on_device.sh > /dev/null 2>&1; mark build $? /dev/null
MOEFUSE_HOPPER_SCHEDULE=dyn timeout 60 $T --quick > $L/quick_dyn.log 2>&1; mark quick_dyn $? $L/quick_dyn.log
MOEFUSE_HOPPER_SCHEDULE=dyn timeout 150 $T --perf 512,4096 --filter fp8 --gemm hopper > $L/perf_fp8_dyn.log 2>&1
mark perf_fp8_dyn $? $L/perf_fp8_dyn.log # the FP8 prefill tiles at real shapes (quick's are mostly decode)
MOEFUSE_HOPPER_SCHEDULE=dyn timeout 150 compute-sanitizer --error-exitcode 3 --tool racecheck $T --quick --gemm hopper \
  --filter fp8 > $L/racecheck_dyn.log 2>&1; mark racecheck_dyn $? $L/racecheck_dyn.log
S4="--shapes qwen3-30b-a3b,gpt-oss-120b,mixtral-8x7b,deepseek-v3 --tokens 512,4096,16384 --gemm hopper --dtype fp8"
for i in 1 2; do
  MOEFUSE_HOPPER_SCHEDULE=dyn timeout 45 $B/bench_gpu_forward $S4 > $F/dyn_$i.log 2>&1; mark "fwd dyn $i" $? /dev/null
  timeout 45 $B/bench_gpu_forward $S4 > $F/static_$i.log 2>&1; mark "fwd static $i" $? /dev/null
done
python3 tools/ab_summary.py $F dyn static > $F/ab_fp8.md 2>&1
