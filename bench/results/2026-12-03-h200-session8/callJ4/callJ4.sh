#!/usr/bin/env bash
# Device call J4 (session 8) driver: unpack HEAD's archive, run the body, tar the results (<= 8 files back).
set -u
R=$PWD; O=$OUT; S=/tmp/snap; mkdir -p $S && tar xzf .snap/head.tgz -C $S && cp -r .deps $S/ && cd $S
O=$O BENCH_COMMIT=$(cat $R/.snap/commit) timeout 500 bash $R/bench/results/2026-12-03-h200-session8/callJ4/callJ4_body.sh
cd $O && tar czf callJ4.tgz suite fwd fp8 2>/dev/null; rm -rf suite fwd fp8
