#!/usr/bin/env bash
# Device call R2 (session 15) driver: run the body, tar the results.
set -u
R=$PWD; O=$OUT
R=$R O=$O timeout 570 bash $R/bench/results/2026-12-03-h200-session15/callR2/callR2_body.sh
cd $O && tar czf callR2.tgz lab fwd prof build call.log gpu.txt build_stdout.log 2>/dev/null; rm -rf lab fwd prof build
