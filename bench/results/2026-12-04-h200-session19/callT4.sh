#!/usr/bin/env bash
# Session 19, call T4. From the repo root, carry .deps:
#   O=$OUT timeout 400 bash bench/results/2026-12-04-h200-session19/callT4.sh; then tar $OUT.
# EPI_BULK_ROUNDS (compile-checked only, 0 spills): the bulk-copy epilogue in three rounds of a third
# of a row (128 bytes) through the staging buffer, so the 192-wide tiles keep their 5 stages; each
# round waits until the previous round's copies have read the buffer. EPI_BULK (whole rows, 4
# stages) was refactored into the same code (bulk_rounds; its SASS changed, so it is tested again).
# MOEFUSE_HOPPER_FP8_EPI: staged | bulk (whole rows everywhere) | rounds (everywhere) | mixed (whole
# rows where K <= 2048, rounds elsewhere); default: whole rows where K <= 2048, staged elsewhere.
# 1. --quick --filter fp8 with the default, rounds and mixed; memcheck (default, rounds), racecheck
#    (rounds, the fp8-woi-shared-fused-row128 cases); --perf 4096 --gemm hopper --filter fp8 (default).
# 2. Grouped FP8 lab: staged, whole rows, rounds per GEMM on PERF.md's shapes at T=16384 and the check shapes.
# 3. FP8 forward staged / default / rounds / mixed, 3 alternated rounds, 8 shapes, T = 4096, 16384.
# Prediction (before the run): (1) all pass, 0 errors, 0 hazards. (2) rounds/staged: gpt-oss GEMM1
# and GEMM2 0.97-1.00, deepseek 0.97-1.00, mixtral ~1.00; qwen3 GEMM2 0.90-0.95 (whole rows 0.88).
# (3) mixed/staged: qwen3 0.94-0.95 (as the default), gpt-oss 0.97-1.00, deepseek 0.97-1.00,
# mixtral 0.97-1.00; rounds/staged on the qwen3 family 0.95-0.98 (worse than whole rows).
set -u
R=$PWD; O=${O:-$OUT}; F=$O/fwd; mkdir -p $F
export LD_LIBRARY_PATH=$R/.deps/cjson/lib
t0=$SECONDS
mark() { echo "$1: rc=$2 at $((SECONDS - t0)) s; $(tail -n 1 $3 2>/dev/null)" >> $O/call.log; }
STAGES=build OUT=$O/build timeout 150 bash tests/gpu/run_on_device.sh > $O/build_stdout.log 2>&1; mark build $? $O/build_stdout.log
T=build-device/test_gpu_forward; B=build-device/bench_gpu_forward
timeout 30 $T --quick --filter fp8 > $O/quick_fp8.log 2>&1; mark "quick fp8 default" $? $O/quick_fp8.log
timeout 30 compute-sanitizer --tool memcheck $T --quick --filter fp8 > $O/memcheck_fp8.log 2>&1; mark "memcheck fp8 default" $? $O/memcheck_fp8.log
export MOEFUSE_HOPPER_FP8_EPI=rounds
timeout 30 $T --quick --filter fp8 > $O/quick_fp8_rounds.log 2>&1; mark "quick fp8 rounds" $? $O/quick_fp8_rounds.log
timeout 30 compute-sanitizer --tool memcheck $T --quick --filter fp8 > $O/memcheck_fp8_rounds.log 2>&1; mark "memcheck fp8 rounds" $? $O/memcheck_fp8_rounds.log
timeout 40 compute-sanitizer --tool racecheck $T --quick --filter fp8-woi-shared-fused-row128 > $O/racecheck_rounds.log 2>&1; mark "racecheck rounds" $? $O/racecheck_rounds.log
MOEFUSE_HOPPER_FP8_EPI=mixed timeout 30 $T --quick --filter fp8 > $O/quick_fp8_mixed.log 2>&1; mark "quick fp8 mixed" $? $O/quick_fp8_mixed.log
unset MOEFUSE_HOPPER_FP8_EPI
OUT=$O/glab LAB=fp8 SUITE=0 LAB_LIMIT=90 \
  VARIANTS=fp8_up_192,fp8_up_192_bulk,fp8_up_192_rounds,fp8_down_192_b16,fp8_down_192_bulk,fp8_down_192_rounds \
  timeout 130 bash lab/run_grouped_on_device.sh > $O/glab_stdout.log 2>&1; mark "grouped fp8 lab" $? $O/glab_stdout.log
S=qwen3-30b-a3b,gpt-oss-120b,mixtral-8x7b,deepseek-v3,qwen3-235b-a22b,glm-4.5-air,qwen3-next-80b-a3b,gpt-oss-20b
for i in 1 2 3; do
  for e in staged default rounds mixed; do
    MOEFUSE_HOPPER_FP8_EPI=$e timeout 40 $B --shapes $S --tokens 4096,16384 --gemm hopper --dtype fp8 > $F/fp8_${e}_$i.log 2>&1
    mark "fp8 $e $i" $? /dev/null
  done
done
python3 - $F > $F/rounds.md 2>&1 <<'PY'
import glob, re, statistics, sys
t = {}
arms = ("staged", "default", "rounds", "mixed")
for f in sorted(glob.glob(sys.argv[1] + "/fp8_*_[0-9].log")):
    q = re.match(r".*/fp8_([a-z]+)_\d\.log", f).group(1)
    for line in open(f):
        p = line.split()
        if len(p) >= 4 and p[1].isdigit() and p[2] == "hopper":
            t.setdefault((p[0], int(p[1])), {}).setdefault(q, []).append(float(p[3]))
print("| shape | T | " + " | ".join(a + " ms" for a in arms) + " | " + " | ".join(a + " / staged" for a in arms[1:]) + " | runs |")
print("|---" * (2 + 2 * len(arms)) + "|")
for k in sorted(t):
    if not all(t[k].get(a) for a in arms):
        continue
    m = [statistics.median(t[k][a]) for a in arms]
    print(f"| {k[0]} | {k[1]} | " + " | ".join(f"{x:.4f}" for x in m) + " | " + " | ".join(f"{x / m[0]:.3f}" for x in m[1:])
          + " | " + "; ".join(a + " " + " ".join(map(str, t[k][a])) for a in arms) + " |")
PY
timeout 80 $T --perf 4096 --gemm hopper --filter fp8 > $O/perf4096_fp8.log 2>&1; mark "perf4096 fp8 default" $? $O/perf4096_fp8.log
mark done 0 /dev/null
