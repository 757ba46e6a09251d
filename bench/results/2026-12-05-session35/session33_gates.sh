#!/usr/bin/env bash
# Written in session 33 (no machine could be started for it; ~6 min). From the repo root, carry .deps (move it
# into the session's results directory first):
#   O=/tmp/o1 timeout 570 bash bench/results/2026-12-05-session35/session33_gates.sh; tar czf $OUT/o1.tgz -C /tmp/o1 .
# Issue 4's gates with what is shipped now (bench/issue4_gates.sh; bench_moe's interleaved rounds), the
# first gate run since session 28: GEMM1's TMA-stored A2 is the default where H >= 7168 since session 32,
# and the dense FP8 lab also times the per-tensor engine. Then issue 3's FP8 table in what is left
# (bench/issue3_gates.sh's first half, every peer, PERF.md's four shapes at every T).
# Predictions (before the run): the gates as session 28's (15 of 30) within run-to-run spread, except
# deepseek-v3's bf16 time/dense: 1.203 -> 1.14-1.18 (the TMA epilogue, 3.3-4.9% on an H100): still a
# miss. Dense FP8 engine / per-tensor cuBLASLt 0.87-0.91 (block) and 0.87-0.91 (per-tensor engine).
set -u
. tools/device_call.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > $O/gpu.txt 2>&1
build_device
timeout 40 $T --quick > $O/test_quick.log 2>&1; mark "suite --quick" $? $O/test_quick.log
OUT=$O/gates timeout 330 bash bench/issue4_gates.sh > $O/gates_stdout.log 2>&1; mark "gates" $? $O/gates_stdout.log
left=$((555 - (SECONDS - call_t0)))
if [ $left -gt 60 ]; then
  TOTAL_S=$left OUT=$O/fp8table timeout $((left + 5)) bash bench/run_on_device.sh --dtype fp8 \
    --out $O/fp8table/bench-fp8.json > $O/fp8table_run.log 2>&1
  mark "issue 3 FP8 table" $? $O/fp8table_run.log
fi
mark done 0 /dev/null
