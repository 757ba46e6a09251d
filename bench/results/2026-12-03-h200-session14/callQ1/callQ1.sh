#!/usr/bin/env bash
# Device call Q1 (session 14) driver: the lab binary built here (carried: .snap/grouped_lab = feaf542), the
# base lab (baa5080's kernel) built there from the tree with skip.patch reversed; the library built there twice (feaf542, and with
# skip.patch reversed); run the body, tar the results.
set -u
R=$PWD; O=$OUT
R=$R O=$O timeout 585 bash $R/bench/results/2026-12-03-h200-session14/callQ1/callQ1_body.sh
cd $O && tar czf callQ1.tgz lab suite fwd call.log 2>/dev/null; rm -rf lab suite fwd
