#!/usr/bin/env bash
set -u
R=$PWD; O=$OUT; S=/tmp/snap; mkdir -p $S && tar xzf .snap/head.tgz -C $S && cp -r .deps $S/ && cd $S
O=$O BENCH_COMMIT=$(cat $R/.snap/commit) bash $R/.snap/callD_body.sh
cd $O && tar czf callD.tgz suite fp8 makerun call.log 2>/dev/null; rm -rf suite fp8 makerun
