# Device call M4 (session 11): the DYN lab variant of the bf16 grouped kernel (units taken from a
# ticket counter, so the m-blocks of one expert that share a weight tile start together and read
# its k-slices from L2) against the shipped static stride, and the DRAM bytes of each.
# Why: M1's ncu had deepseek GEMM1 at T=16384 (13.3 ms) with DRAM 61% busy (~39 GB for 15 GB of
# weights) at a 1.36 GHz SM clock, and M3's lab 70-82%: the weights are read 2.5-4x, which costs
# power (clock) and, at T=4096, the stream itself.
# 1. build; --quick (the shipped kernels' code moved: grouped_params has one more field, ptxas
#    renamed registers);
# 2. grouped_lab, arms alternated by invocation (static: up_staged,down_staged; dyn: up_dyn,
#    down_dyn), three rounds, the four shapes at T=4096 and T=16384 (each variant checked);
# 3. ncu: DRAM bytes read, time, SM clock of deepseek T=16384 GEMM1 and gpt-oss T=4096 GEMM2, both arms.
# Prediction (before the run): dyn passes every check; DRAM bytes of deepseek GEMM1 T=16384 fall
# from ~40 GB towards 20 GB and the launch gets 5-15% faster; gpt-oss T=4096 GEMM2 (one row block
# per expert: no weight sharing to gain) within +-3%; qwen3/mixtral within +-5%.
set -u
export LD_LIBRARY_PATH=$PWD/.deps/cjson/lib
B=build-device; T=$B/test_gpu_forward; L=$O/suite; LB=$O/lab
mkdir -p $L $LB
t0=$SECONDS
mark() { echo "$1: rc=$2 at $((SECONDS - t0)) s; $(tail -n 1 $3 2>/dev/null)" >> $O/call.log; }
run() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $L/$n.log 2>&1; mark $n $? $L/$n.log; }
STAGES=build OUT=$L timeout 150 bash tests/gpu/run_on_device.sh > /dev/null 2>&1; mark build $? /dev/null
nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -lineinfo -Xptxas -v -Iinclude -Isrc/core -Isrc/cuda \
  -Isrc/cuda/hopper -Ilab -o /tmp/grouped_lab lab/grouped_lab.cu > $LB/build.log 2>&1; mark build_lab $? /dev/null
run test_quick 60 $T --quick
for i in 1 2 3; do for t in 4096 16384; do for arm in static dyn; do
  V=up_staged,down_staged; [ $arm = dyn ] && V=up_dyn,down_dyn
  LAB_SEED=$((1000 + i)) timeout 60 /tmp/grouped_lab --shapes qwen3,gptoss,mixtral,deepseek --tokens $t --variants $V \
    --json $LB/lab_${t}_${arm}_$i.jsonl > $LB/lab_${t}_${arm}_$i.log 2>&1
  mark "lab T=$t $arm $i" $? $LB/lab_${t}_${arm}_$i.log
done; done; done
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,sm__cycles_elapsed.avg.per_second
for c in "deepseek 16384 up_staged" "deepseek 16384 up_dyn" "gptoss 4096 down_staged" "gptoss 4096 down_dyn"; do
  set -- $c
  LAB_SEED=1001 timeout 60 ncu --clock-control none --cache-control none --metrics $M --csv \
    --kernel-name regex:grouped_gemm_kernel --launch-skip 2 --launch-count 2 \
    /tmp/grouped_lab --shapes $1 --tokens $2 --variants $3 > $LB/ncu_$1_$2_$3.csv 2>&1
  mark "ncu $c" $? /dev/null
done
python3 tools/ncu_summary.py $LB/ncu_*.csv > $LB/ncu_summary.md 2>&1
mark done 0 /dev/null
