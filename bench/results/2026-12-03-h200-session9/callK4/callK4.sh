#!/usr/bin/env bash
# Device call K4 (session 9) driver: unpack HEAD's archive (new) and base's (.snap/base.tgz, the A/B's
# old arm), run the body, tar the results (<= 8 files back).
set -u
R=$PWD; O=$OUT; S=/tmp/snap; mkdir -p $S /tmp/base && tar xzf .snap/head.tgz -C $S && tar xzf .snap/base.tgz -C /tmp/base
cp -r .deps $S/ && cp -r .deps /tmp/base/ && cd $S
O=$O BENCH_COMMIT=$(cat $R/.snap/commit) timeout 560 bash $R/bench/results/2026-12-03-h200-session9/callK4/callK4_body.sh
cd $O && tar czf callK4.tgz suite fwd prof fp8 call.log 2>/dev/null; rm -rf suite fwd prof fp8
