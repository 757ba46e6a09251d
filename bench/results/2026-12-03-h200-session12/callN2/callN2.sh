#!/usr/bin/env bash
# Device call N2 (session 12) driver: unpack HEAD's archive, run session 11's prepared follow-up
# (bench/results/next-session/session11_fp8_dyn.sh: its header holds the prediction written before
# any run), tar the results.
set -u
R=$PWD; O=$OUT; S=/tmp/snap; mkdir -p $S && tar xzf .snap/head.tgz -C $S && cp -r .deps $S/ && cd $S
O=$O timeout 585 bash $R/bench/results/next-session/session11_fp8_dyn.sh
cd $O && tar czf callN2.tgz lab suite fwd call.log 2>/dev/null; rm -rf lab suite fwd
