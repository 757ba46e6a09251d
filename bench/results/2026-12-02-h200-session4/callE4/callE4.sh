#!/usr/bin/env bash
# Device call E4 (session 4) driver: unpack HEAD's and 45423dc's archives, run the body, tar the results.
set -u
R=$PWD; O=$OUT; S=/tmp/snap; mkdir -p $S /tmp/old && tar xzf .snap/head.tgz -C $S && tar xzf .snap/old.tgz -C /tmp/old \
  && cp -r .deps $S/ && cp -r .deps /tmp/old/ && cd $S
O=$O BENCH_COMMIT=$(cat $R/.snap/commit) timeout 560 bash $R/.snap/callE4_body.sh
cd $O && tar czf callE4.tgz suite fwd glab fp8 2>/dev/null; rm -rf suite fwd glab fp8
