#!/usr/bin/env bash
# Session 19, call T1. From the repo root, carry .deps:
#   O=$OUT timeout 585 bash bench/results/2026-12-04-h200-session19/callT1.sh; then tar $OUT.
# 1. session18_followup.sh's first half: the full GPU suite (with the plan cases whose ids are left
#    out, compiled only in session 18) and memcheck of --quick --filter fp8. Its second half (the
#    gates) waits for a call with whatever this one lands.
# 2. The bulk-copy epilogue (EPI_BULK, compile-checked only: 0 spills): the 128 x 192 FP8 tiles
#    write each consumer warp's 16 finished rows into shared memory and hand each row to the TMA
#    unit as one bulk copy, then go on to the next tile (4 stages instead of 5 to make room).
#    MOEFUSE_HOPPER_FP8_EPI=bulk opts the library in: --quick --filter fp8, --perf 4096 --gemm
#    hopper --filter fp8, memcheck of --quick --filter fp8 and racecheck of its fp8-woi-shared-fused-row128 cases with it.
# 3. Grouped FP8 lab (PERF.md's shapes at T=16384 and the small check shapes): no-store, staged
#    (shipped) and bulk per GEMM, GEMM2 on bf16 rows as the forward writes them for bf16 y.
# 4. FP8 forward staged vs bulk, 3 alternated rounds, 8 shapes, T = 4096 and 16384; the config line.
# Prediction (before the run): (1) 654 passed (645 + the 9 left-out plan cases), memcheck 0 errors.
# (2) all pass, 0 errors, 0 hazards. (3) all checks pass; GEMM2 bulk/staged qwen3 0.80-0.90,
# gpt-oss 0.88-0.95, deepseek 0.90-0.96, mixtral 0.95-1.00 (K 14336: the epilogue is a small share);
# GEMM1 bulk/staged 0.90-0.97 (qwen3 lowest), mixtral 0.95-1.00; 4 stages instead of 5 may cost
# the mainloop a few % (no-store is not re-measured at 4 stages). (4) forward bulk/staged at
# T=16384: qwen3 0.90-0.95, gpt-oss 0.92-0.97, deepseek and mixtral 0.95-0.99; T=4096 similar.
set -u
R=$PWD; O=${O:-$OUT}; F=$O/fwd; mkdir -p $F
export LD_LIBRARY_PATH=$R/.deps/cjson/lib
t0=$SECONDS
mark() { echo "$1: rc=$2 at $((SECONDS - t0)) s; $(tail -n 1 $3 2>/dev/null)" >> $O/call.log; }
STAGES=build OUT=$O/build timeout 150 bash tests/gpu/run_on_device.sh > $O/build_stdout.log 2>&1; mark build $? $O/build_stdout.log
T=build-device/test_gpu_forward; B=build-device/bench_gpu_forward
export MOEFUSE_HOPPER_FP8_EPI=bulk
timeout 30 $T --quick --filter fp8 > $O/test_quick_fp8_bulk.log 2>&1; mark "test_quick fp8 bulk" $? $O/test_quick_fp8_bulk.log
OUT=$O/glab LAB=fp8 SUITE=0 LAB_LIMIT=120 \
  VARIANTS=fp8_up_none,fp8_up_192,fp8_up_192_bulk,fp8_down_none,fp8_down_192_b16,fp8_down_192_bulk \
  timeout 170 bash lab/run_grouped_on_device.sh > $O/glab_stdout.log 2>&1; mark "grouped fp8 lab" $? $O/glab_stdout.log
timeout 100 $T --perf 4096 --gemm hopper --filter fp8 > $O/test_perf4096_fp8_bulk.log 2>&1; mark "test_perf4096 fp8 bulk" $? $O/test_perf4096_fp8_bulk.log
timeout 30 compute-sanitizer --tool memcheck $T --quick --filter fp8 > $O/memcheck_fp8_bulk.log 2>&1; mark "memcheck fp8 bulk" $? $O/memcheck_fp8_bulk.log
timeout 60 compute-sanitizer --tool racecheck $T --quick --filter fp8-woi-shared-fused-row128 > $O/racecheck_fp8_bulk.log 2>&1; mark "racecheck fp8 bulk" $? $O/racecheck_fp8_bulk.log
unset MOEFUSE_HOPPER_FP8_EPI
S=qwen3-30b-a3b,gpt-oss-120b,mixtral-8x7b,deepseek-v3,qwen3-235b-a22b,glm-4.5-air,qwen3-next-80b-a3b,gpt-oss-20b
for i in 1 2 3; do
  timeout 60 $B --shapes $S --tokens 4096,16384 --gemm hopper --dtype fp8 > $F/fp8_staged_$i.log 2>&1; mark "fp8 staged $i" $? /dev/null
  MOEFUSE_HOPPER_FP8_EPI=bulk timeout 60 $B --shapes $S --tokens 4096,16384 --gemm hopper --dtype fp8 > $F/fp8_bulk_$i.log 2>&1
  mark "fp8 bulk $i" $? /dev/null
done
python3 - $F > $F/bulk.md 2>&1 <<'PY'
import glob, re, statistics, sys
t = {}
for f in sorted(glob.glob(sys.argv[1] + "/fp8_*_[0-9].log")):
    q = re.match(r".*/fp8_(staged|bulk)_\d\.log", f).group(1)
    for line in open(f):
        p = line.split()
        if len(p) >= 4 and p[1].isdigit() and p[2] == "hopper":
            t.setdefault((p[0], int(p[1])), {}).setdefault(q, []).append(float(p[3]))
print("| shape | T | staged ms | bulk ms | bulk / staged | staged runs | bulk runs |\n|---|---|---|---|---|---|---|")
for k in sorted(t):
    a, b = t[k].get("staged", []), t[k].get("bulk", [])
    if a and b:
        ma, mb = statistics.median(a), statistics.median(b)
        print(f"| {k[0]} | {k[1]} | {ma:.4f} | {mb:.4f} | {mb / ma:.3f} | {' '.join(map(str, a))} | {' '.join(map(str, b))} |")
PY
timeout 250 $T > $O/test_full.log 2>&1; mark test_full $? $O/test_full.log
grep -c "left-out ids" $O/test_full.log >> $O/call.log
timeout 30 compute-sanitizer --tool memcheck $T --quick --filter fp8 > $O/memcheck_fp8.log 2>&1; mark memcheck_fp8 $? $O/memcheck_fp8.log
timeout 40 cmake --build build-device -j 16 --target moefuse_cli > $O/cli_build.log 2>&1
for e in staged bulk; do MOEFUSE_HOPPER_FP8_EPI=$e timeout 20 build-device/moefuse run --model qwen3-30b-a3b --dtype fp8 --tokens 16384 --print-config >> $O/config_lines.log 2>&1; done
mark done 0 /dev/null
