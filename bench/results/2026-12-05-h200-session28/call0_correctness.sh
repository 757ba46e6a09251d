#!/usr/bin/env bash
# Session 28, call 0 (written after a call 1 was lost to the machine being taken back: a shorter
# first call, so that what sessions 25-27 landed unrun gets its correctness checks first). From the
# repo root, carry .deps:  O=/tmp/o timeout 420 bash bench/results/2026-12-05-h200-session28/call0_correctness.sh
# The suite --quick as shipped; with each opt-in on (the A2 epilogue on the FP8 list, the bf16
# gather, PDL); memcheck and racecheck of the bit-for-bit cases (each switches its opt-in on itself).
# Prediction (before the run): all green; 0 errors, 0 hazards.
set -u
. tools/device_call.sh
build_device
timeout 45 $T --quick > $O/test_quick.log 2>&1; mark "suite --quick" $? $O/test_quick.log
MOEFUSE_FP8_SWAP_A2=epilogue timeout 45 $T --quick --filter fp8 > $O/test_fp8_swap_a2.log 2>&1
mark "suite --quick --filter fp8, swap A2 on" $? $O/test_fp8_swap_a2.log
MOEFUSE_BF16_SWAP_X=gather timeout 45 $T --quick > $O/test_quick_gather.log 2>&1
mark "suite --quick, bf16 gather on" $? $O/test_quick_gather.log
MOEFUSE_PDL=1 timeout 45 $T --quick > $O/test_quick_pdl.log 2>&1; mark "suite --quick, PDL on" $? $O/test_quick_pdl.log
timeout 90 compute-sanitizer --tool memcheck --error-exitcode 3 $T --quick --filter bitexact --gemm hopper \
  > $O/memcheck_bitexact.log 2>&1; mark "memcheck of the bitexact cases" $? $O/memcheck_bitexact.log
timeout 120 compute-sanitizer --tool racecheck --error-exitcode 3 $T --quick --filter bitexact --gemm hopper \
  > $O/racecheck_bitexact.log 2>&1; mark "racecheck of the bitexact cases" $? $O/racecheck_bitexact.log
mark done 0 /dev/null
