#!/usr/bin/env bash
# Device call E5 (session 4) driver: unpack HEAD's archive, run the body, tar the results.
set -u
R=$PWD; O=$OUT; S=/tmp/snap; mkdir -p $S && tar xzf .snap/head.tgz -C $S \
  && cp -r .deps $S/ && cd $S
O=$O BENCH_COMMIT=$(cat $R/.snap/commit) timeout 560 bash $R/.snap/callE5_body.sh
cd $O && tar czf callE5.tgz suite fp8 makerun 2>/dev/null; rm -rf suite fp8 makerun
