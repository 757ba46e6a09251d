#!/usr/bin/env bash
# Device call G3 (session 6) driver: unpack HEAD's archive and f6ef8a5's (old), run the body, tar the results.
set -u
R=$PWD; O=$OUT; S=/tmp/snap; mkdir -p $S /tmp/old && tar xzf .snap/head.tgz -C $S && tar xzf .snap/old.tgz -C /tmp/old \
  && cp -r .deps $S/ && cp -r .deps /tmp/old/ && cd $S
O=$O BENCH_COMMIT=$(cat $R/.snap/commit) timeout 585 bash $R/.snap/callG3_body.sh
cd $O && tar czf callG3.tgz suite fwd measure bf16 makerun call.log 2>/dev/null; rm -rf suite fwd measure bf16 makerun
