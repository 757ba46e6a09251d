#!/usr/bin/env bash
# Device call R4 (session 15) driver: run the body, tar the results.
set -u
R=$PWD; O=$OUT
R=$R O=$O timeout 400 bash $R/bench/results/2026-12-03-h200-session15/callR4/callR4_body.sh
cd $O && tar czf callR4.tgz fwd build call.log build_stdout.log 2>/dev/null; rm -rf fwd build
