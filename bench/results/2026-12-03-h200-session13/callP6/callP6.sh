#!/usr/bin/env bash
# Device call P6 (session 13) driver: the lab binary built here (carried in .snap/); the library built
# there from the working tree; run the body, tar the results.
set -u
R=$PWD; O=$OUT
R=$R O=$O timeout 585 bash $R/bench/results/2026-12-03-h200-session13/callP6/callP6_body.sh
cd $O && tar czf callP6.tgz lab suite fwd call.log 2>/dev/null; rm -rf lab suite fwd
