#!/usr/bin/env bash
# Device call K5 (session 9) driver: unpack HEAD's archive, run the body, tar the results (<= 8 files back).
set -u
R=$PWD; O=$OUT; S=/tmp/snap; mkdir -p $S && tar xzf .snap/head.tgz -C $S && cp -r .deps $S/ && cd $S
O=$O BENCH_COMMIT=$(cat $R/.snap/commit) timeout 265 bash $R/bench/results/2026-12-03-h200-session9/callK5/callK5_body.sh
cd $O && tar czf callK5.tgz suite fp8 call.log 2>/dev/null; rm -rf suite fp8
