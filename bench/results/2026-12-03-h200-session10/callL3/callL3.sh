#!/usr/bin/env bash
# Device call L3 (session 10) driver: unpack HEAD's archive, run the body, tar the results (<= 8 files back).
set -u
R=$PWD; O=$OUT; S=/tmp/snap; mkdir -p $S && tar xzf .snap/head.tgz -C $S && cp -r .deps $S/ && cd $S
R=$R O=$O BENCH_COMMIT=$(cat $R/.snap/commit) timeout 560 bash $R/bench/results/2026-12-03-h200-session10/callL3/callL3_body.sh
cd $O && tar czf callL3.tgz suite prof bf16 fp8 call.log 2>/dev/null; rm -rf suite prof bf16 fp8
