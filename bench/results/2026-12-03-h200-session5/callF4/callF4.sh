#!/usr/bin/env bash
# Device call F4 (session 5) driver: unpack HEAD's and bf8fae1's archives, run the body, tar the results.
set -u
R=$PWD; O=$OUT; S=/tmp/snap; mkdir -p $S /tmp/old && tar xzf .snap/head.tgz -C $S && tar xzf .snap/old.tgz -C /tmp/old \
  && cp -r .deps $S/ && cp -r .deps /tmp/old/ && cd $S
O=$O BENCH_COMMIT=$(cat $R/.snap/commit) timeout 580 bash $R/.snap/callF4_body.sh
cd $O && tar czf callF4.tgz suite fwd fp8 bf16 makerun 2>/dev/null; rm -rf suite fwd fp8 bf16 makerun
