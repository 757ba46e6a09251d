#!/usr/bin/env bash
# Prepared in session 15 for a later session's first call (not yet run; the lab variant fp8v3 has
# never run on a GPU). From the repo root:
#   O=$OUT bash bench/results/next-session/session15_fp8v3.sh      (~5-6 min; nothing to carry)
# What: lab/gemm_fp8_v3_bn192.cu, the dense FP8 block-scaled kernel with 128 x 192 tiles (17%
# fewer bytes from L2 per MAC than the engine's 128 x 128; why in the file's header) and its
# 160- and 144-wide forms (fp8v3_160, fp8v3_144: 144 is cuBLASLt's width at 8192^3), against the
# engine (fp8engine) and fp8v1 (the engine's configuration as a lab copy), cuBLASLt in every
# process; three rounds of the lab, then ncu of fp8v3 at 8192^3 (same sections as session 15's R5).
# Prediction (before any run): correct on every lab shape (tails included) the first time is not
# assumed: the likeliest failures are the second B scale (err 0.1-1 on the tiles whose n0 % 128 != 0
# only) and the m64n192 descriptor (err ~1.4 everywhere). Once correct: 8192^3 0.74-0.85x cuBLASLt
# (engine 0.665-0.671x in session 15), deepseek x16 shapes +8-15% over fp8engine, the per-expert
# shapes (128-224 tiles of 128 x 128, fewer of 128 x 192: a partial wave) within -10..+5%;
# fp8v3_160 and fp8v3_144 between the engine and fp8v3 at 8192^3 (fewer bytes per MAC saved, and
# more promotion branches); ncu: fp8v3's tensor pipe 58-68% active (engine ~50%).
set -u
O=${O:-$PWD/probe-out}; mkdir -p $O
t0=$SECONDS
mark() { echo "$1: rc=$2 at $((SECONDS - t0)) s" >> $O/call.log; }
for i in 1 2 3; do
  VARIANTS="fp8v1 fp8v3 fp8v3_160 fp8v3_144 fp8engine" LAB_LIMIT=60 LAB=fp8 OUT=$O/lab_$i timeout 170 bash lab/run_on_device.sh > $O/lab_$i.log 2>&1
  mark "lab round $i" $?
done
G=/tmp/moefuse-fp8lab-build/gemm_fp8_lab
S="--section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats --section LaunchStats --metrics sm__cycles_elapsed.avg.per_second,smsp__inst_executed.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum"
timeout 40 ncu --clock-control none $S -k regex:fp8v3_kernel -c 1 $G --variants fp8v3 --filter square-8192 > $O/ncu_fp8v3.txt 2>&1
mark ncu_fp8v3 $?
python3 - $O > $O/fp8v3_summary.md 2>&1 <<'PY'
import glob, json, statistics, sys
t = {}
for f in glob.glob(sys.argv[1] + "/lab_*/lab_fp8.json"):
    for r in json.load(open(f)).get("rows", []):
        if r.get("pass"):
            t.setdefault((r["shape"], r["impl"]), []).append(r["vs_cublaslt"])
print("| shape | impl | vs cuBLASLt (median of rounds) | rounds |\n|---|---|---|---|")
for k in sorted(t):
    print(f"| {k[0]} | {k[1]} | {statistics.median(t[k]):.3f} | {len(t[k])} |")
PY
mark done 0
