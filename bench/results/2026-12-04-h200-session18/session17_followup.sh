#!/usr/bin/env bash
# Prepared in session 17, run as session 18 call S1 (callS1.sh). From the repo root, carry
# .deps:   O=$OUT bash bench/results/next-session/session17_followup.sh      (~9 min)
# The grouped FP8 kernel with its scales in the tile stage (grouped_fp8_config's STAGE_SCALES,
# opt-in MOEFUSE_HOPPER_FP8_SCALES=stage; compile-checked only): the k-block's 128 A scales by one
# bulk copy in the stage's transaction, the B scales read by the consumers from global memory, no
# scale warp or ring. The dense kernel's equivalent (FP8_SCALES_BOXES) gained 3-23% in session 17.
# Also the grouped FP8 kernel on 128 x 192 tiles (opt-in MOEFUSE_HOPPER_FP8_BN=192, on the stage
# scales only: their shared memory does not fit beside the ring; B scales of two 128-row blocks a
# tile, paired gate/up blocks for W13; compile-checked only, no spills). And x quantised straight
# into plan order (opt-in MOEFUSE_HOPPER_FP8_X=plan: one pass, each plan row its token's row,
# instead of the x quantiser and the permute; same codes and scales).
# 1. Correctness: the suite's --quick, --perf 4096 --gemm hopper --filter fp8 (PERF.md's shapes,
#    many blocks per expert), --quick --filter fp8 with MOEFUSE_FP8_A2=epilogue too (the EPI_QUANT
#    instantiation), --quick --filter fp8 and --perf 4096 --filter fp8 on 192-wide tiles,
#    --quick --filter fp8 with x into plan order, memcheck on --quick --filter fp8.
# 2. FP8 forward A/B, 3 alternated rounds, PERF.md's four shapes and the four untuned ones at
#    T = 512, 4096, 16384 (bench_gpu_forward --dtype fp8 --gemm hopper). Arms: base; stage; stage
#    with A2 quantised in GEMM1's epilogue (MOEFUSE_FP8_A2=epilogue, ~1% slower than the separate
#    pass with the ring); stage on 192-wide tiles; x into plan order (alone).
# 3. The grouped FP8 lab (lab/grouped_lab.cu --fp8: fp8_up/down_staged = shipped, _stage, _192):
#    each GEMM alone on PERF.md's shapes, checked against an fp64 reference, then timed.
# 4. ncu of qwen3-30b-a3b and deepseek-v3 T=16384 FP8 with it (kernel times, tensor pipe).
# Prediction (before the run):
# (1) All pass, memcheck 0 errors.
# (2) stage / base at T=16384: qwen3 0.92-0.97, deepseek 0.92-0.97, gpt-oss and mixtral
#     0.93-0.98; T=4096 0.94-0.99; T=512 0.97-1.01 (few k-blocks a tile: the scale path matters
#     less). Stage + A2 epilogue / stage 0.97-1.02 (the quantiser pass, 9% of qwen3's forward,
#     goes; GEMM1's units double). 192 wide / stage at T=16384 0.93-0.99 on deepseek, qwen3 and
#     mixtral, 0.97-1.03 on gpt-oss (2880 = 15 x 192 exactly, against 22.5 tiles of 128); worse
#     than stage at T=512 (fewer, longer units). x into plan / base at T=16384: qwen3 0.95-0.98
#     (x pass 63 us + permute 157 us -> one pass of 100-140 us), deepseek 0.98-1.00; T=512
#     0.97-1.01.
# (3) All checks pass; per GEMM, stage / staged 0.88-0.97, 192 / stage 0.92-1.00 (qwen3's GEMM2,
#     N = 2048 = 10.7 tiles of 192: 1.00-1.05).
# (4) The grouped GEMMs 5-12% shorter than in S1 (qwen3 GEMM1 1069 us, GEMM2 711 us), the tensor
#     pipe 3-8 points busier.
set -u
R=$PWD; O=${O:-$PWD/probe-out}; F=$O/fwd; mkdir -p $F
export LD_LIBRARY_PATH=$R/.deps/cjson/lib
t0=$SECONDS
mark() { echo "$1: rc=$2 at $((SECONDS - t0)) s; $(tail -n 1 $3 2>/dev/null)" >> $O/call.log; }
STAGES=build OUT=$O/build timeout 150 bash tests/gpu/run_on_device.sh > $O/build_stdout.log 2>&1; mark build $? $O/build_stdout.log
T=build-device/test_gpu_forward; B=build-device/bench_gpu_forward
ST=MOEFUSE_HOPPER_FP8_SCALES=stage
env $ST timeout 60 $T --quick > $F/test_quick_stage.log 2>&1; mark "test_quick stage" $? $F/test_quick_stage.log
env $ST timeout 120 $T --perf 4096 --gemm hopper --filter fp8 > $F/test_perf4096_fp8_stage.log 2>&1
mark "test_perf4096 fp8 stage" $? $F/test_perf4096_fp8_stage.log
env $ST MOEFUSE_FP8_A2=epilogue timeout 60 $T --quick --filter fp8 > $F/test_quick_fp8_stagea2.log 2>&1
mark "test_quick fp8 stage + A2 epilogue" $? $F/test_quick_fp8_stagea2.log
env $ST MOEFUSE_HOPPER_FP8_BN=192 timeout 60 $T --quick --filter fp8 > $F/test_quick_fp8_stage192.log 2>&1
mark "test_quick fp8 stage 192" $? $F/test_quick_fp8_stage192.log
env $ST MOEFUSE_HOPPER_FP8_BN=192 timeout 120 $T --perf 4096 --gemm hopper --filter fp8 > $F/test_perf4096_fp8_stage192.log 2>&1
mark "test_perf4096 fp8 stage 192" $? $F/test_perf4096_fp8_stage192.log
MOEFUSE_HOPPER_FP8_X=plan timeout 60 $T --quick --filter fp8 > $F/test_quick_fp8_xplan.log 2>&1
mark "test_quick fp8 x into plan" $? $F/test_quick_fp8_xplan.log
env $ST timeout 90 compute-sanitizer --tool memcheck $T --quick --filter fp8 > $F/memcheck_fp8_stage.log 2>&1
mark "memcheck fp8 stage" $? $F/memcheck_fp8_stage.log
S=qwen3-30b-a3b,gpt-oss-120b,mixtral-8x7b,deepseek-v3,qwen3-235b-a22b,glm-4.5-air,qwen3-next-80b-a3b,gpt-oss-20b
for i in 1 2 3; do
  timeout 90 $B --shapes $S --tokens 512,4096,16384 --gemm hopper --dtype fp8 > $F/fp8_base_$i.log 2>&1; mark "fp8 base $i" $? /dev/null
  env $ST timeout 90 $B --shapes $S --tokens 512,4096,16384 --gemm hopper --dtype fp8 > $F/fp8_stage_$i.log 2>&1
  mark "fp8 stage $i" $? /dev/null
  env $ST MOEFUSE_FP8_A2=epilogue timeout 90 $B --shapes $S --tokens 512,4096,16384 --gemm hopper --dtype fp8 \
      > $F/fp8_stagea2_$i.log 2>&1; mark "fp8 stagea2 $i" $? /dev/null
  env $ST MOEFUSE_HOPPER_FP8_BN=192 timeout 90 $B --shapes $S --tokens 512,4096,16384 --gemm hopper --dtype fp8 \
      > $F/fp8_stage192_$i.log 2>&1; mark "fp8 stage192 $i" $? /dev/null
  MOEFUSE_HOPPER_FP8_X=plan timeout 90 $B --shapes $S --tokens 512,4096,16384 --gemm hopper --dtype fp8 \
      > $F/fp8_xplan_$i.log 2>&1; mark "fp8 xplan $i" $? /dev/null
