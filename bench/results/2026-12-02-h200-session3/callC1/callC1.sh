#!/usr/bin/env bash
set -u
R=$PWD; O=$OUT; S=/tmp/snap; mkdir -p $S && tar xzf .snap/head.tgz -C $S && cp -r .deps $S/ && cd $S
O=$O bash $R/.snap/callC1_body.sh
cd $O && tar czf callC1.tgz suite call.log && rm -rf suite
