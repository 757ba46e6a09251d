#!/usr/bin/env bash
# Session 24, call Y1 (~4 min). From the repo root, carry .deps: O=$OUT timeout 500 bash bench/results/2026-12-04-h200-session24/callY1.sh
# 1. callY1a_xscatter.sh (session 23's prepared ncu of the x scatter quantiser; its prediction in its header).
# 2. cuBLASLt's FP8 kernels are generated at run time (libcublasLt holds no nvjet cubin: "KernelGeneratorKind::NVJET",
#    cuLibraryLoadData), so their SASS exists only in the process. ncu's source page of the block-scaled one
#    (nvjet ..._128x128_128x6_2x1_..._Ablk128_Bvec128, the same work as our dense engine) and the per-tensor
#    one (..._144x128_...), square-8192, with SourceCounters: what the consumers do between k-blocks (session
#    22's open question), with per-instruction stall samples.
# Prediction (before the run): ncu gives the SASS of the generated kernels (70%). In the block-scaled consumer
# loop the promotion FFMAs of one k-block are not all behind one wgmma wait: the k-block's wgmmas are split in
# two or more commit groups (or two accumulators), so that part of the promotion runs while wgmmas of the same
# warpgroup are in flight (60%); the per-k-block stage release and the full-barrier wait occur once per
# k-block per warp, as ours.
set -u
. tools/device_call.sh
O=$O/xscatter bash bench/results/2026-12-04-h200-session24/callY1a_xscatter.sh
mark xscatter $? $O/xscatter/call.log
OUT=$O/lab VARIANTS="fp8engine" LAB_LIMIT=60 timeout 150 bash lab/run_fp8_on_device.sh > $O/lab_stdout.log 2>&1
mark "fp8 lab" $? $O/lab_stdout.log
L=/tmp/moefuse-fp8lab-build/gemm_fp8_lab
for k in Ablk128 qqtst_144x128; do
  timeout 120 ncu --clock-control none --section SourceCounters --section WarpStateStats --import-source no \
    --kernel-name regex:$k --launch-count 1 -o $O/lt_$k $L --variants fp8engine --filter square-8192 --check-only \
    > $O/ncu_lt_$k.log 2>&1
  mark "ncu $k" $? $O/ncu_lt_$k.log
  ncu --import $O/lt_$k.ncu-rep --page source --csv --print-source sass > $O/lt_${k}_sass.csv 2>> $O/ncu_lt_$k.log
  mark "sass $k" $? $O/ncu_lt_$k.log
  python3 tools/ncu_stalls.py $O/lt_${k}_sass.csv > $O/lt_${k}_stalls.md 2>&1; mark "stalls $k" $? $O/lt_${k}_stalls.md
done
mark done 0 /dev/null
