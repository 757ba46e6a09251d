#!/usr/bin/env bash
set -u
R=$PWD; O=$OUT; S=/tmp/snap; mkdir -p $S && tar xzf .snap/head.tgz -C $S && cd $S
O=$O timeout 300 bash $R/bench/results/2026-12-03-h200-session7/callH1/callH1_body.sh
