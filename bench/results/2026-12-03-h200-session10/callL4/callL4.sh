#!/usr/bin/env bash
# Device call L4 (session 10) driver: unpack HEAD's archive (and L3's code as the A/B base), run the
# body, tar the results (<= 8 files back).
set -u
R=$PWD; O=$OUT; S=/tmp/snap; mkdir -p $S /tmp/base && tar xzf .snap/head.tgz -C $S && tar xzf .snap/base.tgz -C /tmp/base &&
  cp -r .deps $S/ && cp -r .deps /tmp/base/ && cd $S
R=$R O=$O BENCH_COMMIT=$(cat $R/.snap/commit) timeout 550 bash $R/bench/results/2026-12-03-h200-session10/callL4/callL4_body.sh
cd $O && tar czf callL4.tgz suite fwd bf16 fp8 call.log 2>/dev/null; rm -rf suite fwd bf16 fp8
