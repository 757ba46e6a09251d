#!/usr/bin/env bash
# Device call F2 (session 5) driver: unpack the snapshots (HEAD, and 35e4aea for the A/B), run
# the body, tar the results.
set -u
R=$PWD; O=$OUT; S=/tmp/snap; mkdir -p $S /tmp/old && tar xzf .snap/head.tgz -C $S && tar xzf .snap/old.tgz -C /tmp/old \
  && cp -r .deps $S/ && cp -r .deps /tmp/old/ && cd $S
O=$O BENCH_COMMIT=$(cat $R/.snap/commit) timeout 570 bash $R/.snap/callF2_body.sh
cd $O && tar czf callF2.tgz suite fwd fp8 makerun 2>/dev/null; rm -rf suite fwd fp8 makerun
