#!/usr/bin/env bash
# Device call N3 (session 12) driver: unpack HEAD's archive, run the body, tar the results.
set -u
R=$PWD; O=$OUT; S=/tmp/snap; mkdir -p $S && tar xzf .snap/head.tgz -C $S && cp -r .deps $S/ && cd $S
R=$R O=$O timeout 585 bash $R/bench/results/2026-12-03-h200-session12/callN3/callN3_body.sh
cd $O && tar czf callN3.tgz measure suite prof call.log 2>/dev/null; rm -rf measure suite prof
