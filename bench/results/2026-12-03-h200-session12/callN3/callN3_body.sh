# Device call N3 (session 12):
# 1. roofline --measure, run 14: the first check of the power bound (stream_power_share 0.5, fitted
#    on runs 3-13; dd9a44f) on data it was not chosen on. Then check_measured with this build.
# 2. --quick on HEAD's library (a600170 moved the bf16 counter's memset; N1's bench ran it, the suite not).
# 3. ncu source counters of the library's bf16 grouped kernels (lab up_dyn / down_dyn, qwen3
#    T=16384: K 2048 / 768, where the staged epilogue is 20-30% of a tile): where the consumer warps
#    stall in the epilogue, for the next session's epilogue work.
# Prediction (before the run): measure rc 0; grouped bf16 28 of 28 within +-25% with the new model,
#    deepseek GEMM1 T=4096 at 1.03-1.12 of it; cuBLAS 144 / 142 as in runs 12-13; --quick 206/206;
#    ncu: the epilogue's instructions (after the last wgmma wait of a tile) hold >= 15% of GEMM1's
#    and >= 25% of GEMM2's stall samples, mostly short-scoreboard / MIO / barrier (syncwarp) waits.
set -u
export LD_LIBRARY_PATH=$PWD/.deps/cjson/lib
t0=$SECONDS
mark() { echo "$1: rc=$2 at $((SECONDS - t0)) s; $(tail -n 1 $3 2>/dev/null)" >> $O/call.log; }
mkdir -p $O/measure $O/suite $O/prof
nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -lineinfo -Iinclude -Isrc/core -Isrc/cuda \
  -Isrc/cuda/hopper -Ilab -o /tmp/grouped_lab lab/grouped_lab.cu > $O/prof/build_lab.log 2>&1 &
OUT=$O/measure STAGES="build measure" DEADLINE=120 timeout 200 bash tests/gpu/measure_on_device.sh \
  > $O/measure/stdout.log 2>&1; mark measure $? /dev/null
wait; mark build_lab 0 $O/prof/build_lab.log
mkdir -p /tmp/m14 && tar xzf $O/measure/measure_json.tar.gz -C /tmp/m14 && \
  python3 tools/check_measured.py build-device/moefuse /tmp/m14 > $O/measure/check_measured.log 2>&1
mark check_measured $? $O/measure/check_measured.log
timeout 150 cmake --build build-device -j 16 --target test_gpu_forward > $O/suite/build.log 2>&1
mark build_suite $? /dev/null
timeout 60 build-device/test_gpu_forward --quick > $O/suite/quick.log 2>&1; mark quick $? $O/suite/quick.log
S="--section SourceCounters --section WarpStateStats --import-source no"
for v in up_dyn down_dyn; do
  timeout 90 ncu --clock-control none --cache-control none $S --kernel-name regex:grouped_gemm_kernel --launch-skip 2 \
    --launch-count 1 -o $O/prof/$v /tmp/grouped_lab --shapes qwen3 --tokens 16384 --variants $v > $O/prof/ncu_$v.log 2>&1
  mark "ncu $v" $? $O/prof/ncu_$v.log
  ncu --import $O/prof/$v.ncu-rep --page source --csv --print-source sass > $O/prof/${v}_sass.csv 2> $O/prof/${v}_sass.err
  python3 tools/ncu_stalls.py $O/prof/${v}_sass.csv > $O/prof/${v}_stalls.txt 2>&1; mark "stalls $v" $? /dev/null
done
