#!/usr/bin/env bash
# Device call J5 (session 8): roofline --measure on the commit that times the FP8 decode launches on
# the swapped kernel (the last ~270 s of the session's budget).
# Prediction (before the run): measure runs clean (rc 0); the FP8 grouped rows at decode sizes come
# out faster than run 7's tiled times, so the model (which models the 128x128 tiles) is more
# pessimistic there; grouped fp8 still >= 26 of 28 within +-25%.
set -u
R=$PWD; O=$OUT; S=/tmp/snap; mkdir -p $S && tar xzf .snap/head.tgz -C $S && cp -r .deps $S/ && cd $S
export LD_LIBRARY_PATH=$PWD/.deps/cjson/lib
mkdir -p $O/measure
OUT=$O/measure STAGES="build measure" DEADLINE=60 timeout 130 bash tests/gpu/measure_on_device.sh > $O/measure/stdout.log 2>&1
echo "measure rc=$?" > $O/call.log
cd $O && tar czf callJ5.tgz measure call.log && rm -rf measure
