#!/usr/bin/env bash
# Device call S1 (session 16) driver: session 15's prepared fp8v3 lab run (body = the script as
# prepared, prediction in its header), results tarred.
set -u
R=$PWD; O=$OUT
O=$O timeout 420 bash $R/bench/results/2026-12-04-h200-session16/callS1/callS1_body.sh
cd $O && tar czf callS1.tgz lab_1 lab_2 lab_3 lab_*.log ncu_fp8v3.txt fp8v3_summary.md call.log 2>/dev/null; rm -rf lab_1 lab_2 lab_3
