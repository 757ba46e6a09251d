#!/usr/bin/env bash
# Device call Q6 (session 14) driver: the library built there; run the body, tar the results.
set -u
R=$PWD; O=$OUT
R=$R O=$O timeout 300 bash $R/bench/results/2026-12-03-h200-session14/callQ6/callQ6_body.sh
cd $O && tar czf callQ6.tgz suite fwd call.log 2>/dev/null; rm -rf suite fwd
