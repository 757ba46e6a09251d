#!/usr/bin/env bash
# Device call G1 (session 6) driver: unpack the archives of HEAD, 646e7b7 (mid) and 35365d0 (old),
# run the body, tar the results.
set -u
R=$PWD; O=$OUT; S=/tmp/snap; mkdir -p $S /tmp/old /tmp/mid && tar xzf .snap/head.tgz -C $S \
  && tar xzf .snap/old.tgz -C /tmp/old && tar xzf .snap/mid.tgz -C /tmp/mid \
  && cp -r .deps $S/ && cp -r .deps /tmp/old/ && cp -r .deps /tmp/mid/ && cd $S
O=$O timeout 585 bash $R/.snap/callG1_body.sh
cd $O && tar czf callG1.tgz suite fwd measure glab ncu call.log 2>/dev/null; rm -rf suite fwd measure glab ncu
