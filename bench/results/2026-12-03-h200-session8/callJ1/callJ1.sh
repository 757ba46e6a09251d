#!/usr/bin/env bash
# Device call J1 (session 8), from the repo root of the device copy: runs the body on the snapshot.
set -u
R=$PWD; O=$OUT; S=/tmp/snap; mkdir -p $S/.snap && tar xzf .snap/head.tgz -C $S && cp .snap/tables.tgz .snap/base.tgz $S/.snap/ && cd $S
O=$O timeout 560 bash $R/bench/results/2026-12-03-h200-session8/callJ1/callJ1_body.sh
