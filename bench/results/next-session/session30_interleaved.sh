#!/usr/bin/env bash
# Prepared in session 30 (no device could be started for it: not yet run; ~7-9 min). From the repo
# root, carry .deps (move it into the session's results directory first):
#   O=/tmp/oN timeout 570 bash bench/results/<session dir>/session30_interleaved.sh; tar czf $OUT/oN.tgz -C /tmp/oN .
# Session 30's call 1 found the lab's timings drift with their place in the process: the same kernel 5.8%
# slower timed sixth than first (8192^3, fp8engine), every variant slower the later it ran, and the
# cuBLAS peers always ran first. The labs and bench_moe now time every impl of a shape together in
# interleaved rounds (lab_interleaved_medians; bench_moe --rounds, default 3).
# 1. bench_moe bf16, qwen3-30b-a3b and glm-4.5-air at T = 64 and 16384, four processes alternating
#    --rounds 1 (the old protocol: each impl in one block, moefuse first) and --rounds 3: does
#    moefuse's ratio to its peers depend on the protocol?
# 2. Issue 4's gates with the new protocol (bench/issue4_gates.sh; its FP8 lab now also times the
#    per-tensor engine beside per-tensor cuBLASLt).
# Prediction (before the run): (1) under --rounds 1 moefuse's ratios to torch._grouped_mm and to
# dense-equiv cuBLAS at T = 16384 1-4% better for moefuse than under --rounds 3 (it ran first, cool);
# T = 64 within 2%. (2) The dense labs' ratios rise: bf16 engine / cuBLAS 0.97-1.00, FP8 engine /
# lt-block 0.96-1.00, engine / per-tensor cuBLASLt 0.88-0.92 (block) and 0.87-0.91 (per tensor):
# still below 0.95. The MoE gates: as session 28's within 3%.
# Added in session 31: the bf16 dense engine now runs 256-wide tiles in clusters of 2 from 4 waves
# (moe__hopper_gemm_dense_cluster_m; the lab's v2, 1-3% faster than v1 on many waves in three
# earlier runs). Prediction for the gate row: engine / cuBLAS 0.98-1.01 at 8192^3.
# Throughout: the SM clock, temperature and power every 200 ms (clocks.csv), to see whether the card
# slows as it warms (the explanation of call 1's drift that nothing has shown yet).
# The labs' JSON rows now carry each impl's median per round (round_ms), bench_moe's log lines too.
set -u
. tools/device_call.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > $O/gpu.txt 2>&1
# libmoefuse built here first (a bare machine: 30-40 s): each bench/run_on_device.sh below then finds
# it built; else the first one's own build leaves less than its 30 s floor of TOTAL_S=100 (FATAL).
build_device
nvidia-smi --query-gpu=timestamp,clocks.sm,temperature.gpu,power.draw --format=csv -lms 200 > $O/clocks.csv 2>&1 &
smi=$!
for i in 1 2; do
  for r in 1 3; do
    TOTAL_S=100 OUT=$O/order/r${r}_$i timeout 110 bash bench/run_on_device.sh --shapes qwen3-30b-a3b,glm-4.5-air \
      --tokens 64,16384 --target-s 0.1 --rounds $r --out $O/order/r${r}_$i/bench.json > $O/order_r${r}_$i.log 2>&1
    mark "bench --rounds $r ($i)" $? $O/order_r${r}_$i.log
  done
done
python3 tools/protocol_ab.py $O/order/r1_1/bench.json,$O/order/r1_2/bench.json \
  $O/order/r3_1/bench.json,$O/order/r3_2/bench.json --names rounds1,rounds3 --out $O/order/ab.md > /dev/null 2> $O/order/ab.err
mark "protocol_ab" $? $O/order/ab.md
left=$((560 - (SECONDS - call_t0)))
OUT=$O/gates timeout $left bash bench/issue4_gates.sh > $O/gates_stdout.log 2>&1; mark gates $? $O/gates/gates.log
python3 tools/lab_rounds.py $O/gates/lab_bf16/lab.json $O/gates/lab_fp8/lab_fp8.json --out $O/gates/lab_rounds.md \
  > /dev/null 2> $O/gates/lab_rounds.err; mark "lab rounds (drift left)" $? $O/gates/lab_rounds.md
kill $smi 2>/dev/null
mark done 0 /dev/null
