#!/usr/bin/env bash
# Device call R5 (session 15) driver: run the body, tar the results.
set -u
R=$PWD; O=$OUT
R=$R O=$O timeout 330 bash $R/bench/results/2026-12-03-h200-session15/callR5/callR5_body.sh
cd $O && tar czf callR5.tgz suite cli prof lab_fp8 call.log 2>/dev/null; rm -rf suite cli prof lab_fp8
