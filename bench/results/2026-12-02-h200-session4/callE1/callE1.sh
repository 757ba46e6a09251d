#!/usr/bin/env bash
# Device call E1 (session 4) driver: unpack the .snap archive of HEAD, run the body, tar the results.
set -u
R=$PWD; O=$OUT; S=/tmp/snap; mkdir -p $S && tar xzf .snap/head.tgz -C $S && cp -r .deps $S/ && cd $S
O=$O BENCH_COMMIT=$(cat $R/.snap/commit) timeout 550 bash $R/.snap/callE1_body.sh
cd $O && tar czf callE1.tgz suite fp8 lab ncu 2>/dev/null; rm -rf suite fp8 lab ncu
