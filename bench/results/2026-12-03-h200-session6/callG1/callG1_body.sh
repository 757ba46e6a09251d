# Device call G1 (session 6): three builds side by side:
#   HEAD    + the L2 prefetch of weight boxes a ring ahead (bf16 and FP8 grouped kernels) and the
#           review fixes (quantiser entry strides, scale_ld, proxy fence)
#   mid     646e7b7: FP8 A scales by bulk copy (A2 scales k-block-major), the decode idle flag
#                    loaded a unit ahead, all-padding warps skipping the staged epilogue
#   old     35365d0: session 5's landing code
# 1. HEAD: suite --selftest, --quick, and the FP8 list;
# 2. bench_gpu_forward, alternated twice: fp8 HEAD / mid / old, bf16 HEAD / old (T 8..16384);
# 3. roofline --measure run 5 (measure stage) on HEAD if its suite passed, else on old;
# 4. the bf16 grouped lab's epilogue split at T=4096 (HEAD);
# 5. ncu (full set) of the bf16 grouped GEMM1 at deepseek T=4096 (HEAD).
set -u
export LD_LIBRARY_PATH=$PWD/.deps/cjson/lib
B=build-device; T=$B/test_gpu_forward; L=$O/suite
mkdir -p $L $O/fwd $O/measure $O/glab $O/ncu
t0=$SECONDS
mark() { echo "$1: rc=$2 at $((SECONDS - t0)) s; $(tail -n 1 $3 2>/dev/null)" >> $O/call.log; }
run() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $L/$n.log 2>&1; mark $n $? $L/$n.log; }
C=(-DCJSON_INCLUDE_DIR=$PWD/.deps/cjson/include -DCJSON_LIBRARY=$PWD/.deps/cjson/lib/libcjson.so)
for v in old mid; do
  ( cd /tmp/$v && cmake -S . -B build-$v -DCMAKE_BUILD_TYPE=Release -DMOEFUSE_CUDA=ON "${C[@]}" > /tmp/$v.log 2>&1 \
    && cmake --build build-$v -j 5 --target bench_gpu_forward >> /tmp/$v.log 2>&1; echo $? > /tmp/$v.rc ) &
done
STAGES=build OUT=$L timeout 150 bash tests/gpu/run_on_device.sh > /dev/null 2>&1; mark build $? /dev/null
wait; mark build_old "$(cat /tmp/old.rc)" /tmp/old.log; mark build_mid "$(cat /tmp/mid.rc)" /tmp/mid.log
run selftest 30 $T --selftest
run test_quick 60 $T --quick
run test_fp8 60 $T --quick --filter fp8
S4="--shapes qwen3-30b-a3b,gpt-oss-120b,mixtral-8x7b,deepseek-v3 --tokens 8,64,512,4096,16384 --gemm hopper"
bench() { # tag binary dtype i
  timeout 45 $2 $S4 --dtype $3 > $O/fwd/$3$1_$4.log 2>&1; mark "fwd $3 $1 $4" $? $O/fwd/$3$1_$4.log; }
for i in 1 2; do
  bench head $B/bench_gpu_forward fp8 $i; bench mid /tmp/mid/build-mid/bench_gpu_forward fp8 $i
  bench old /tmp/old/build-old/bench_gpu_forward fp8 $i
  bench head $B/bench_gpu_forward bf16 $i; bench old /tmp/old/build-old/bench_gpu_forward bf16 $i
done
for a in "fp8head fp8old" "fp8head fp8mid" "fp8mid fp8old" "bf16head bf16old"; do
  python3 tools/ab_summary.py $O/fwd $a > $O/fwd/ab_${a// /_}.md 2>&1
done
if tail -n 1 $L/test_quick.log | grep -q ' 0 failed$' && tail -n 1 $L/test_fp8.log | grep -q ' 0 failed$'; then
  echo "measure on HEAD" >> $O/call.log
  OUT=$O/measure STAGES="build measure" DEADLINE=130 timeout 140 bash tests/gpu/measure_on_device.sh \
      > $O/measure/stdout.log 2>&1; mark measure $? $O/measure/stdout.log
else
  echo "measure on old (HEAD's suite failed)" >> $O/call.log
  ( cd /tmp/old && OUT=$O/measure STAGES="build measure" DEADLINE=130 timeout 140 bash tests/gpu/measure_on_device.sh \
      > $O/measure/stdout.log 2>&1 ); mark measure $? $O/measure/stdout.log
fi
OUT=$O/glab SHAPES=deepseek,gptoss,qwen3,mixtral TOKENS=4096 VARIANTS=up_none,up_staged,down_none,down_staged SUITE=0 \
    LAB_LIMIT=40 timeout 70 bash lab/run_grouped_on_device.sh > $O/glab/run.log 2>&1; mark glab $? $O/glab/run.log
NCU="ncu --clock-control none --set full --import-source no"
run ncu_up 60 $NCU -k regex:grouped_gemm_kernel --launch-count 1 -o $O/ncu/bf16_up_deepseek_4096 \
    /tmp/moefuse-grouped-lab/grouped_lab --shapes deepseek --tokens 4096 --variants up_staged
for r in $O/ncu/*.ncu-rep; do
    ncu -i $r --page details --print-units base > ${r%.ncu-rep}.details.txt 2>&1
    ncu -i $r --page raw --csv > ${r%.ncu-rep}.raw.csv 2>&1
done
mark done 0 /dev/null
