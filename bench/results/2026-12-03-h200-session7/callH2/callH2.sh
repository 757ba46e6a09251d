#!/usr/bin/env bash
set -u
R=$PWD; O=$OUT; S=/tmp/snap; mkdir -p $S && tar xzf .snap/head.tgz -C $S && cd $S
O=$O timeout 400 bash $R/bench/results/2026-12-03-h200-session7/callH2/callH2_body.sh
