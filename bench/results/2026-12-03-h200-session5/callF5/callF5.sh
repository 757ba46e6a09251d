#!/usr/bin/env bash
# Device call F5 (session 5): the landing code's GPU suite on PERF.md's shapes (both GEMM paths,
# bf16 and FP8, T = 1, 8, 64, 512, 4096) and racecheck on the Hopper bf16 GLU epilogue, after the
# GLU change (7aef10a's __expf/__fdividef); HEAD's archive in .snap.
set -u
R=$PWD; O=$OUT; S=/tmp/snap; mkdir -p $S && tar xzf .snap/head.tgz -C $S && cp -r .deps $S/ && cd $S
export LD_LIBRARY_PATH=$PWD/.deps/cjson/lib
echo "commit $(cat $R/.snap/commit)" > $O/call.log
t0=$SECONDS
mark() { echo "$1: rc=$2 at $((SECONDS - t0)) s; $(tail -n 1 $3 2>/dev/null)" >> $O/call.log; }
STAGES=build OUT=$O timeout 150 bash tests/gpu/run_on_device.sh > /dev/null 2>&1; mark build $? /dev/null
T=build-device/test_gpu_forward
timeout 240 $T --perf 1,8,64,512,4096 > $O/test_perf.log 2>&1; mark test_perf $? $O/test_perf.log
timeout 60 compute-sanitizer --error-exitcode 3 --tool racecheck $T --quick --gemm hopper --filter tma-swiglu-bias \
  > $O/racecheck_bf16_hopper.log 2>&1; mark racecheck_bf16_hopper $? $O/racecheck_bf16_hopper.log
mark done 0 /dev/null
