#!/usr/bin/env bash
# Device call E2 (session 4) driver: unpack HEAD's and 809aa0a's archives, run the body, tar the results.
set -u
R=$PWD; O=$OUT; S=/tmp/snap; mkdir -p $S /tmp/old && tar xzf .snap/head.tgz -C $S && tar xzf .snap/old.tgz -C /tmp/old \
  && cp -r .deps $S/ && cp -r .deps /tmp/old/ && cd $S
O=$O BENCH_COMMIT=$(cat $R/.snap/commit) timeout 560 bash $R/.snap/callE2_body.sh
cd $O && tar czf callE2.tgz suite ab lab ncu 2>/dev/null; rm -rf suite ab lab ncu
