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
# ~2 min. If it wins: ship it as the bf16 kernel's DYN was (b062fef): gemm_hopper_fp8.cu picks the
# DYN instantiation when the gemm_args carry a counter, forward_fp8 reserves and zeroes one.
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
