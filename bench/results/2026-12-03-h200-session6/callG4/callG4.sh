#!/usr/bin/env bash
# Device call G4 (session 6) driver: unpack HEAD's archive, run the body, tar the results.
set -u
R=$PWD; O=$OUT; S=/tmp/snap; mkdir -p $S && tar xzf .snap/head.tgz -C $S && cp -r .deps $S/ && cd $S
O=$O timeout 585 bash $R/.snap/callG4_body.sh
cd $O && tar czf callG4.tgz suite call.log 2>/dev/null; rm -rf suite
