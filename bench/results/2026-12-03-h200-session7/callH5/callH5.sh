#!/usr/bin/env bash
# Device call H5 (session 7) driver: unpack HEAD's archive and 7bd5a03 (old), run the body, tar the results.
set -u
R=$PWD; O=$OUT; S=/tmp/snap; mkdir -p $S /tmp/old && tar xzf .snap/head.tgz -C $S && tar xzf .snap/old.tgz -C /tmp/old \
  && cp -r .deps $S/ && cp -r .deps /tmp/old/ && cd $S
O=$O BENCH_COMMIT=$(cat $R/.snap/commit) timeout 150 bash $R/bench/results/2026-12-03-h200-session7/callH5/callH5_body.sh
cd $O && tar czf callH5.tgz suite fwd measure lab fp8 bf16 makerun call.log 2>/dev/null; rm -rf suite fwd measure lab fp8 bf16 makerun
