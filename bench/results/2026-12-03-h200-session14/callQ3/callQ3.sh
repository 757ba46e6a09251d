#!/usr/bin/env bash
# Device call Q3 (session 14) driver: run the body, tar the results.
set -u
R=$PWD; O=$OUT
R=$R O=$O timeout 585 bash $R/bench/results/2026-12-03-h200-session14/callQ3/callQ3_body.sh
cd $O && tar czf callQ3.tgz bf16 suite call.log bf16_run.log 2>/dev/null; rm -rf bf16 suite
