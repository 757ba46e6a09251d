#!/usr/bin/env bash
# Session 18, call S5: the 1x128 quantiser's 16-wide form (quant_row128_v16_kernel: a lane 16
# adjacent columns, a warp's four groups at once, 16-byte stores; for items of 4 groups where rows
# are whole 16-element pieces, 16-byte aligned; MOEFUSE_FP8_QUANT=vec4 forces the 4-wide form), for
# x (and its scatter into plan order) and A2. Compile-checked only before this run, 0 spills.
# 1. Correctness: --quick, --perf 4096 --gemm hopper --filter fp8 (x and A2 of PERF.md's shapes on
#    the 16-wide form, checked stage by stage), --quick --filter fp8 with vec4, memcheck --quick fp8.
# 2. FP8 forward A/B vec4 vs v16, 3 alternated rounds, 8 shapes, T = 4096, 16384.
# 3. ncu qwen3-30b-a3b and deepseek-v3 T=16384 FP8; the CLI's config lines (qwen3 fp8 T = 64, 16384).
# Prediction (before the run): (1) all pass, 0 errors. (3) x scatter qwen3 134 -> 80-110 us,
# deepseek 675 -> 400-550 us; A2 quantiser qwen3 213 -> 160-200 us, deepseek 501 -> 380-480.
# (2) v16/vec4 at T=16384: qwen3 0.95-0.98, deepseek 0.98-0.99, others 0.97-1.00; T=4096 similar.
set -u
R=$PWD; O=$OUT; F=$O/fwd; mkdir -p $F
export LD_LIBRARY_PATH=$R/.deps/cjson/lib
t0=$SECONDS
mark() { echo "$1: rc=$2 at $((SECONDS - t0)) s; $(tail -n 1 $3 2>/dev/null)" >> $O/call.log; }
STAGES=build OUT=$O/build timeout 150 bash tests/gpu/run_on_device.sh > $O/build_stdout.log 2>&1; mark build $? $O/build_stdout.log
T=build-device/test_gpu_forward; B=build-device/bench_gpu_forward
timeout 60 $T --quick > $F/test_quick.log 2>&1; mark test_quick $? $F/test_quick.log
timeout 120 $T --perf 4096 --gemm hopper --filter fp8 > $F/test_perf4096_fp8.log 2>&1; mark "test_perf4096 fp8" $? $F/test_perf4096_fp8.log
MOEFUSE_FP8_QUANT=vec4 timeout 60 $T --quick --filter fp8 > $F/test_quick_fp8_vec4.log 2>&1; mark "test_quick fp8 vec4" $? $F/test_quick_fp8_vec4.log
timeout 60 compute-sanitizer --tool memcheck $T --quick --filter fp8 > $F/memcheck_fp8.log 2>&1; mark memcheck_fp8 $? $F/memcheck_fp8.log
S=qwen3-30b-a3b,gpt-oss-120b,mixtral-8x7b,deepseek-v3,qwen3-235b-a22b,glm-4.5-air,qwen3-next-80b-a3b,gpt-oss-20b
for i in 1 2 3; do
  MOEFUSE_FP8_QUANT=vec4 timeout 60 $B --shapes $S --tokens 4096,16384 --gemm hopper --dtype fp8 > $F/fp8_vec4_$i.log 2>&1
  mark "fp8 vec4 $i" $? /dev/null
  timeout 60 $B --shapes $S --tokens 4096,16384 --gemm hopper --dtype fp8 > $F/fp8_v16_$i.log 2>&1; mark "fp8 v16 $i" $? /dev/null
done
python3 - $F > $F/v16.md 2>&1 <<'PY'
import glob, re, statistics, sys
t = {}
for f in sorted(glob.glob(sys.argv[1] + "/fp8_*_[0-9].log")):
    q = re.match(r".*/fp8_(vec4|v16)_\d\.log", f).group(1)
    for line in open(f):
        p = line.split()
        if len(p) >= 4 and p[1].isdigit() and p[2] == "hopper":
            t.setdefault((p[0], int(p[1])), {}).setdefault(q, []).append(float(p[3]))
print("| shape | T | vec4 ms | v16 ms | v16 / vec4 | vec4 runs | v16 runs |\n|---|---|---|---|---|---|---|")
for k in sorted(t):
    a, b = t[k].get("vec4", []), t[k].get("v16", [])
    if a and b:
        ma, mb = statistics.median(a), statistics.median(b)
        print(f"| {k[0]} | {k[1]} | {ma:.4f} | {mb:.4f} | {mb / ma:.3f} | {' '.join(map(str, a))} | {' '.join(map(str, b))} |")
PY
DTYPE=fp8 METRICS=sm__cycles_elapsed.avg.per_second MODELS="qwen3-30b-a3b deepseek-v3" TOKENS=16384 GEMMS=hopper \
    RUN_LIMIT=90 OUT=$O/prof timeout 120 bash tests/gpu/profile_on_device.sh > $O/prof_stdout.log 2>&1
mark prof $? /dev/null
timeout 60 cmake --build build-device -j 16 --target moefuse_cli > $O/cli_build.log 2>&1
for t in 64 16384; do timeout 30 build-device/moefuse run --model qwen3-30b-a3b --dtype fp8 --tokens $t --print-config >> $O/config_lines.log 2>&1; done
mark done 0 /dev/null
cd $O && tar czf /tmp/all.tgz . && mv /tmp/all.tgz .
