#!/usr/bin/env bash
# Session 30, call 1. From the repo root, carry .deps:
#   O=/tmp/o1 timeout 570 bash bench/results/2026-12-05-session30/call1_fp8_tensor.sh
# 1. The FP8 lab built with the per-tensor variants (lab/gemm_fp8_v9_tensor.cu; the engine's
#    tensor_scales mode), checked once on every shape (fp64 references, output poisoned first)
#    beside session 29's prepared ring checks (fp8v1, fp8v2, fp8v3, the engine: the dense kernel's
#    scale-ring configurations after the fp8_scales change, session29_dense_fp8_ring.sh's step 1).
# 2. racecheck, one launch each on square-4096 (32 k-blocks: every ring wraps): the ring variants
#    (session29_dense_fp8_ring.sh's step 2) and the per-tensor ones.
# 3. Timing at 8192^3 in alternated orders (2 rounds each way), and deepseek-v3's x16-expert
#    shapes (one round each way): per-tensor cuBLASLt (the "cublaslt" row), the block-scaled engine,
#    the per-tensor engine and its forced configurations.
# Prediction (before the run): every check passes; racecheck 0 hazards. The per-tensor engine
# 1.04-1.09x the block-scaled engine's speed at 8192^3 (what cuBLASLt gains from per-tensor
# operands, 1/0.91-1/0.93, is the scale path's share in a kernel like ours); so 0.91-0.95x
# per-tensor cuBLASLt, the gate (0.95) at the top of the range. fp8pt_128_s7_c2 within 2% of
# fp8pt_128_c2.
set -u
. tools/device_call.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > $O/gpu.txt 2>&1
OUT=$O/lab VARIANTS=fp8engine_pt QUICK=1 LAB_LIMIT=60 timeout 200 bash lab/run_fp8_on_device.sh \
  > $O/lab_stdout.log 2>&1; mark "fp8 lab build + fp8engine_pt --quick" $? $O/lab_stdout.log
L=/tmp/moefuse-fp8lab-build/gemm_fp8_lab
ALL=fp8v1,fp8v2,fp8v3,fp8engine,fp8engine_pt,fp8pt,fp8pt_128,fp8pt_c2,fp8pt_128_c2,fp8pt_128_s7_c2
timeout 120 $L --variants $ALL --check-only > $O/checks.log 2>&1; mark "checks, every shape" $? $O/checks.log
timeout 80 compute-sanitizer --tool racecheck --error-exitcode 3 $L --variants fp8v1,fp8v2,fp8v3 --filter square-4096 \
  --sanitize > $O/racecheck_ring.log 2>&1; mark "racecheck fp8v1-3 square-4096" $? $O/racecheck_ring.log
timeout 80 compute-sanitizer --tool racecheck --error-exitcode 3 $L --variants fp8pt,fp8pt_c2,fp8pt_128_c2,fp8pt_128_s7_c2 \
  --filter square-4096 --sanitize > $O/racecheck_pt.log 2>&1; mark "racecheck per-tensor square-4096" $? $O/racecheck_pt.log
A=fp8engine,fp8engine_pt,fp8pt_c2,fp8pt_128_c2,fp8pt_128_s7_c2,fp8pt
B=fp8pt,fp8pt_128_s7_c2,fp8pt_128_c2,fp8pt_c2,fp8engine_pt,fp8engine
mkdir -p $O/rounds
for r in 1 2; do
  for ord in A B; do
    eval v=\$$ord
    timeout 60 $L --variants $v --filter square-8192 --json $O/rounds/rows.jsonl > $O/rounds/sq8192_r${r}_$ord.log 2>&1
    mark "8192^3 round $r order $ord" $? $O/rounds/sq8192_r${r}_$ord.log
  done
done
for ord in A B; do
  eval v=\$$ord
  timeout 70 $L --variants $v --filter x16 --json $O/rounds/rows.jsonl > $O/rounds/x16_$ord.log 2>&1
  mark "x16 order $ord" $? $O/rounds/x16_$ord.log
done
mark done 0 /dev/null
