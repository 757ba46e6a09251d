#!/usr/bin/env bash
# Device call P4 (session 13) driver: the lab binary was built here (carried in .snap/), run the body, tar results.
set -u
R=$PWD; O=$OUT
R=$R O=$O timeout 585 bash $R/bench/results/2026-12-03-h200-session13/callP4/callP4_body.sh
cd $O && tar czf callP4.tgz lab call.log 2>/dev/null; rm -rf lab
