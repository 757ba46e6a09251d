#!/usr/bin/env bash
# Session 18, call S3: x quantised straight into plan order by the 1x128 quantiser's scatter form
# (the permute folded into it: plan_row_of from the plan kernel; default on the Hopper FP8 path,
# MOEFUSE_HOPPER_FP8_X=permute keeps the separate permute). Compile-checked only before this run.
# 1. Correctness: the full GPU suite (the plan cases check row_of against sorted_ids), --quick
#    --filter fp8 with the permute forced, memcheck on --quick.
# 2. FP8 forward A/B, 3 alternated rounds, PERF.md's four shapes and the four untuned ones at
#    T = 64, 512, 4096, 16384 (bench_gpu_forward --dtype fp8 --gemm hopper): permute vs scatter.
# 3. ncu of qwen3-30b-a3b and deepseek-v3 T=16384 FP8 (kernel times).
# Prediction (before the run): (1) all pass, 0 memcheck errors. (2) scatter/permute at T=16384:
# qwen3 0.94-0.97 (x 64 us + permute 159 us -> one pass of 90-130 us, of ~2.2 ms), deepseek
# 0.96-0.99 (216 + 643 -> 350-450 us of ~16 ms), the others 0.95-0.99; T=4096 similar; T=512
# 0.97-1.00; T=64 (the swapped decode kernel) 0.97-1.01 (one launch fewer). (3) no permute kernel;
# the x quantiser 90-130 us on qwen3, 350-450 us on deepseek.
set -u
R=$PWD; O=$OUT; F=$O/fwd; mkdir -p $F
export LD_LIBRARY_PATH=$R/.deps/cjson/lib
t0=$SECONDS
mark() { echo "$1: rc=$2 at $((SECONDS - t0)) s; $(tail -n 1 $3 2>/dev/null)" >> $O/call.log; }
STAGES=build OUT=$O/build timeout 150 bash tests/gpu/run_on_device.sh > $O/build_stdout.log 2>&1; mark build $? $O/build_stdout.log
T=build-device/test_gpu_forward; B=build-device/bench_gpu_forward
timeout 330 $T > $F/test_full.log 2>&1; mark test_full $? $F/test_full.log
MOEFUSE_HOPPER_FP8_X=permute timeout 60 $T --quick --filter fp8 > $F/test_quick_fp8_permute.log 2>&1
mark "test_quick fp8 permute" $? $F/test_quick_fp8_permute.log
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
