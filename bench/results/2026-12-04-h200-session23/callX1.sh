#!/usr/bin/env bash
# Prepared in session 22 for a later session (not yet run; ~6 min). From the repo root, carry .deps:
#   O=$OUT timeout 500 bash bench/results/next-session/session22_stalls.sh; then tar $OUT.
# 0. The K-grouped GEMM's opt-in configuration (MOEFUSE_WGRAD_BR=32, wgrad_cfg<32>; compile-checked
#    only): k-blocks of 32 rows (24 KB stages, 4 of them) so that 128 KB of staging fit, each warp's
#    whole 16 x 256 fp32 part of the tile, and all of a tile's bulk copies are issued at once and
#    drain under the next unit's MMAs (with BR = 64 only 32 KB fit: four rounds, each waiting for
#    the last to be read). Why: deepseek's dW2 needs ~2.9 TB/s of dW writes at PERF.md's bf16
#    ceiling (751 TFLOP/s; ~520 MACs per 4-byte dW element), its compute and bytes floors are
#    equal (0.255 / 0.253 ms at W3's draw), and it runs at about their sum: in series.
#    Prediction: correct on every case (70%: the risk is the 32-row boxes and descriptors), memcheck
#    and racecheck clean; BR32 / default TFLOP/s: deepseek dW2 1.3-1.8x, dW13 1.2-1.5x, qwen3
#    1.05-1.3x. If deepseek gains >= 15% and qwen3 loses nothing: make it the default.
# Two kernels whose limits session 22 could not name, under ncu's per-instruction stall sampling:
# 1. The K-grouped GEMM at deepseek-v3's dW2 (16 experts, ~520 rows an expert): W6 saw the tensor
#    pipe 48% busy with DRAM at 38% and L2 at 7.2 TB/s, and neither async stores (W5) nor A
#    multicast (W7) moved it. One launch of test_gpu_wgrad --perf's deepseek dW2 case: launch 47
#    of the wgrad kernel in W6's order (7 correctness cases, then 15 launches a perf case; recount
#    if the test's cases change).
# 2. The grouped FP8 GEMM1 at qwen3 T = 16384, the shipped 192-wide kernel (fp8_up_192) beside
#    its mainloop alone (fp8_up_192_none): the shipped one's excess grew with K in session 21 (V2),
#    and the k-loops' SASS are the same length (309-316 instructions, session 22). Where do its
#    extra samples fall: the k-loop (then something the epilogue does slows the mainloop: its
#    stores contending with TMA loads?) or the epilogue itself?
# Prediction (before the run): (1) the wgmma wait under 30% of the consumers' samples and the
#    full-barrier wait over 20% (the producer not keeping 4 stages ahead across the short units);
#    (2) the shipped kernel's extra samples mostly in the k-loop's full-barrier wait.
set -u
. tools/device_call.sh
build_device
W=build-device/test_gpu_wgrad
MOEFUSE_WGRAD_BR=32 timeout 40 $W > $O/wgrad_br32.log 2>&1; mark "wgrad BR32" $? $O/wgrad_br32.log
MOEFUSE_WGRAD_BR=32 timeout 70 $W --perf > $O/wgrad_br32_perf.log 2>&1; mark "wgrad BR32 perf" $? $O/wgrad_br32_perf.log
timeout 70 $W --perf > $O/wgrad_br64_perf.log 2>&1; mark "wgrad BR64 perf" $? $O/wgrad_br64_perf.log
MOEFUSE_WGRAD_BR=32 timeout 40 compute-sanitizer --tool memcheck --error-exitcode 3 $W > $O/wgrad_br32_memcheck.log 2>&1
mark "BR32 memcheck" $? $O/wgrad_br32_memcheck.log
MOEFUSE_WGRAD_BR=32 timeout 60 compute-sanitizer --tool racecheck --error-exitcode 3 $W > $O/wgrad_br32_racecheck.log 2>&1
mark "BR32 racecheck" $? $O/wgrad_br32_racecheck.log
timeout 90 ncu --clock-control none --section SourceCounters --section WarpStateStats --import-source no \
  --kernel-name regex:wgrad_kernel --launch-skip 47 --launch-count 1 -o $O/wgrad build-device/test_gpu_wgrad --perf \
  > $O/ncu_wgrad.log 2>&1
ncu --import $O/wgrad.ncu-rep --page source --csv --print-source sass > $O/wgrad_sass.csv 2>> $O/ncu_wgrad.log
python3 tools/ncu_stalls.py $O/wgrad_sass.csv > $O/wgrad_stalls.md 2>&1; mark "wgrad stalls" $? $O/wgrad_stalls.md
OUT=$O/glab LAB=fp8 SUITE=0 SHAPES=qwen3 VARIANTS=fp8_up_192,fp8_up_192_none LAB_LIMIT=60 timeout 150 \
  bash lab/run_grouped_on_device.sh > $O/glab_stdout.log 2>&1
mark "grouped fp8 lab" $? $O/glab_stdout.log
L=${LAB_BUILD:-/tmp/moefuse-grouped-lab}/grouped_lab
for v in fp8_up_192 fp8_up_192_none; do
  timeout 60 ncu --clock-control none --section SourceCounters --section WarpStateStats --import-source no \
    --kernel-name regex:grouped_fp8 --launch-count 1 -o $O/$v $L --fp8 --shapes qwen3 --variants $v --check-only \
    > $O/ncu_$v.log 2>&1
  ncu --import $O/$v.ncu-rep --page source --csv --print-source sass > $O/${v}_sass.csv 2>> $O/ncu_$v.log
  python3 tools/ncu_stalls.py $O/${v}_sass.csv > $O/${v}_stalls.md 2>&1; mark "stalls $v" $? $O/${v}_stalls.md
done
rm -f $O/*.ncu-rep
mark done 0 /dev/null
