#!/usr/bin/env bash
# Device call G2 (session 6) driver: unpack HEAD's archive and the evict-first-store experiment
# (exp: HEAD + st.global.cs in the staged epilogues), run the body, tar the results.
set -u
R=$PWD; O=$OUT; S=/tmp/snap; mkdir -p $S /tmp/exp && tar xzf .snap/head.tgz -C $S && tar xzf .snap/exp.tgz -C /tmp/exp \
  && cp -r .deps $S/ && cp -r .deps /tmp/exp/ && cd $S
O=$O BENCH_COMMIT=$(cat $R/.snap/commit) timeout 585 bash $R/.snap/callG2_body.sh
cd $O && tar czf callG2.tgz suite fwd measure fp8 ncu call.log 2>/dev/null; rm -rf suite fwd measure fp8 ncu
