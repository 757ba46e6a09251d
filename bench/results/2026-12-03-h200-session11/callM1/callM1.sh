#!/usr/bin/env bash
# Device call M1 (session 11) driver: unpack HEAD's archive, run the body, tar the results.
set -u
R=$PWD; O=$OUT; S=/tmp/snap; mkdir -p $S && tar xzf .snap/head.tgz -C $S && cp -r .deps $S/ && cd $S
R=$R O=$O BENCH_COMMIT=$(cat $R/.snap/commit) timeout 585 bash $R/bench/results/2026-12-03-h200-session11/callM1/callM1_body.sh
cd $O && tar czf callM1.tgz suite fp8 bf16 measure ncu call.log 2>/dev/null; rm -rf suite fp8 bf16 measure ncu
