# Device call Q2 (session 14): the library with Q1's outcome (60d366c): GEMM2's idle-warpgroup skip
# (GEMM1 keeps both warpgroups) and 240-wide tiles where 240 divides n and 256 does not (gpt-oss).
# 1. build 60d366c and (q2.patch reversed) baa5080's src/; test_gpu_forward --quick; the new case
#    tma-bn240-oai-bias with MOEFUSE_PRINT_CONFIG=1 (the config line must name 240-wide tiles) and
#    under memcheck and racecheck; --perf 4096 --gemm hopper on gpt-oss (H = 2880: 240-wide tiles).
# 2. bench_gpu_forward bf16 --gemm hopper, T = 512, 4096, 16384, four shapes, 4 alternated rounds of
#    new, base, and new with MOEFUSE_HOPPER_BN=256 (the skip alone).
# 3. racecheck of --quick --gemm hopper.
# Prediction (before the run): every check passes, 0 hazards. new/base: gpt-oss T=16384 0.95-0.98
#   (both), deepseek T=16384 0.98-0.995 and qwen3 0.98-1.0 (GEMM2's skip: Q1 lab 0.963 / 0.979 on
#   GEMM2, a third of the GEMM time), mixtral 0.99-1.01; T=4096 0.98-1.01; bn256/base on gpt-oss
#   T=16384 0.99-1.0 (the skip alone).
set -u
export LD_LIBRARY_PATH=$PWD/.deps/cjson/lib
L=$O/suite; F=$O/fwd; mkdir -p $L $F
B=build-device; T=$B/test_gpu_forward
t0=$SECONDS
mark() { echo "$1: rc=$2 at $((SECONDS - t0)) s; $(tail -n 1 $3 2>/dev/null)" >> $O/call.log; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,power.limit --format=csv > $L/gpu.txt 2>&1
STAGES=build OUT=$L timeout 150 bash tests/gpu/run_on_device.sh > $L/build_stdout.log 2>&1; mark build $? $L/build_stdout.log
( patch -R -p1 < bench/results/2026-12-03-h200-session14/callQ2/q2.patch > $L/patch.log 2>&1 &&
  BUILD=build-base STAGES=build OUT=$L/base timeout 150 bash tests/gpu/run_on_device.sh > $L/build_base_stdout.log 2>&1 ) &
run() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $L/$n.log 2>&1; mark $n $? $L/$n.log; }
run test_quick 60 $T --quick
MOEFUSE_PRINT_CONFIG=1 run bn240_case 60 $T --filter bn240 --gemm hopper
grep -c "128x240x64 (GEMM1) and 128x240x64 (GEMM2)" $L/bn240_case.log > $L/bn240_config_count.txt 2>&1
run bn240_memcheck 90 compute-sanitizer --error-exitcode 3 --tool memcheck $T --filter bn240 --gemm hopper --quick
run bn240_racecheck 120 compute-sanitizer --error-exitcode 3 --tool racecheck $T --filter bn240 --gemm hopper --quick
MOEFUSE_PRINT_CONFIG=1 run perf_gptoss 120 $T --perf 4096 --gemm hopper --filter gpt-oss
wait; mark build_base 0 $L/build_base_stdout.log
S4="--shapes qwen3-30b-a3b,gpt-oss-120b,mixtral-8x7b,deepseek-v3 --tokens 512,4096,16384 --gemm hopper --dtype bf16"
for i in 1 2 3 4; do
  timeout 45 $B/bench_gpu_forward $S4 > $F/new_$i.log 2>&1; mark "fwd new $i" $? /dev/null
  timeout 45 build-base/bench_gpu_forward $S4 > $F/base_$i.log 2>&1; mark "fwd base $i" $? /dev/null
  MOEFUSE_HOPPER_BN=256 timeout 45 $B/bench_gpu_forward $S4 > $F/bn256_$i.log 2>&1; mark "fwd bn256 $i" $? /dev/null
done
python3 tools/ab_summary.py $F new base bn256 > $F/ab_fwd.md 2>&1
run racecheck 150 compute-sanitizer --error-exitcode 3 --tool racecheck $T --quick --gemm hopper
mark done 0 /dev/null
