#!/usr/bin/env bash
# Call W1 (session 22): the two scripts session 21 prepared, one device call. Predictions are in
# their headers. From the repo root, carry .deps:  O=$OUT timeout 585 bash <this>
set -u
D=bench/results/2026-12-04-h200-session22
O=${O:-$OUT}
O=$O/wgrad timeout 330 bash $D/callW1a_wgrad_pingpong.sh
O=$O/fp8 timeout 240 bash $D/callW1b_fp8_stalls.sh
