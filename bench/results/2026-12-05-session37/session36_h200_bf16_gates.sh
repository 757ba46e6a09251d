#!/usr/bin/env bash
# Written in session 36 when ~360 s of device time were left, too few for the whole gates script
# (session36_h200_gates.sh, ~7 min): issue 4's bf16 forward gates only (bench/issue4_gates.sh's first
# step, the same bench_moe command, then tools/issue4_gates.py with the FP8 and lab inputs absent: those
# gates report missing), after the tma- cases of the suite (the k = 8 + shared cases added after call 7). ~2.5 min. Needs an H200 (its gates are H200 gates). From the repo root, carry .deps:
#   O=/tmp/o9 timeout 250 bash bench/results/2026-12-05-session36/session36_h200_bf16_gates.sh; tar czf $OUT/o9.tgz -C /tmp/o9 .
# Predictions as session36_h200_gates.sh's: bf16 time / dense deepseek-v3 1.12-1.17, glm-4.5-air 1.11-1.14,
# qwen3-235b-a22b 1.10-1.13 (all misses); the other bf16 gates as session 28's within spread.
set -u
. tools/device_call.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > $O/gpu.txt 2>&1
build_device
timeout 60 $T --quick --gemm hopper --filter tma- > $O/suite_tma.log 2>&1
mark "suite --quick --filter tma- (the new tma-*-k8-shared-h2112 cases)" $? $O/suite_tma.log
SHAPES=qwen3-30b-a3b,gpt-oss-120b,mixtral-8x7b,deepseek-v3,qwen3-235b-a22b,glm-4.5-air,qwen3-next-80b-a3b,gpt-oss-20b
TOTAL_S=200 OUT=$O/gates/bf16 timeout 210 bash bench/run_on_device.sh --shapes $SHAPES --tokens 4096,16384 \
    --impls moefuse,torch_grouped_mm,dense_equiv_cublas --moefuse-gemm v1,auto --target-s 0.1 \
    --out "$O/gates/bf16/bench-bf16.json" > $O/bf16_run.log 2>&1
mark "bench bf16" $? $O/bf16_run.log
python3 tools/issue4_gates.py "$O/gates/bf16/bench-bf16.json" absent-fp8.json absent-lab.json absent-lab-fp8.json \
    --out "$O/gates/gates.json" --md "$O/gates/gates.md" > $O/gates_stdout.log 2>&1
mark "gates (bf16 only)" $? $O/gates_stdout.log
mark done 0 /dev/null
