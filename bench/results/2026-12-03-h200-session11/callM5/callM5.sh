#!/usr/bin/env bash
# Device call M5 (session 11) driver: unpack HEAD's archive, run the body, tar the results.
set -u
R=$PWD; O=$OUT; S=/tmp/snap; mkdir -p $S && tar xzf .snap/head.tgz -C $S && cp -r .deps $S/ && cd $S
R=$R O=$O timeout 585 bash $R/bench/results/2026-12-03-h200-session11/callM5/callM5_body.sh
cd $O && tar czf callM5.tgz suite lab fwd call.log 2>/dev/null; rm -rf suite lab fwd
