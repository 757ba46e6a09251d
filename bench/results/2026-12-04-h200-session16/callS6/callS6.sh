#!/usr/bin/env bash
# Device call S6 (session 16): the expert raster (grouped_kernel.cuh's unit_tile; units taken
# expert by expert instead of in the grouped raster over all row blocks, whose n tiles sharing a
# block's A rows were group_m = 16 tickets apart). Why: S5's ncu put deepseek-v3's bf16 GEMM1 at
# T=16384 at 32.7 GB of DRAM reads for 15 GB of weights + 1.9 GB of A (FP8: 23.4 GB for 7.5 + 0.9),
# at 1.43 GHz (power limit) with the tensor pipe 91% busy at that clock.
# 1. correctness: test_gpu_forward --quick (both paths), then --perf 4096 --gemm hopper (PERF.md's
#    shapes, bf16 and FP8, many blocks per expert).
# 2. A/B: bench_gpu_forward --gemm hopper, MOEFUSE_HOPPER_RASTER=blocks (old) vs the default
#    (expert), alternated, 2 rounds: bf16 T=4096,16384 and FP8 T=16384 on PERF.md's four shapes.
# 3. ncu DRAM bytes / clock / tensor pipe of deepseek-v3 T=16384 bf16 and FP8 with the new raster.
# Prediction (before the run): all tests pass; deepseek bf16 GEMM1 DRAM reads 32.7 -> 17-21 GB,
# GEMM2 10.4 -> 8-9.5, FP8 GEMM1 23.4 -> 9-13 GB; forward time expert/blocks: deepseek T=16384
# bf16 0.90-0.96, FP8 0.85-0.95; gpt-oss (4 blocks an expert) 0.93-0.99; qwen3 and mixtral
# (8 and 32 blocks an expert) 0.97-1.03; T=4096 (1 block an expert on deepseek / gpt-oss) 0.97-1.02.
# Carry .deps.
set -u
R=$PWD; O=$OUT; F=$O/fwd; mkdir -p $F
export LD_LIBRARY_PATH=$R/.deps/cjson/lib
t0=$SECONDS
mark() { echo "$1: rc=$2 at $((SECONDS - t0)) s; $(tail -n 1 $3 2>/dev/null)" >> $O/call.log; }
STAGES=build OUT=$O/build timeout 150 bash tests/gpu/run_on_device.sh > $O/build_stdout.log 2>&1; mark build $? $O/build_stdout.log
T=build-device/test_gpu_forward; B=build-device/bench_gpu_forward
timeout 60 $T --quick > $F/test_quick.log 2>&1; mark test_quick $? $F/test_quick.log
timeout 100 $T --perf 4096 --gemm hopper > $F/test_perf4096.log 2>&1; mark test_perf4096 $? $F/test_perf4096.log
S=qwen3-30b-a3b,gpt-oss-120b,mixtral-8x7b,deepseek-v3
for i in 1 2; do
  for r in blocks expert; do
    MOEFUSE_HOPPER_RASTER=$r timeout 90 $B --shapes $S --tokens 4096,16384 --gemm hopper > $F/bf16_${r}_$i.log 2>&1; mark "bf16 $r $i" $? /dev/null
    MOEFUSE_HOPPER_RASTER=$r timeout 90 $B --shapes $S --tokens 16384 --gemm hopper --dtype fp8 > $F/fp8_${r}_$i.log 2>&1; mark "fp8 $r $i" $? /dev/null
  done
done
python3 - $F > $F/expert_vs_blocks.md 2>&1 <<'PY'
import glob, re, statistics, sys
t = {}
for f in sorted(glob.glob(sys.argv[1] + "/*_[0-9].log")):
    dt, r = re.match(r".*/(bf16|fp8)_(blocks|expert)_\d\.log", f).groups()
    for line in open(f):
        p = line.split()
        if len(p) >= 4 and p[1].isdigit() and p[2] == "hopper":
            t.setdefault((dt, p[0], int(p[1])), {}).setdefault(r, []).append(float(p[3]))
print("| dtype | shape | T | blocks ms | expert ms | expert / blocks | runs |\n|---|---|---|---|---|---|---|")
for k in sorted(t):
    a, b = t[k].get("blocks", []), t[k].get("expert", [])
    if a and b:
        print(f"| {k[0]} | {k[1]} | {k[2]} | {statistics.median(a):.4f} | {statistics.median(b):.4f} | "
              f"{statistics.median(b)/statistics.median(a):.3f} | {len(a)}/{len(b)} |")
PY
M="dram__bytes_read.sum,dram__bytes_write.sum,sm__cycles_elapsed.avg.per_second,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed"
for dt in bf16 fp8; do
  D=""; [ $dt = fp8 ] && D=fp8
  DTYPE=$D METRICS=$M MODELS=deepseek-v3 TOKENS=16384 GEMMS=hopper RUN_LIMIT=90 OUT=$O/prof_$dt \
      timeout 120 bash tests/gpu/profile_on_device.sh > $O/prof_${dt}_stdout.log 2>&1; mark "prof $dt" $? /dev/null
done
mark done 0 /dev/null
cd $O && tar czf callS6.tgz fwd prof_bf16 prof_fp8 build/build.log call.log 2>/dev/null; rm -rf fwd prof_bf16 prof_fp8 build
