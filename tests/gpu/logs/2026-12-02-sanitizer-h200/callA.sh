#!/usr/bin/env bash
set -u
R=$PWD; O=$OUT; S=/tmp/snap; mkdir -p $S && tar xzf .snap/head.tgz -C $S && cp -r .deps $S/ && cd $S
O=$O bash $R/.snap/callA_body.sh
cd $O && tar czf callA.tgz suite probe measure call.log && rm -rf suite probe measure
