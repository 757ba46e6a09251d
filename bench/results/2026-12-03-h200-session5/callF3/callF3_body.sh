# Device call F3 (session 5): the FP8 epilogue quantiser with the branch-free encoder
# (fp8_encode_fast, also in quant.cu) and the suite's column-major scale readback. Suite --quick
# (the quantiser cases check fp8_encode_fast's codes bit for bit), initcheck on the FP8 cases,
# bench_gpu_forward fp8 A/B (epilogue vs MOEFUSE_FP8_A2=kernel, alternated twice); then the
# faster of the two by that A/B (DECISION in call.log: the epilogue only if faster in total and on
# at least 3/4 of the cells) is the one roofline --measure and the one-process FP8 bench run;
# make run.
set -u
export LD_LIBRARY_PATH=$PWD/.deps/cjson/lib
B=build-device; T=$B/test_gpu_forward; L=$O/suite
mkdir -p $L $O/fwd $O/fp8 $O/makerun $O/measure
t0=$SECONDS
mark() { echo "$1: rc=$2 at $((SECONDS - t0)) s; $(tail -n 1 $3 2>/dev/null)" >> $O/call.log; }
run() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $L/$n.log 2>&1; mark $n $? $L/$n.log; }
STAGES=build OUT=$L timeout 150 bash tests/gpu/run_on_device.sh > /dev/null 2>&1; mark build $? /dev/null
run test_quick 40 $T --quick
run test_fp8_quick_a2kernel 40 env MOEFUSE_FP8_A2=kernel $T --quick --filter fp8
run initcheck_fp8 60 compute-sanitizer --error-exitcode 3 --tool initcheck $T --quick --gemm hopper --filter fp8
BG="--shapes qwen3-30b-a3b,gpt-oss-120b,mixtral-8x7b,deepseek-v3 --tokens 1,64,4096,16384 --gemm hopper --dtype fp8"
for i in 1 2; do
  timeout 60 $B/bench_gpu_forward $BG > $O/fwd/epilogue_$i.log 2>&1; mark "fwd epilogue $i" $? $O/fwd/epilogue_$i.log
  timeout 60 env MOEFUSE_FP8_A2=kernel $B/bench_gpu_forward $BG > $O/fwd/kernel_$i.log 2>&1
  mark "fwd kernel $i" $? $O/fwd/kernel_$i.log
done
python3 tools/ab_summary.py $O/fwd epilogue kernel > $O/fwd/ab.md 2>&1
DECISION=$(python3 - $O/fwd/ab.md <<'PY'
import sys
rows = [l.split("|") for l in open(sys.argv[1]) if l.startswith("| ") and not l.startswith("| shape")]
e = [float(r[3].split()[0]) for r in rows]; k = [float(r[4].split()[0]) for r in rows]
wins = sum(a < b for a, b in zip(e, k))
print("epilogue" if sum(e) < sum(k) and 4 * wins >= 3 * len(e) else "kernel", f"(epilogue faster on {wins} of {len(e)} cells; total {sum(e):.3f} vs {sum(k):.3f} ms)")
PY
)
echo "DECISION: $DECISION" >> $O/call.log
[ "${DECISION%% *}" = kernel ] && export MOEFUSE_FP8_A2=kernel
OUT=$O/measure STAGES="build measure bench" DEADLINE=200 timeout 210 bash tests/gpu/measure_on_device.sh > $O/measure/stdout.log 2>&1
mark measure $? $O/measure/stdout.log
BENCH_COMMIT=$BENCH_COMMIT TOTAL_S=170 OUT=$O/fp8 timeout 195 bash bench/run_on_device.sh --dtype fp8 \
    --target-s 0.1 > /dev/null 2>&1; mark "bench_moe fp8" $? /dev/null
C="-DCJSON_INCLUDE_DIR=$PWD/.deps/cjson/include -DCJSON_LIBRARY=$PWD/.deps/cjson/lib/libcjson.so"
timeout 30 make run CMAKE_FLAGS="$C" > $O/makerun/make_run.log 2>&1; mark "make run" $? $O/makerun/make_run.log
mark done 0 /dev/null
