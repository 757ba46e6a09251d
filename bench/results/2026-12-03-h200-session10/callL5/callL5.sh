#!/usr/bin/env bash
# Device call L5 (session 10, ~250 s of budget left): L4's FP8 bench ran out of its time budget
# before deepseek-v3 T >= 8 (a background build of the A/B base shared the CPUs). The FP8 bench with
# the peers again on 9688803, deepseek-v3 alone, nothing else running.
# Prediction (before the run): block-scaled T=64 ~2.42-2.44 ms (L3 2.461 at b31b48e; L4's A/B
# new/base 0.985), 1.51-1.53x torch._scaled_grouped_mm; the other cells as L3.
set -u
R=$PWD; S=/tmp/snap; mkdir -p $S && tar xzf .snap/head.tgz -C $S && cp -r .deps $S/ && cd $S
BENCH_COMMIT=$(cat $R/.snap/commit) TOTAL_S=125 OUT=$OUT/fp8 timeout 130 bash bench/run_on_device.sh --dtype fp8 \
  --target-s 0.1 --shapes deepseek-v3 > $OUT/fp8_run.log 2>&1; echo "bench rc=$?" >> $OUT/fp8_run.log
cd $OUT && mv fp8_run.log fp8/ && tar czf callL5.tgz fp8 && rm -rf fp8
