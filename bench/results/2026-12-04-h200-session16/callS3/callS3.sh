#!/usr/bin/env bash
# Device call S3 (session 16) driver: session 15's prepared gates run after the path rule change
# (body = the script as prepared, prediction in its header), results tarred. Carry .deps.
set -u
R=$PWD; O=$OUT
O=$O bash $R/bench/results/2026-12-04-h200-session16/callS3/callS3_body.sh
cd $O && tar czf callS3.tgz gates gates_driver.log && rm -rf gates
