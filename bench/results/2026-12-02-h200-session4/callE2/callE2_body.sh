# Device call E2 (session 4): (1) the FP8 prefill regression: bench_gpu_forward fp8 at T=16384 on
# HEAD (prefill instantiation without the idle check, 48528fc) and on 809aa0a, alternated twice;
# (2) HEAD's suite (--quick, FP8 --perf 8,4096) and --print-config; (3) the FP8 lab with the
# ablations (no scales / no promotion / neither) and the ordered-issue candidate fp8v4, then Nsight
# Compute of fp8v4 and fp8v2; (4) per-instruction (SASS) stall samples exported from E1's reports.
set -u
export LD_LIBRARY_PATH=$PWD/.deps/cjson/lib
B=build-device; T=$B/test_gpu_forward; L=$O/suite
mkdir -p $L $O/ab $O/lab $O/ncu
t0=$SECONDS
mark() { echo "$1: rc=$2 at $((SECONDS - t0)) s; $(tail -n 1 $3 2>/dev/null)" >> $O/call.log; }
run() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $L/$n.log 2>&1; mark $n $? $L/$n.log; }
C=(-DCJSON_INCLUDE_DIR=$PWD/.deps/cjson/include -DCJSON_LIBRARY=$PWD/.deps/cjson/lib/libcjson.so)
( cd /tmp/old && cmake -S . -B build-old -DCMAKE_BUILD_TYPE=Release -DMOEFUSE_CUDA=ON "${C[@]}" > /tmp/old.log 2>&1 \
  && cmake --build build-old -j 6 --target bench_gpu_forward >> /tmp/old.log 2>&1; echo $? > /tmp/old.rc ) &
STAGES=build OUT=$L timeout 150 bash tests/gpu/run_on_device.sh > /dev/null 2>&1; mark build $? /dev/null
timeout 60 cmake --build $B -j 10 --target moefuse_cli > $L/build_cli.log 2>&1; mark build_cli $? $L/build_cli.log
wait; mark build_old "$(cat /tmp/old.rc)" /tmp/old.log; cp /tmp/old.log $O/ab/build_old.log
BG="--shapes mixtral-8x7b,qwen3-30b-a3b --tokens 16384 --gemm hopper --dtype fp8"
for i in 1 2; do
  timeout 60 $B/bench_gpu_forward $BG > $O/ab/head_$i.log 2>&1; mark "ab head $i" $? $O/ab/head_$i.log
  timeout 60 /tmp/old/build-old/bench_gpu_forward $BG > $O/ab/old809_$i.log 2>&1; mark "ab 809aa0a $i" $? $O/ab/old809_$i.log
done
run test_quick 40 $T --quick
run test_perf_fp8 80 $T --perf 8,4096 --filter fp8
run print_config 20 $B/moefuse run --model qwen3-30b-a3b --tokens 8 --print-config
run print_config_v1 20 env MOEFUSE_GEMM=v1 $B/moefuse run --model qwen3-30b-a3b --tokens 8 --print-config
QUICK=1 LAB_BUILD=/tmp/fp8lab OUT=$O/lab VARIANTS="fp8v1 fp8v4 fp8v2 fp8a-noscale fp8a-nopromo fp8a-plain" LAB_LIMIT=45 \
    timeout 200 bash lab/run_fp8_on_device.sh > $O/lab/run.log 2>&1; mark lab $? $O/lab/run.log
NCU="ncu --clock-control none --set full --import-source no"
for v in fp8v4 fp8v2; do
  run ncu_$v 50 $NCU -k regex:fp8 --launch-count 1 -o $O/ncu/dense_${v}_4096 /tmp/fp8lab/gemm_fp8_lab --variants $v --filter square-4096
done
E1=bench/results/2026-12-02-h200-session4/callE1/ncu
for r in $E1/*.ncu-rep $O/ncu/*.ncu-rep; do
  b=$O/ncu/$(basename ${r%.ncu-rep})
  timeout 60 ncu -i $r --page source --csv --print-source sass > $b.sass.csv 2> $b.sass.err; mark "source $(basename $r)" $? $b.sass.err
  [ -e $r ] && [ "${r#$O}" != "$r" ] && ncu -i $r --page raw --csv > $b.raw.csv 2>&1
done
mark done 0 /dev/null
