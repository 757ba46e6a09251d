# Device call H5 (session 7): HEAD (the epilogue tables filled with batched loads, 3 tables;
# both grouped kernels) against 7bd5a03 (old: session 6's kernels) built beside it.
# Prediction (before the run): the H4 gains kept (qwen3 2-6% faster, gpt-oss GEMM2 -5%/tile) and
# deepseek-v3's regression gone: deepseek forward within +-1% of old at T = 4096-16384, its bf16
# GEMM2 per-tile time in the lab at or below old's; roofline --measure's grouped launches back to
# 28/28 with deepseek T=4096 GEMM1 bf16 below 1.25.
# 1. HEAD: suite --selftest, --quick, --perf 64,4096 (device budget); the gather path (--quick); memcheck
#    (Hopper tma and FP8 cases), racecheck (bf16 tma-swiglu*, fp8-block-row128*);
# 2. (dropped for the device budget) grouped_lab HEAD vs old, the same seed, gpt-oss / deepseek T=4096 and qwen3 T=16384, twice;
# 3. bench_gpu_forward bf16 and FP8 HEAD vs old, T = 8 .. 16384, alternated twice;
# 4. roofline --measure run 9 on HEAD; then, while time is left, the one-process benches with
#    every peer (FP8, then bf16) and make run.
set -u
export LD_LIBRARY_PATH=$PWD/.deps/cjson/lib
B=build-device; T=$B/test_gpu_forward; L=$O/suite
mkdir -p $L $O/fwd $O/measure $O/lab $O/fp8 $O/bf16 $O/makerun
t0=$SECONDS
mark() { echo "$1: rc=$2 at $((SECONDS - t0)) s; $(tail -n 1 $3 2>/dev/null)" >> $O/call.log; }
run() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $L/$n.log 2>&1; mark $n $? $L/$n.log; }
C=(-DCJSON_INCLUDE_DIR=$PWD/.deps/cjson/include -DCJSON_LIBRARY=$PWD/.deps/cjson/lib/libcjson.so)
NV="nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -Iinclude -Isrc/core -Isrc/cuda -Isrc/cuda/hopper -Ilab"
( cd /tmp/old && cmake -S . -B build-old -DCMAKE_BUILD_TYPE=Release -DMOEFUSE_CUDA=ON "${C[@]}" > /tmp/old.log 2>&1 \
  && cmake --build build-old -j 6 --target bench_gpu_forward >> /tmp/old.log 2>&1; echo $? > /tmp/old.rc ) &
STAGES=build OUT=$L timeout 150 bash tests/gpu/run_on_device.sh > /dev/null 2>&1; mark build $? /dev/null
wait; mark build_old "$(cat /tmp/old.rc)" /tmp/old.log
run selftest 30 $T --selftest
run test_quick 60 $T --quick
MOEFUSE_HOPPER_A=gather run test_quick_gather 60 $T --quick --gemm hopper
run memcheck_fp8 90 compute-sanitizer --error-exitcode 3 --tool memcheck $T --quick --gemm hopper --filter fp8
run racecheck_hopper 120 compute-sanitizer --error-exitcode 3 --tool racecheck $T --quick --gemm hopper --filter tma-swiglu
run racecheck_fp8 120 compute-sanitizer --error-exitcode 3 --tool racecheck $T --quick --gemm hopper --filter fp8-block-row128
# (no --perf: device budget; H4 ran it whole on the table code)
# (no lab A/B: device budget)
S4="--shapes qwen3-30b-a3b,gpt-oss-120b,mixtral-8x7b,deepseek-v3 --tokens 8,64,512,4096,16384 --gemm hopper"
for i in 1 2; do
  for d in bf16 fp8; do
    timeout 50 $B/bench_gpu_forward $S4 --dtype $d > $O/fwd/${d}head_$i.log 2>&1; mark "fwd $d head $i" $? $O/fwd/${d}head_$i.log
    timeout 50 /tmp/old/build-old/bench_gpu_forward $S4 --dtype $d > $O/fwd/${d}old_$i.log 2>&1
    mark "fwd $d old $i" $? $O/fwd/${d}old_$i.log
  done
done
python3 tools/ab_summary.py $O/fwd bf16head bf16old > $O/fwd/ab_bf16.md 2>&1
python3 tools/ab_summary.py $O/fwd fp8head fp8old > $O/fwd/ab_fp8.md 2>&1
OUT=$O/measure STAGES="build measure" DEADLINE=60 timeout 70 bash tests/gpu/measure_on_device.sh \
    > $O/measure/stdout.log 2>&1; mark measure $? $O/measure/stdout.log
# (no benches with peers: device budget; H4 ran them on the table code)
C="-DCJSON_INCLUDE_DIR=$PWD/.deps/cjson/include -DCJSON_LIBRARY=$PWD/.deps/cjson/lib/libcjson.so"
mark done 0 /dev/null
