#!/usr/bin/env bash
# Device call Q5 (session 14) driver: the lab binary built here (carried: .snap/grouped_lab); the
# library built there; run the body, tar the results.
set -u
R=$PWD; O=$OUT
R=$R O=$O timeout 500 bash $R/bench/results/2026-12-03-h200-session14/callQ5/callQ5_body.sh
cd $O && tar czf callQ5.tgz lab suite fwd call.log 2>/dev/null; rm -rf lab suite fwd
