#!/usr/bin/env bash
# Device call G1 (session 6) driver: unpack HEAD's and 35365d0's archives, run the body, tar the results.
set -u
R=$PWD; O=$OUT; S=/tmp/snap; mkdir -p $S /tmp/old && tar xzf .snap/head.tgz -C $S && tar xzf .snap/old.tgz -C /tmp/old \
  && cp -r .deps $S/ && cp -r .deps /tmp/old/ && cd $S
O=$O timeout 585 bash $R/.snap/callG1_body.sh
cd $O && tar czf callG1.tgz suite fwd measure glab glab_fp8 ncu call.log 2>/dev/null; rm -rf suite fwd measure glab glab_fp8 ncu
