#!/usr/bin/env bash
# Written in session 37 before this run (~8 min; H100 or H200). From the repo root, carry .deps:
#   O=/tmp/o3 timeout 590 bash bench/results/2026-12-05-session37/session37_quant.sh; tar czf $OUT/o3.tgz -C /tmp/o3 .
# The FP8 quantiser's 16-wide form with whole-sector loads (quant_striped.patch; the base is this tree
# with the patch reversed). Session 24's ncu (H200, T = 16384): qwen3-30b-a3b's fp32 A2 pass 171.9 us,
# 46% warps active, 605 MB of L2 reads for 403 MB from DRAM; deepseek-v3's x scatter 607.6 us at 0.47
# of its bytes floor. Each load of the old form used half of every sector it touched (lanes 64 bytes
# apart for fp32, 32 for bf16), and the kernels held 48-50 registers (4-5 blocks of 256 an SM); the
# new form holds 40 (A2) and 48 (scatter).
# Checks: the quantiser cases (a new quick shape, 2200 x 1040 with a padded ld, reaches the 16-wide
# form: none of the old quick shapes did), the FP8 forward cases, --perf 4096 FP8, memcheck.
# Predictions (new / base, this card): ncu time of the A2 pass 0.75-0.90 on both shapes, L2 read
# sectors within 5% of the DRAM bytes / 32; the x scatter 0.85-1.00. FP8 forward at T = 16384,
# base / new medians (above 1 = new faster): qwen3-30b-a3b 1.01-1.03, deepseek-v3 1.00-1.02,
# gpt-oss-120b and mixtral-8x7b 1.00-1.01.
# Rule (written before the run): the change lands if every check passes, both kernels' ncu times are
# new / base <= 1.00 on both shapes, and no forward cell's base / new median is below 0.995.
set -u
. tools/device_call.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > $O/gpu.txt 2>&1
base_tree bench/results/2026-12-05-session37/quant_striped.patch
build_base_bench & bb=$!
build_device
wait $bb; mark "base bench build" $? $O/build_base.log
timeout 60 $T --quick --gemm hopper --filter fp8 > $O/suite_quick_fp8.log 2>&1
mark "suite --quick --filter fp8 (quantiser cases, fp8 forward cases)" $? $O/suite_quick_fp8.log
grep "fp8 quantiser" $O/suite_quick_fp8.log | grep -c "2200 x 1040" >> $O/call.log
timeout 90 compute-sanitizer --tool memcheck --error-exitcode 3 $T --quick --gemm hopper --filter none-such \
  > $O/memcheck_quant.log 2>&1
mark "memcheck, the quantiser cases" $? $O/memcheck_quant.log
timeout 100 $T --perf 4096 --gemm hopper --filter fp8 > $O/suite_perf_fp8.log 2>&1
mark "suite --perf 4096 fp8" $? $O/suite_perf_fp8.log
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_op_write.sum,lts__t_sectors_op_read.sum,sm__warps_active.avg.pct_of_peak_sustained_active
for m in qwen3-30b-a3b deepseek-v3; do
  for arm in new base; do
    bin=$B; [ $arm = base ] && bin=$BB
    timeout 90 ncu --clock-control none --kernel-name regex:quant_row128_v16_kernel --launch-count 2 --metrics $M \
      $bin --shapes $m --tokens 16384 --gemm hopper --dtype fp8 > $O/ncu_quant_${m}_$arm.log 2>&1
    mark "ncu $m $arm" $? $O/ncu_quant_${m}_$arm.log
  done
done
mkdir -p $O/fwd
for i in 1 2 3 4 5 6; do
  [ $((560 - (SECONDS - call_t0))) -lt 50 ] && break
  order="new base"; [ $((i % 2)) = 0 ] && order="base new"
  for arm in $order; do
    bin=$B; [ $arm = base ] && bin=$BB
    timeout 60 $bin --shapes qwen3-30b-a3b,gpt-oss-120b,mixtral-8x7b,deepseek-v3 --tokens 16384 --gemm hopper \
      --dtype fp8 > $O/fwd/s37q${arm}_$i.log 2>&1
    mark "forward $arm $i" $? $O/fwd/s37q${arm}_$i.log
  done
done
python3 tools/ab_summary.py --rounds $O/fwd s37qbase s37qnew > $O/fwd/ab.md 2>&1
mark "forward summary" $? $O/fwd/ab.md
mark done 0 /dev/null
