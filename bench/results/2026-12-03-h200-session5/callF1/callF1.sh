#!/usr/bin/env bash
# Device call F1 (session 5) driver: unpack HEAD's archive, run roofline --measure (issue 5).
set -u
R=$PWD; S=/tmp/snap; mkdir -p $S && tar xzf .snap/head.tgz -C $S && cp -r .deps $S/ && cd $S
echo "commit $(cat $R/.snap/commit)" > $OUT/call.log
t0=$SECONDS
OUT=$OUT/measure DEADLINE=540 bash tests/gpu/measure_on_device.sh > $OUT/measure_stdout.log 2>&1
echo "measure: rc=$? at $((SECONDS - t0)) s" >> $OUT/call.log
