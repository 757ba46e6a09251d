#!/usr/bin/env bash
# Written in session 35, before its run, for the device time left (~400 s with the start). From the repo
# root, carry .deps:
#   O=/tmp/o7 timeout 270 bash bench/results/2026-12-05-session35/session35_call7.sh; tar czf $OUT/o7.tgz -C /tmp/o7 .
# On an H200: session35_fill3.sh, the fill decision (its rule in its header). On an H100: where the time
# goes with fill, by ncu (tests/gpu/profile_on_device.sh: each kernel of one eager forward, cold caches,
# with DRAM bytes), glm-4.5-air and mixtral-8x7b at T = 16384, fill against permute.
# Prediction (H100, before the run): GEMM1 with fill / the permuted GEMM1: glm 1.00-1.04, mixtral 1.00-1.02,
# and no permute kernel (glm's ~0.55-0.65 ms on this card); GEMM1's DRAM writes grow by about the permuted
# rows' bytes (glm 1.13 GB, mixtral 0.27 GB), its reads by less than that (x rows re-read from L2).
set -u
. tools/device_call.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > $O/gpu.txt 2>&1
if grep -q H200 $O/gpu.txt; then
  O=$O/fill3 timeout 240 bash bench/results/2026-12-05-session35/session35_fill3.sh
  mark "fill3 (H200)" $? /dev/null
else
  for a in fill permute; do
    MOEFUSE_HOPPER_A=$a OUT=$O/prof_$a MODELS="glm-4.5-air mixtral-8x7b" TOKENS=16384 GEMMS=hopper \
      METRICS=dram__bytes_read.sum,dram__bytes_write.sum RUN_LIMIT=55 timeout 120 \
      bash tests/gpu/profile_on_device.sh > $O/prof_$a.log 2>&1
    mark "profile $a" $? $O/prof_$a.log
  done
fi
mark done 0 /dev/null
