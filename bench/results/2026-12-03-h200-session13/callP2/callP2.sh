#!/usr/bin/env bash
# Device call P2 (session 13) driver: the lab binary was built here (carried in .snap/), run the body, tar results.
set -u
R=$PWD; O=$OUT
R=$R O=$O timeout 585 bash $R/bench/results/2026-12-03-h200-session13/callP2/callP2_body.sh
cd $O && tar czf callP2.tgz lab prof call.log 2>/dev/null; rm -rf lab prof
