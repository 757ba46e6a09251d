#!/usr/bin/env bash
# Device call E3 (session 4) driver: unpack HEAD's archive, run the body, tar the results.
set -u
R=$PWD; O=$OUT; S=/tmp/snap; mkdir -p $S && tar xzf .snap/head.tgz -C $S \
  && cp -r .deps $S/ && cd $S
O=$O BENCH_COMMIT=$(cat $R/.snap/commit) timeout 560 bash $R/.snap/callE3_body.sh
cd $O && tar czf callE3.tgz suite fwd lab ncu 2>/dev/null; rm -rf suite fwd lab ncu
