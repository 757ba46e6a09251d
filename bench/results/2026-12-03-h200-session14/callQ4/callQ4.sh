#!/usr/bin/env bash
# Device call Q4 (session 14) driver: run the body, tar the results.
set -u
R=$PWD; O=$OUT
R=$R O=$O timeout 585 bash $R/bench/results/2026-12-03-h200-session14/callQ4/callQ4_body.sh
cd $O && tar czf callQ4.tgz q call.log 2>/dev/null; rm -rf q
