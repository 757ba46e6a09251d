#!/usr/bin/env bash
# Issue 4's must-show gates from one run on the GPU machine (the lent H200), ~5 minutes:
#
#   OUT=/some/dir bash bench/issue4_gates.sh       (carry .deps when the machine lacks cJSON)
#
# 1. bench_moe bf16 on PERF.md's four shapes and the four untuned ones at T = 4096 and 16384:
#    the default path (MOEFUSE_GEMM=auto), the v1 forward, torch._grouped_mm, dense-equivalent
#    cuBLAS, in one process (bench/run_on_device.sh, PERF.md's protocol).
# 2. bench_moe FP8 on the same shapes at T = 16384 (moefuse, torch._scaled_grouped_mm, dense).
# 3. The dense labs at 8192^3 and their other shapes: the library's bf16 dense engine against
#    cuBLAS, its FP8 engine, block-scaled and per tensor, against cuBLASLt (lab/run_on_device.sh, LAB=fp8;
#    both FP8 modes in one process, so that every ratio is of impls timed together, interleaved).
# 4. tools/issue4_gates.py: every gate, its measured value and threshold -> $OUT/gates.json,
#    $OUT/gates.md.
set -u
cd "$(dirname "$0")/.." || exit 1
OUT=${OUT:-$PWD/gates-out}
mkdir -p "$OUT"
SHAPES=qwen3-30b-a3b,gpt-oss-120b,mixtral-8x7b,deepseek-v3,qwen3-235b-a22b,glm-4.5-air,qwen3-next-80b-a3b,gpt-oss-20b
t0=$SECONDS
mark() { echo "$1: rc=$2 at $((SECONDS - t0)) s" | tee -a "$OUT/gates.log"; }
TOTAL_S=${BF16_S:-200} OUT=$OUT/bf16 bash bench/run_on_device.sh --shapes $SHAPES --tokens 4096,16384 \
    --impls moefuse,torch_grouped_mm,dense_equiv_cublas --moefuse-gemm v1,auto --target-s 0.1 \
    --out "$OUT/bf16/bench-bf16.json" >"$OUT/bf16_run.log" 2>&1
mark bench_bf16 $?
TOTAL_S=${FP8_S:-150} OUT=$OUT/fp8 bash bench/run_on_device.sh --dtype fp8 --shapes $SHAPES --tokens 16384 \
    --moefuse-gemm auto --target-s 0.1 --out "$OUT/fp8/bench-fp8.json" >"$OUT/fp8_run.log" 2>&1
mark bench_fp8 $?
VARIANTS=engine LAB_LIMIT=60 OUT=$OUT/lab_bf16 timeout 120 bash lab/run_on_device.sh >"$OUT/lab_bf16_run.log" 2>&1
mark lab_bf16 $?
VARIANTS=fp8engine,fp8engine_pt LAB_LIMIT=90 LAB=fp8 OUT=$OUT/lab_fp8 timeout 120 bash lab/run_on_device.sh >"$OUT/lab_fp8_run.log" 2>&1
mark lab_fp8 $?
python3 tools/issue4_gates.py "$OUT/bf16/bench-bf16.json" "$OUT/fp8/bench-fp8.json" "$OUT/lab_bf16/lab.json" \
    "$OUT/lab_fp8/lab_fp8.json" --out "$OUT/gates.json" --md "$OUT/gates.md" >"$OUT/gates_stdout.log" 2>&1
mark gates $?
