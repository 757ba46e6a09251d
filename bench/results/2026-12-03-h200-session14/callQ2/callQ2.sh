#!/usr/bin/env bash
# Device call Q2 (session 14) driver: the library built there twice (60d366c, and with q2.patch
# reversed: baa5080's src/); run the body, tar the results.
set -u
R=$PWD; O=$OUT
R=$R O=$O timeout 585 bash $R/bench/results/2026-12-03-h200-session14/callQ2/callQ2_body.sh
cd $O && tar czf callQ2.tgz suite fwd call.log 2>/dev/null; rm -rf suite fwd
