#!/usr/bin/env bash
set -u
R=$PWD; O=$OUT; S=/tmp/snap; mkdir -p $S && tar xzf .snap/head.tgz -C $S && cp -r .deps $S/ && cd $S
O=$O BENCH_COMMIT=$(cat $R/.snap/commit) bash $R/.snap/callC2_body.sh
cd $O && tar czf callC2.tgz bf16 fp8 untuned v1vs measure makerun call.log 2>/dev/null; rm -rf bf16 fp8 untuned v1vs measure makerun
