#!/usr/bin/env bash
# Prepared in session 30, the wgrad step added in session 31 (not yet run; ~4-6 min; run it first: it is the correctness call). From
# the repo root, carry .deps (move it into the session's results directory first):
#   O=/tmp/oN timeout 560 bash bench/results/<session dir>/session30_dense_suite.sh
# The GPU suite's new dense-engine cases (tests/gpu/gpu_test_dense.c: bf16, FP8 block-scaled by TMA
# and by the scale ring, FP8 per tensor; every width, clusters of 1 and 2, one graph run; the
# refusals), then the same under memcheck and racecheck; the grouped lab's first interleaved run
# (qwen3 at T = 16384, four variants: session 30 rewrote its timing); then the whole --quick suite.
# Session 31 added the bf16 engine's clusters of 2 (block_n 256, cluster_m 2, and cluster_m 2 with
# block_n 0) to the bf16 cases and two refusals (cluster_m 3; cluster_m 2 on 128-wide tiles), and
# padded leading dimensions (A and B rows past K; C's rows padded by 3 and 8 columns, which must stay
# poisoned).
# Prediction (before the run): every dense case passes (the FP8 configurations passed the lab's
# checks in session 30's call 1 on the lab's shapes; these add M = 1, 130 and 300 rows, K = 16 and
# 1040, and the per-tensor mode from a graph); memcheck 0 errors; racecheck 0 hazards; the whole
# --quick suite as session 29's (260 cases) plus the new ones.
set -u
. tools/device_call.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > $O/gpu.txt 2>&1
build_device
timeout 120 $T --filter dense > $O/dense.log 2>&1; mark "dense cases" $? $O/dense.log
timeout 120 compute-sanitizer --tool memcheck --error-exitcode 3 $T --quick --filter dense > $O/memcheck_dense.log 2>&1
mark "memcheck dense --quick" $? $O/memcheck_dense.log
timeout 150 compute-sanitizer --tool racecheck --error-exitcode 3 $T --quick --filter dense > $O/racecheck_dense.log 2>&1
mark "racecheck dense --quick" $? $O/racecheck_dense.log
SHAPES=qwen3 VARIANTS=up_none,up_actfirst,down_none,down_dyn_b16 TOKENS=16384 SUITE=0 LAB_LIMIT=100 OUT=$O/glab \
  timeout 160 bash lab/run_grouped_on_device.sh > $O/glab_stdout.log 2>&1; mark "grouped lab (interleaved)" $? $O/glab_stdout.log
# Added in session 31: the K-grouped GEMM's stores (the aligned pairs the default again, bulk on
# request), checked bit-equal and timed interleaved on the four --perf shapes. Prediction: the bits
# equal; pairs / bulk time 0.95-0.99 on every shape (W5's raw files, read the right way round).
timeout 120 build-device/test_gpu_wgrad --perf > $O/wgrad_perf.log 2>&1; mark "wgrad --perf (pairs vs bulk)" $? $O/wgrad_perf.log
left=$((550 - (SECONDS - call_t0)))
timeout $left $T --quick > $O/suite_quick.log 2>&1; mark "suite --quick" $? $O/suite_quick.log
mark done 0 /dev/null
