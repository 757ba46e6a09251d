#!/usr/bin/env bash
# Session 18, call S4: the scatter form of the x quantiser with each slot's plan row preloaded in a
# lane and broadcast by shuffles, each lane storing its slot's scale (S3's form loaded plan_row_of
# once per destination inside the store loop; its pass ran at ~1.5 TB/s: qwen3 173 us, deepseek
# 720 us). Compile-checked only before this run.
# 1. Correctness: the suite's --quick, --perf 4096 --gemm hopper --filter fp8 (PERF.md's shapes),
#    memcheck on --quick.
# 2. FP8 forward A/B as S3 (permute vs scatter, 3 rounds, 8 shapes, T = 64, 512, 4096, 16384).
# 3. ncu of qwen3-30b-a3b and deepseek-v3 T=16384 FP8 (kernel times).
# Prediction (before the run): (1) all pass, 0 errors. (3) the scatter pass qwen3 173 -> 110-140
# us, deepseek 720 -> 450-600 us. (2) scatter/permute at T=16384 qwen3 0.95-0.97 (S3: 0.980),
# deepseek 0.97-0.99 (S3: 0.997), the rest 0.96-0.99; T <= 512 0.98-1.00.
set -u
R=$PWD; O=$OUT; F=$O/fwd; mkdir -p $F
export LD_LIBRARY_PATH=$R/.deps/cjson/lib
t0=$SECONDS
mark() { echo "$1: rc=$2 at $((SECONDS - t0)) s; $(tail -n 1 $3 2>/dev/null)" >> $O/call.log; }
STAGES=build OUT=$O/build timeout 150 bash tests/gpu/run_on_device.sh > $O/build_stdout.log 2>&1; mark build $? $O/build_stdout.log
T=build-device/test_gpu_forward; B=build-device/bench_gpu_forward
timeout 60 $T --quick > $F/test_quick.log 2>&1; mark test_quick $? $F/test_quick.log
timeout 120 $T --perf 4096 --gemm hopper --filter fp8 > $F/test_perf4096_fp8.log 2>&1; mark "test_perf4096 fp8" $? $F/test_perf4096_fp8.log
timeout 60 compute-sanitizer --tool memcheck $T --quick > $F/memcheck_quick.log 2>&1; mark memcheck_quick $? $F/memcheck_quick.log
S=qwen3-30b-a3b,gpt-oss-120b,mixtral-8x7b,deepseek-v3,qwen3-235b-a22b,glm-4.5-air,qwen3-next-80b-a3b,gpt-oss-20b
for i in 1 2 3; do
  MOEFUSE_HOPPER_FP8_X=permute timeout 90 $B --shapes $S --tokens 64,512,4096,16384 --gemm hopper --dtype fp8 \
      > $F/fp8_permute_$i.log 2>&1; mark "fp8 permute $i" $? /dev/null
  timeout 90 $B --shapes $S --tokens 64,512,4096,16384 --gemm hopper --dtype fp8 > $F/fp8_scatter_$i.log 2>&1
  mark "fp8 scatter $i" $? /dev/null
done
python3 - $F > $F/scatter.md 2>&1 <<'PY'
import glob, re, statistics, sys
t = {}
for f in sorted(glob.glob(sys.argv[1] + "/fp8_*_[0-9].log")):
    q = re.match(r".*/fp8_(permute|scatter)_\d\.log", f).group(1)
    for line in open(f):
        p = line.split()
        if len(p) >= 4 and p[1].isdigit() and p[2] == "hopper":
            t.setdefault((p[0], int(p[1])), {}).setdefault(q, []).append(float(p[3]))
print("| shape | T | permute ms | scatter ms | scatter / permute | runs |\n|---|---|---|---|---|---|")
for k in sorted(t):
    a, b = t[k].get("permute", []), t[k].get("scatter", [])
    if a and b:
        ma, mb = statistics.median(a), statistics.median(b)
        print(f"| {k[0]} | {k[1]} | {ma:.4f} | {mb:.4f} | {mb / ma:.3f} | {len(a)} |")
PY
M="sm__cycles_elapsed.avg.per_second"
DTYPE=fp8 METRICS=$M MODELS="qwen3-30b-a3b deepseek-v3" TOKENS=16384 GEMMS=hopper RUN_LIMIT=90 \
    OUT=$O/prof timeout 120 bash tests/gpu/profile_on_device.sh > $O/prof_stdout.log 2>&1
mark prof $? /dev/null
mark done 0 /dev/null
cd $O && tar czf /tmp/all.tgz . && mv /tmp/all.tgz .
