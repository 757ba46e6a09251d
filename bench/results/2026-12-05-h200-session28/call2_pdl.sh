#!/usr/bin/env bash
# Prepared in session 26 (no GPU was lent that session; ~5 min). From the repo root, carry .deps:
#   O=$OUT timeout 560 bash bench/results/next-session/session26_pdl.sh; then tar $OUT.
# (~8 min with step 3.) Programmatic dependent launch (src/cuda/pdl.cuh, src/cuda/NOTES.md "Session 26"), off unless
# MOEFUSE_PDL=1:
# 1. Correctness with it on: the suite --quick (every case also inside a graph capture, where the
#    launches become programmatic edges) and memcheck of --quick.
# 2. bench_gpu_forward (CUDA-graph replays, medians of 30), PERF.md's four shapes at
#    T = 1, 8, 64, 512, 4096, bf16 then FP8, three arms in 3 rotated rounds: base (this tree with
#    session26_pdl.patch reversed: src/cuda and lab as at b8034d0, session 25's last code, so no PDL
#    code at all; the patch also holds session 26's SASS-identical split of grouped_kernel.cuh and
#    the host-only launched(), and session 27's swapped-kernel A2 epilogue, off unless
#    MOEFUSE_FP8_SWAP_A2=epilogue, whose shipped FP8 swap kernels differ from the base in
#    scheduling and register numbering only; regenerate it with `git diff b8034d0 HEAD -- src/cuda lab`
#    if src/cuda changed since), off (the PDL build, MOEFUSE_PDL unset: the waits are no-ops) and on
#    (MOEFUSE_PDL=1).
# Prediction (before any run): the suite passes and memcheck is clean with PDL on. Time on / off:
# T = 1 0.80-0.95 (qwen3 bf16 0.045 ms over 5-6 kernels, ~2-4 us of launch and start-up hidden per
# boundary; FP8's two extra quantisers a little more), T = 8 and 64 0.95-1.00, T >= 512 0.99-1.01
# (no loss anywhere: the waiting CTAs only take SM slots the kernel before no longer needs).
# off / base within 0.99-1.01 everywhere (two no-op instructions a kernel; the ticket counter's and
# fp8-tensor amax's memsets replaced by a one-warp kernel).
# If T = 1 gains less than 3% on every shape, PDL stays off and the chain's length is the lever
# (fusing plan into the first GEMM, combine into GEMM2 at T <= 64).
# (Move this script and its patch into the session's results directory first, and fix P below.)
set -u
. tools/device_call.sh
P=bench/results/2026-12-05-h200-session28/call2_pdl.patch
base_tree $P
build_base_bench &
build_device
wait
mark "base bench build" $? $O/build_base.log
MOEFUSE_PDL=1 timeout 45 $T --quick > $O/test_quick_pdl.log 2>&1; mark "suite --quick, PDL on" $? $O/test_quick_pdl.log
MOEFUSE_PDL=1 timeout 120 compute-sanitizer --tool memcheck --error-exitcode 3 $T --quick > $O/memcheck_pdl.log 2>&1
mark "memcheck --quick, PDL on" $? $O/memcheck_pdl.log
F=$O/fwd; mkdir -p $F
S=qwen3-30b-a3b,gpt-oss-120b,mixtral-8x7b,deepseek-v3
for d in bf16 fp8; do
  for i in 1 2 3; do
    case $i in 1) order="base off on";; 2) order="off on base";; 3) order="on base off";; esac
    for a in $order; do
      X=$B; [ $a = base ] && X=$BB
      v=0; [ $a = on ] && v=1
      MOEFUSE_PDL=$v timeout 60 $X --shapes $S --tokens 1,8,64,512,4096 --gemm hopper --dtype $d > $F/${d}_${a}_$i.log 2>&1
      mark "fwd $d $a $i" $? /dev/null
    done
  done
  python3 tools/ab_summary.py $F ${d}_off ${d}_on ${d}_base > $F/$d.md 2>&1
done
# 3. The chain's kernels one by one (ncu, cold caches, serialised: no PDL overlap under ncu) at the
#    decode sizes, to set against the graph replay times above: their sum against the replay time
#    bounds what launch overlap can still save, and says whether fusing kernels is worth more.
for d in bf16 fp8; do
  DTYPE=$d MODELS="qwen3-30b-a3b deepseek-v3" TOKENS="1 64" GEMMS=hopper OUT=$O/prof_$d BUILD=build-device \
    timeout 100 bash tests/gpu/profile_on_device.sh > $O/prof_${d}_stdout.log 2>&1
  mark "ncu $d" $? $O/prof_${d}_stdout.log
done
mark done 0 /dev/null
