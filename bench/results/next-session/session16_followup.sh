#!/usr/bin/env bash
# Prepared in session 16 for a later session's first call (not yet run). From the repo root, carry
# .deps:   O=$OUT bash bench/results/next-session/session16_followup.sh      (~5 min)
# 1. The vector FP8 quantiser (src/cuda/quant.cu quant_row128_vec_kernel, opt-in
#    MOEFUSE_FP8_QUANT=vec; compile-checked only): the suite --quick with it (the quantiser cases
#    compare codes bit for bit with the CPU's), then an A/B of the FP8 forward (bench_gpu_forward
#    --dtype fp8 --gemm hopper, vec vs scalar, alternated, 2 rounds) and ncu of qwen3 T=16384 with it.
# 2. The bf16 expert raster inside bench_moe (MOEFUSE_HOPPER_RASTER=blocks vs the default,
#    alternated, 2 rounds, moefuse only): S6's bench_gpu_forward A/B gave deepseek T=4096 0.866,
#    S7's bench_moe run showed no such gain against S3 (other run, other machine).
# 3. The dense FP8 engine through the library entry (fp8engine now takes 128 x 192 tiles at >= 4
#    waves; S1 ran that kernel as fp8v3) against fp8v1 (the 128-wide configuration), one lab round,
#    with the probes noscale128 / noscale192 (the same kernels without their scale path: every
#    scale 1, timed, never correct): what the scale ring still costs (docs/hopper_gemm.md, "What the
#    published FP8 block-scaled kernels do differently": their scales ride in the A/B transaction).
# 4. Why the two harnesses disagree on deepseek-v3 T=4096 bf16 (hopper): bench_gpu_forward 8.98 ms
#    (R2, old raster) / 7.76 (S6, expert raster), bench_moe's moefuse 9.84 (S3) / 9.35 (S7), while
#    their v1 rows agree (16.2-16.3): the kernels of one forward under ncu in each (clocks as found).
# Also the FP8 GEMMs on tickets (MOEFUSE_HOPPER_SCHEDULE=dyn, never timed in the forward), alone and
# with the expert raster: --quick --filter fp8 with both, then in the same A/B as the quantiser.
# Prediction (before the run): (1) --quick all pass with vec; FP8 forward vec/scalar qwen3 T=16384
# 0.93-0.97, T=4096 0.95-0.99, T=512 0.97-1.00, deepseek 0.97-0.99; ncu qwen3 A2 quantiser
# 254 -> 140-180 us, x 81 -> 45-65 us. (2) expert/blocks deepseek T=4096 0.88-0.97, gpt-oss T=4096
# 0.90-0.96, T=16384 0.95-1.00. (3) fp8engine 8192^3 0.74-0.80x cuBLASLt, 4096^3 0.57-0.60x, the
# one-expert and tails shapes within 3% of fp8v1 (they keep 128-wide tiles); probes: noscale128 /
# fp8v1 time 0.80-0.92 and noscale192 / fp8engine 0.82-0.93 at 8192^3 (session 4's ablation with
# the scales in the stage: 0.75 at 4096^3). FP8 dyn/base 0.97-1.03
# at T=16384 (session 4 found the FP8 row tables filled ahead no faster), dynx/base 0.95-1.02 on
# deepseek T=16384, --quick fp8 all pass. (4) the same kernels
# in both harnesses; bench_moe's GEMM1 (the gathering kernel) 10-20% slower (its x comes from torch
# as bf16, bench_gpu_forward's as f32 converted by the forward into the workspace).
set -u
R=$PWD; O=${O:-$PWD/probe-out}; F=$O/fwd; mkdir -p $F
export LD_LIBRARY_PATH=$R/.deps/cjson/lib
t0=$SECONDS
mark() { echo "$1: rc=$2 at $((SECONDS - t0)) s; $(tail -n 1 $3 2>/dev/null)" >> $O/call.log; }
STAGES=build OUT=$O/build timeout 150 bash tests/gpu/run_on_device.sh > $O/build_stdout.log 2>&1; mark build $? $O/build_stdout.log
T=build-device/test_gpu_forward; B=build-device/bench_gpu_forward
MOEFUSE_FP8_QUANT=vec timeout 60 $T --quick > $F/test_quick_vec.log 2>&1; mark "test_quick vec" $? $F/test_quick_vec.log
S=qwen3-30b-a3b,gpt-oss-120b,mixtral-8x7b,deepseek-v3
MOEFUSE_HOPPER_SCHEDULE=dyn MOEFUSE_HOPPER_RASTER=expert timeout 60 $T --quick --filter fp8 > $F/test_quick_fp8_dyn.log 2>&1
mark "test_quick fp8 dyn+expert" $? $F/test_quick_fp8_dyn.log
# FP8 forward variants: base (scalar quantiser, static stride, blocks raster), vec (the vector
# quantiser), dyn (tickets, MOEFUSE_HOPPER_SCHEDULE=dyn: an opt-in never timed in the forward),
# dynx (tickets and the expert raster).
variant_env() { case $1 in base) echo "MOEFUSE_FP8_QUANT=scalar";; vec) echo "MOEFUSE_FP8_QUANT=vec";;
  dyn) echo "MOEFUSE_HOPPER_SCHEDULE=dyn";; dynx) echo "MOEFUSE_HOPPER_SCHEDULE=dyn MOEFUSE_HOPPER_RASTER=expert";; esac; }
