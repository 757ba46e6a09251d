#!/usr/bin/env bash
# Written in session 35 (too little device time was left to start a machine for it; ~4 min). From the repo
# root, carry .deps:
#   O=/tmp/o7 timeout 270 bash bench/results/<session dir>/session35_fill_ncu.sh; tar czf $OUT/o7.tgz -C /tmp/o7 .
# Where the time goes with MOEFUSE_HOPPER_A=fill (GEMM1's permute pass inside GEMM1), by ncu
# (tests/gpu/profile_on_device.sh: each kernel of one eager forward, cold caches, with DRAM bytes),
# glm-4.5-air and mixtral-8x7b at T = 16384, fill against permute. Any Hopper card: on an H200 run
# session35_fill3.sh (the decision) first.
# Prediction (before any run): GEMM1 with fill / the permuted GEMM1: glm 1.00-1.04, mixtral 1.00-1.02,
# and no permute kernel (glm's ~0.55-0.65 ms); GEMM1's DRAM writes grow by about the permuted rows'
# bytes (glm 1.13 GB, mixtral 0.27 GB), its reads by less than that (x rows re-read from L2). If the
# GEMM1 with fill is >= 3% slower than the permuted one, pacing the copy just ahead of the tickets (so
# that TMA reads the rows from L2) is the next thing to build.
set -u
. tools/device_call.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > $O/gpu.txt 2>&1
for a in fill permute; do
  MOEFUSE_HOPPER_A=$a OUT=$O/prof_$a MODELS="glm-4.5-air mixtral-8x7b" TOKENS=16384 GEMMS=hopper \
    METRICS=dram__bytes_read.sum,dram__bytes_write.sum RUN_LIMIT=55 timeout 120 \
    bash tests/gpu/profile_on_device.sh > $O/prof_$a.log 2>&1
  mark "profile $a" $? $O/prof_$a.log
done
mark done 0 /dev/null
