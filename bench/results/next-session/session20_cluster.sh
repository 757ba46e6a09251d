#!/usr/bin/env bash
# Prepared in session 20 for a later session (not yet run; after session20_followup.sh). From the
# repo root:   O=$OUT timeout 420 bash bench/results/next-session/session20_cluster.sh; then tar $OUT.
# The dense FP8 kernel's 128 x 192 tiles in clusters of 2 along M (lab fp8v5: fp8_config's
# CLUSTER_M = 2 on fp8v4 = the engine's large-shape kernel): each CTA loads its own A tile and half
# of the B tile, multicast to both CTAs; a stage is refilled when both CTAs' consumers have released
# it (remote arrives). Session 4 measured the same scheme at 128 wide 4-11% slower (the kernel was
# then far from the L2 limit). At 192 wide a stage brings 40 KB for 6.3 MFLOP; the cluster cuts
# that to 28 KB (B 24 -> 12 KB a CTA). Compile-checked only: 168 registers, 0 spills; SASS has the
# one UTMALDG.2D.MULTICAST and the remote arrive (SYNCS.ARRIVE.TRANS64.RED).
# 1. The FP8 lab, fp8v4 / fp8v5 / fp8engine against cuBLASLt in the same processes, every lab shape
#    (each variant checked against the CPU reference first, then timed).
# 2. compute-sanitizer memcheck and racecheck of fp8v5 on the quick shapes.
# Prediction (before the run): fp8v5 correct on every shape; 8192^3 fp8v5 / fp8v4 time 0.93-1.02
# (cuBLASLt runs clusters of 2 at this size; our barrier traffic doubles), the one-wave shapes
# 1.00-1.10 slower (fewer resident clusters than 132 CTAs: the odd SM idles). If 8192^3 gains >= 3%:
# the engine takes it where the tiles make >= 4 waves, then the grouped kernel's version (two row
# blocks of one expert share the B tile) is worth writing.
set -u
. tools/device_call.sh
OUT=$O/lab VARIANTS="fp8v4 fp8v5 fp8engine" timeout 300 bash lab/run_fp8_on_device.sh > $O/lab_stdout.log 2>&1
mark "fp8 lab" $? $O/lab_stdout.log
L=/tmp/moefuse-fp8lab-build/gemm_fp8_lab
timeout 60 compute-sanitizer --tool memcheck $L --variants fp8v5 --quick > $O/memcheck_fp8v5.log 2>&1
mark "memcheck fp8v5" $? $O/memcheck_fp8v5.log
timeout 90 compute-sanitizer --tool racecheck $L --variants fp8v5 --quick > $O/racecheck_fp8v5.log 2>&1
mark "racecheck fp8v5" $? $O/racecheck_fp8v5.log
mark done 0 /dev/null
