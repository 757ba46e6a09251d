# Device call G1 (session 6): HEAD (3f88ebb: FP8 A scales by bulk copy, A2 scales k-block-major;
# then the decode idle flag loaded a unit ahead, and all-padding warps skipping the staged
# epilogue) against 35365d0 (session 5's landing code) built beside it.
# 1. HEAD: suite --selftest, --quick, and the FP8 list (0e4a224's encoder fix and the bulk path);
# 2. A/B: bench_gpu_forward --dtype fp8, HEAD vs 35365d0, alternated twice;
# 3. roofline --measure run 5 (measure stage) on HEAD if its suite passed, else on 35365d0;
# 4. the grouped lab's epilogue split (no-store vs shipped) at T=4096, bf16 and FP8 (HEAD);
# 5. ncu (full set) of the bf16 grouped GEMM1 at deepseek T=4096, GEMM2 at gpt-oss T=4096 and
#    the FP8 grouped GEMM1 at qwen3 T=16384 (HEAD).
set -u
export LD_LIBRARY_PATH=$PWD/.deps/cjson/lib
B=build-device; T=$B/test_gpu_forward; L=$O/suite
mkdir -p $L $O/fwd $O/measure $O/glab $O/glab_fp8 $O/ncu
t0=$SECONDS
mark() { echo "$1: rc=$2 at $((SECONDS - t0)) s; $(tail -n 1 $3 2>/dev/null)" >> $O/call.log; }
run() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $L/$n.log 2>&1; mark $n $? $L/$n.log; }
C=(-DCJSON_INCLUDE_DIR=$PWD/.deps/cjson/include -DCJSON_LIBRARY=$PWD/.deps/cjson/lib/libcjson.so)
( cd /tmp/old && cmake -S . -B build-old -DCMAKE_BUILD_TYPE=Release -DMOEFUSE_CUDA=ON "${C[@]}" > /tmp/old.log 2>&1 \
  && cmake --build build-old -j 6 --target bench_gpu_forward >> /tmp/old.log 2>&1; echo $? > /tmp/old.rc ) &
STAGES=build OUT=$L timeout 150 bash tests/gpu/run_on_device.sh > /dev/null 2>&1; mark build $? /dev/null
wait; mark build_old "$(cat /tmp/old.rc)" /tmp/old.log
run selftest 30 $T --selftest
run test_quick 60 $T --quick
run test_fp8 60 $T --quick --filter fp8
S4="--shapes qwen3-30b-a3b,gpt-oss-120b,mixtral-8x7b,deepseek-v3 --tokens 8,64,512,4096,16384 --gemm hopper"
for i in 1 2; do
  timeout 60 $B/bench_gpu_forward $S4 --dtype fp8 > $O/fwd/fp8head_$i.log 2>&1; mark "fwd fp8 head $i" $? $O/fwd/fp8head_$i.log
  timeout 60 /tmp/old/build-old/bench_gpu_forward $S4 --dtype fp8 > $O/fwd/fp8old_$i.log 2>&1
  mark "fwd fp8 35365d0 $i" $? $O/fwd/fp8old_$i.log
done
python3 tools/ab_summary.py $O/fwd fp8head fp8old > $O/fwd/ab_fp8.md 2>&1
if tail -n 1 $L/test_quick.log | grep -q ' 0 failed$' && tail -n 1 $L/test_fp8.log | grep -q ' 0 failed$'; then
  echo "measure on HEAD" >> $O/call.log
  OUT=$O/measure STAGES="build measure" DEADLINE=150 timeout 160 bash tests/gpu/measure_on_device.sh \
      > $O/measure/stdout.log 2>&1; mark measure $? $O/measure/stdout.log
else
  echo "measure on 35365d0 (HEAD's suite failed)" >> $O/call.log
  ( cd /tmp/old && OUT=$O/measure STAGES="build measure" DEADLINE=150 timeout 160 bash tests/gpu/measure_on_device.sh \
      > $O/measure/stdout.log 2>&1 ); mark measure $? $O/measure/stdout.log
fi
SH=deepseek,gptoss,qwen3,mixtral
OUT=$O/glab SHAPES=$SH TOKENS=4096 VARIANTS=up_none,up_staged,down_none,down_staged SUITE=0 LAB_LIMIT=45 \
    timeout 80 bash lab/run_grouped_on_device.sh > $O/glab/run.log 2>&1; mark glab $? $O/glab/run.log
OUT=$O/glab_fp8 LAB=fp8 SHAPES=$SH TOKENS=4096 SUITE=0 LAB_LIMIT=45 LAB_BUILD=/tmp/glab8 \
    timeout 80 bash lab/run_grouped_on_device.sh > $O/glab_fp8/run.log 2>&1; mark glab_fp8 $? $O/glab_fp8/run.log
NCU="ncu --clock-control none --set full --import-source no"
G=/tmp/moefuse-grouped-lab/grouped_lab
run ncu_up 60 $NCU -k regex:grouped_gemm_kernel --launch-count 1 -o $O/ncu/bf16_up_deepseek_4096 \
    $G --shapes deepseek --tokens 4096 --variants up_staged
run ncu_down 50 $NCU -k regex:grouped_gemm_kernel --launch-count 1 -o $O/ncu/bf16_down_gptoss_4096 \
    $G --shapes gptoss --tokens 4096 --variants down_staged
run ncu_fp8_up 50 $NCU -k regex:grouped_fp8 --launch-count 1 -o $O/ncu/fp8_up_qwen3_16384 \
    /tmp/glab8/grouped_lab --fp8 --shapes qwen3 --tokens 16384 --variants fp8_up_staged
for r in $O/ncu/*.ncu-rep; do
    ncu -i $r --page source --csv --print-source sass > ${r%.ncu-rep}.sass.csv 2>&1
    ncu -i $r --page details --print-units base > ${r%.ncu-rep}.details.txt 2>&1
    ncu -i $r --page raw --csv > ${r%.ncu-rep}.raw.csv 2>&1
done
mark done 0 /dev/null
