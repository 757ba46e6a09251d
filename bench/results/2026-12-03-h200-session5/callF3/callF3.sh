#!/usr/bin/env bash
# Device call F3 (session 5) driver: unpack HEAD's archive, run the body, tar the results.
set -u
R=$PWD; O=$OUT; S=/tmp/snap; mkdir -p $S && tar xzf .snap/head.tgz -C $S && cp -r .deps $S/ && cd $S
O=$O BENCH_COMMIT=$(cat $R/.snap/commit) timeout 575 bash $R/.snap/callF3_body.sh
cd $O && tar czf callF3.tgz suite fwd measure fp8 makerun 2>/dev/null; rm -rf suite fwd measure fp8 makerun