for i in 1 2; do
  for q in base vec dyn dynx; do
    env $(variant_env $q) timeout 90 $B --shapes $S --tokens 512,4096,16384 --gemm hopper --dtype fp8 > $F/fp8_${q}_$i.log 2>&1
    mark "fp8 $q $i" $? /dev/null
  done
done
python3 - $F > $F/fp8_variants.md 2>&1 <<'PY'
import glob, re, statistics, sys
t = {}
for f in sorted(glob.glob(sys.argv[1] + "/fp8_*_[0-9].log")):
    q = re.match(r".*/fp8_(base|vec|dyn|dynx)_\d\.log", f).group(1)
    for line in open(f):
        p = line.split()
        if len(p) >= 4 and p[1].isdigit() and p[2] == "hopper":
            t.setdefault((p[0], int(p[1])), {}).setdefault(q, []).append(float(p[3]))
print("| shape | T | base ms | vec / base | dyn / base | dynx / base | runs |\n|---|---|---|---|---|---|---|")
for k in sorted(t):
    b = t[k].get("base", [])
    if not b:
        continue
    m = statistics.median(b)
    r = [f"{statistics.median(t[k][q]) / m:.3f}" if t[k].get(q) else "-" for q in ("vec", "dyn", "dynx")]
    print(f"| {k[0]} | {k[1]} | {m:.4f} | {' | '.join(r)} | {len(b)} |")
PY
MOEFUSE_FP8_QUANT=vec DTYPE=fp8 METRICS=dram__bytes_read.sum,dram__bytes_write.sum MODELS=qwen3-30b-a3b TOKENS=16384 \
    GEMMS=hopper RUN_LIMIT=60 OUT=$O/prof_vec timeout 90 bash tests/gpu/profile_on_device.sh > $O/prof_vec_stdout.log 2>&1
mark "prof vec" $? /dev/null
for i in 1 2; do
  for r in blocks expert; do
    MOEFUSE_HOPPER_RASTER=$r TOTAL_S=70 OUT=$O/moe_${r}_$i timeout 80 bash bench/run_on_device.sh \
        --shapes deepseek-v3,gpt-oss-120b --tokens 4096,16384 --impls moefuse --target-s 0.1 \
        --out $O/moe_${r}_$i/bench.json > $O/moe_${r}_$i.log 2>&1
    mark "bench_moe $r $i" $? /dev/null
  done
done
VARIANTS="fp8v1 fp8engine noscale128 noscale192" LAB_LIMIT=60 LAB=fp8 OUT=$O/lab_fp8 timeout 120 bash lab/run_on_device.sh > $O/lab_fp8.log 2>&1
mark lab_fp8 $? $O/lab_fp8.log
python3 - $O/lab_fp8 > $O/lab_fp8/summary.md 2>&1 <<'PY'
import glob, json, sys
rows = [r for f in glob.glob(sys.argv[1] + "/lab_fp8.json") for r in json.load(open(f)).get("rows", [])]
print("| shape | impl | ms | vs cuBLASLt | pass | probe |\n|---|---|---|---|---|---|")
for r in sorted(rows, key=lambda r: (r["shape"], r["impl"])):
    print(f"| {r['shape']} | {r['impl']} | {r['ms']:.4f} | {r['vs_cublaslt']:.3f} | {r['pass']} | {r.get('probe', False)} |")
PY
DTYPE= METRICS=dram__bytes_read.sum,sm__cycles_elapsed.avg.per_second MODELS=deepseek-v3 TOKENS=4096 GEMMS=hopper \
    RUN_LIMIT=60 OUT=$O/prof_gpu_forward timeout 90 bash tests/gpu/profile_on_device.sh > $O/prof_gpu_forward_stdout.log 2>&1
mark "prof bench_gpu_forward deepseek 4096" $? /dev/null
MOEFUSE_LIB=$R/build-device/libmoefuse.so PYTHONPATH=$R/python timeout 150 ncu --clock-control none --target-processes all \
    --metrics gpu__time_duration.sum,dram__bytes_read.sum --csv -k regex:'grouped|permute|combine|plan|convert|gather' \
    --launch-count 30 python3 bench/bench_moe.py --shapes deepseek-v3 --tokens 4096 --impls moefuse --target-s 0.02 \
    --min-reps 20 --out $O/prof_bench_moe.json > $O/prof_bench_moe.csv 2> $O/prof_bench_moe.err
mark "prof bench_moe deepseek 4096" $? /dev/null
mark done 0 /dev/null