done
python3 - $F > $F/stage.md 2>&1 <<'PY'
import glob, re, statistics, sys
t = {}
for f in sorted(glob.glob(sys.argv[1] + "/fp8_*_[0-9].log")):
    q = re.match(r".*/fp8_(base|stage|stagea2|stage192|xplan)_\d\.log", f).group(1)
    for line in open(f):
        p = line.split()
        if len(p) >= 4 and p[1].isdigit() and p[2] == "hopper":
            t.setdefault((p[0], int(p[1])), {}).setdefault(q, []).append(float(p[3]))
print("| shape | T | base ms | stage / base | stage + A2 in epilogue / base | stage, 192 wide / base | "
      "x into plan / base | runs |\n|---|---|---|---|---|---|---|---|")
for k in sorted(t):
    b = t[k].get("base", [])
    if b:
        mb = statistics.median(b)
        r = [f"{statistics.median(t[k][q]) / mb:.3f}" if t[k].get(q) else "-"
             for q in ("stage", "stagea2", "stage192", "xplan")]
        print(f"| {k[0]} | {k[1]} | {mb:.4f} | {r[0]} | {r[1]} | {r[2]} | {r[3]} | {len(b)} |")
PY
# The grouped FP8 lab: each GEMM alone, checked against an fp64 reference, then timed (shipped vs
# stage vs 192 wide; PERF.md's shapes at T=16384).
LAB=fp8 SUITE=0 LAB_LIMIT=150 VARIANTS=fp8_up_staged,fp8_up_stage,fp8_up_192,fp8_down_staged,fp8_down_stage,fp8_down_192 \
    OUT=$O/glab timeout 230 bash lab/run_grouped_on_device.sh > $O/glab_stdout.log 2>&1
mark "grouped fp8 lab" $? $O/glab_stdout.log
M="sm__cycles_elapsed.avg.per_second,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed"
env $ST DTYPE=fp8 METRICS=$M MODELS="qwen3-30b-a3b deepseek-v3" TOKENS=16384 GEMMS=hopper RUN_LIMIT=90 \
    OUT=$O/prof_stage timeout 120 bash tests/gpu/profile_on_device.sh > $O/prof_stage_stdout.log 2>&1
mark "prof stage" $? /dev/null
mark done 0 /dev/null
# Everything in one archive (the device tool returns at most 8 files), call.log beside it.
cd $O && tar czf /tmp/s17_all.tgz . && mv /tmp/s17_all.tgz $O/all.tgz
