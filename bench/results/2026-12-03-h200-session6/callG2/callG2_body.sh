# Device call G2 (session 6): HEAD (the L2 prefetch reverted; bulk FP8 A scales, decode details and
# the review fixes kept) and exp (HEAD + evict-first stores in the staged epilogues) side by side.
# 1. HEAD: suite --selftest, --quick, FP8 list; memcheck and initcheck on the FP8 Hopper cases;
# 2. bench_gpu_forward A/B, HEAD vs exp, bf16 and fp8, T = 512, 4096, 16384, alternated twice;
# 3. roofline --measure run 6 on HEAD (measure stage);
# 4. ncu (full set) of the FP8 decode GEMMs (qwen3-30b-a3b, T=64);
# 5. the one-process FP8 bench with every peer (bench/run_on_device.sh --dtype fp8).
set -u
export LD_LIBRARY_PATH=$PWD/.deps/cjson/lib
B=build-device; T=$B/test_gpu_forward; L=$O/suite
mkdir -p $L $O/fwd $O/measure $O/fp8 $O/ncu
t0=$SECONDS
mark() { echo "$1: rc=$2 at $((SECONDS - t0)) s; $(tail -n 1 $3 2>/dev/null)" >> $O/call.log; }
run() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $L/$n.log 2>&1; mark $n $? $L/$n.log; }
C=(-DCJSON_INCLUDE_DIR=$PWD/.deps/cjson/include -DCJSON_LIBRARY=$PWD/.deps/cjson/lib/libcjson.so)
( cd /tmp/exp && cmake -S . -B build-exp -DCMAKE_BUILD_TYPE=Release -DMOEFUSE_CUDA=ON "${C[@]}" > /tmp/exp.log 2>&1 \
  && cmake --build build-exp -j 6 --target bench_gpu_forward >> /tmp/exp.log 2>&1; echo $? > /tmp/exp.rc ) &
STAGES=build OUT=$L timeout 150 bash tests/gpu/run_on_device.sh > /dev/null 2>&1; mark build $? /dev/null
wait; mark build_exp "$(cat /tmp/exp.rc)" /tmp/exp.log
run selftest 30 $T --selftest
run test_quick 60 $T --quick
run test_fp8 60 $T --quick --filter fp8
run memcheck_fp8 90 compute-sanitizer --error-exitcode 3 --tool memcheck $T --quick --gemm hopper --filter fp8
run initcheck_fp8 90 compute-sanitizer --error-exitcode 3 --tool initcheck $T --quick --gemm hopper --filter fp8
S4="--shapes qwen3-30b-a3b,gpt-oss-120b,mixtral-8x7b,deepseek-v3 --tokens 512,4096,16384 --gemm hopper"
bench() { # tag binary dtype i
  timeout 45 $2 $S4 --dtype $3 > $O/fwd/$3$1_$4.log 2>&1; mark "fwd $3 $1 $4" $? $O/fwd/$3$1_$4.log; }
for i in 1 2; do
  for d in bf16 fp8; do bench head $B/bench_gpu_forward $d $i; bench exp /tmp/exp/build-exp/bench_gpu_forward $d $i; done
done
for d in bf16 fp8; do python3 tools/ab_summary.py $O/fwd ${d}exp ${d}head > $O/fwd/ab_$d.md 2>&1; done
OUT=$O/measure STAGES="build measure" DEADLINE=130 timeout 140 bash tests/gpu/measure_on_device.sh \
    > $O/measure/stdout.log 2>&1; mark measure $? $O/measure/stdout.log
NCU="ncu --clock-control none --set full --import-source no"
run ncu_decode 60 $NCU -k regex:grouped_fp8 --launch-count 2 -o $O/ncu/fp8_decode_qwen3_64 \
    $B/bench_gpu_forward --shapes qwen3-30b-a3b --tokens 64 --dtype fp8 --gemm hopper
for r in $O/ncu/*.ncu-rep; do
    ncu -i $r --page details --print-units base > ${r%.ncu-rep}.details.txt 2>&1
    ncu -i $r --page raw --csv > ${r%.ncu-rep}.raw.csv 2>&1
done
left=$((570 - (SECONDS - t0)))
BENCH_COMMIT=$BENCH_COMMIT TOTAL_S=$left OUT=$O/fp8 timeout $left bash bench/run_on_device.sh --dtype fp8 \
    --target-s 0.1 > /dev/null 2>&1; mark "bench_moe fp8" $? /dev/null
mark done 0 /dev/null
