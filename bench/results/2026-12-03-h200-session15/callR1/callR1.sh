#!/usr/bin/env bash
# Device call R1 (session 15) driver: session 14's prepared follow-up, unchanged
# (bench/results/next-session/session14_followup.sh; its header holds the prediction, written
# in session 14 before any run): the bf16 bench with every peer on the gather rule, racecheck of
# --quick --gemm hopper, the suite without --quick on --gemm hopper. Results tarred.
set -u
R=$PWD; O=$OUT
O=$O timeout 560 bash $R/bench/results/next-session/session14_followup.sh
cd $O && tar czf callR1.tgz bf16 suite bf16_run.log call.log 2>/dev/null; rm -rf bf16 suite
