# Device call M2 (session 11): what the bf16 grouped kernel's staged epilogue spends its time on,
# and the sanitizers to completion on the shipped kernels.
# 1. grouped_lab with two new probes of the shipped epilogue (EPI_STAGED_NOSTORE: everything but
#    the output stores; EPI_STAGED_NOTABLE: everything with a made-up row table, no plan or
#    routing-weight loads) beside the mainloop alone (none) and the shipped epilogue (staged), on
#    the four PERF.md shapes at T=4096 and T=16384, two seeds. The library's kernels are
#    unchanged (cuobjdump: the SASS of gemm_hopper.cu's three grouped kernels is identical).
# 2. test_gpu_forward --perf 1,3,8,64,129,512,4096 (issue 3's T list) on the default paths;
#    racecheck to completion (L4's stopped at 90 s) and memcheck of --quick --gemm hopper.
# Prediction (before the run): the lab passes its checks; per tile, staged - none = 4-5 us at
# qwen3 T=16384 (as session 7); nostore recovers most of GEMM2's excess (the 16-byte fp32 row
# stores, the lab's GEMM2 writes fp32) and about half of GEMM1's; notable recovers 1-2 us per tile
# (two dependent L2 loads per row table). --perf all pass; racecheck 0 hazards in ~150-200 s;
# memcheck 0 errors.
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
V=up_none,up_staged,up_staged_nostore,up_staged_notable,down_none,down_staged,down_staged_nostore,down_staged_notable
for i in 1 2; do for t in 4096 16384; do
  LAB_SEED=$((1000 + i)) timeout 60 /tmp/grouped_lab --shapes qwen3,gptoss,mixtral,deepseek --tokens $t --variants $V \
    --json $LB/lab_${t}_$i.jsonl > $LB/lab_${t}_$i.log 2>&1
  mark "lab T=$t seed $i" $? $LB/lab_${t}_$i.log
done; done
run perf 170 $T --perf 1,3,8,64,129,512,4096
left=$((520 - (SECONDS - t0))); [ $left -gt 260 ] && left=260; [ $left -lt 5 ] && left=5
run racecheck $left compute-sanitizer --error-exitcode 3 --tool racecheck $T --quick --gemm hopper
left=$((575 - (SECONDS - t0))); [ $left -gt 60 ] && left=60; [ $left -lt 5 ] && left=5
run memcheck $left compute-sanitizer --error-exitcode 3 --tool memcheck $T --quick --gemm hopper
mark done 0 /dev/null
