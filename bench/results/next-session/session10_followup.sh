#!/usr/bin/env bash
# Prepared in session 10 for the next session's first call (not yet run). From the repo root, after
#   STAGES=build OUT=$O bash tests/gpu/run_on_device.sh   (builds build-device):
#   O=$OUT bash bench/results/next-session/session10_followup.sh
# (1) The suite on session 10's last commit (the workspace case under every path override, the
#     config line's bf16 reasons): --quick, then racecheck to completion (L4's stopped at its 90 s
#     limit after 155 clean cases). (2) ncu of the swapped FP8 kernels at deepseek-v3 T=64 after the
#     two-step plan reads (9688803): GEMM2's stream rate and its stall samples.
# Prediction (before any run): --quick all pass (each model's workspace case too); racecheck 0
# hazards in ~150 s; GEMM2 ~0.76-0.80 ms at 4.1-4.3 TB/s (before: 846 us, 3.9), its full-barrier
# wait the top stall as in the lab. ~5 min.
set -u
O=${O:-$PWD/probe-out}; mkdir -p $O
B=build-device; T=$B/test_gpu_forward
timeout 60 $T --quick > $O/quick.log 2>&1; echo "quick rc=$?: $(tail -n 1 $O/quick.log)" >> $O/probe.log
timeout 200 compute-sanitizer --error-exitcode 3 --tool racecheck $T --quick --gemm hopper > $O/racecheck.log 2>&1
echo "racecheck rc=$?: $(tail -n 1 $O/racecheck.log)" >> $O/probe.log
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,sm__cycles_elapsed.avg.per_second
timeout 60 ncu --clock-control none --cache-control none --metrics $M --csv --launch-count 30 \
  $B/bench_gpu_forward --shapes deepseek-v3 --tokens 64 --gemm hopper --dtype fp8 > $O/ncu_deepseek_64.csv 2>&1
python3 tools/ncu_summary.py $O/ncu_deepseek_64.csv > $O/ncu_summary.md 2>&1
timeout 60 ncu --clock-control none --cache-control none --section SourceCounters --section WarpStateStats \
  --import-source no --kernel-name regex:decode_swap_kernel --launch-skip 3 --launch-count 1 -o $O/gemm2 \
  $B/bench_gpu_forward --shapes deepseek-v3 --tokens 64 --gemm hopper --dtype fp8 > $O/ncu_gemm2.log 2>&1
ncu --import $O/gemm2.ncu-rep --page source --csv --print-source sass > $O/gemm2_sass.csv 2>> $O/ncu_gemm2.log
python3 tools/ncu_stalls.py $O/gemm2_sass.csv > $O/gemm2_stalls.md 2>&1; echo "ncu done" >> $O/probe.log
cd $O && tar czf probe.tgz *.log *.csv *.md *.ncu-rep && rm -f *.csv *.ncu-rep quick.log racecheck.log ncu_gemm2.log
