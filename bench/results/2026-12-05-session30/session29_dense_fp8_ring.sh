#!/usr/bin/env bash
# Prepared in session 29 (not yet run; ~3 min). From the repo root, carry .deps:
#   O=/tmp/oN timeout 300 bash bench/results/<session dir>/session29_dense_fp8_ring.sh
# (Move it into the session's results directory first.)
# Session 29 changed fp8_scales (gemm_fp8_kernel.cuh): every consumer thread now frees the scale
# ring's slot by its own arrival (SCALE_EMPTY_ARRIVALS = 256). The grouped FP8 ring kernel ran after
# the change (suite, racecheck: session 29 call 4); the dense kernel's ring configurations did not.
# The library takes them when the scales cannot go by TMA (gemm_fp8.cu's RING_WIDE / RING_NARROW),
# and the FP8 lab's fp8v1 (128 wide), fp8v2 (its OVERLAP form) and fp8v3 (192 wide) are ring
# kernels. 1. the lab's checks (fp64 reference, every output written) on every shape for those
# three and the engine; 2. racecheck of the same variants, one launch each (--sanitize) on
# square-4096 (32 k-blocks: the 12-slot scale ring wraps).
# Prediction (before the run): every check passes; racecheck 0 hazards.
set -u
. tools/device_call.sh
OUT=$O/lab VARIANTS="fp8v1 fp8v2 fp8v3 fp8engine" LAB_LIMIT=90 timeout 200 bash lab/run_fp8_on_device.sh \
  > $O/lab_stdout.log 2>&1; mark "fp8 lab (build + fp8v1 fp8v2 fp8v3 fp8engine)" $? $O/lab_stdout.log
L=/tmp/moefuse-fp8lab-build/gemm_fp8_lab
timeout 90 compute-sanitizer --tool racecheck --error-exitcode 3 $L --variants fp8v1,fp8v2,fp8v3 --filter square-4096 \
  --sanitize > $O/racecheck_ring.log 2>&1; mark "racecheck fp8v1-3 square-4096" $? $O/racecheck_ring.log
mark done 0 /dev/null
