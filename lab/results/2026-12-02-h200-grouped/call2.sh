#!/usr/bin/env bash
# Device call 2 of session 2, on a git archive of ec4f439.
set -u
O=$OUT; S=/tmp/snap; mkdir -p $S && tar xzf .snap/head.tgz -C $S && cp -r .deps $S/ && cd $S
export LAB_COMMIT=ec4f439
t0=$SECONDS
OUT=$O/grp LAB_LIMIT=150 QUICK_LIMIT=70 TEST_LIMIT=120 TEST_ARGS="--perf 1,8,64,512,4096" timeout 400 bash lab/run_grouped_on_device.sh > $O/grp.out 2>&1
echo "grouped+suite: rc=$? at $((SECONDS - t0)) s" >> $O/call.log
export LD_LIBRARY_PATH=$PWD/.deps/cjson/lib
B=build-device
timeout 60 $B/bench_gpu_forward --tokens 1,8,64 --gemm v1 > $O/decode_bench.log 2>&1
echo "decode bench: rc=$? at $((SECONDS - t0)) s" >> $O/call.log
MOEFUSE_V1_TILE=wide timeout 50 $B/bench_gpu_forward --tokens 1,8,64 --gemm v1 > $O/decode_bench_wide.log 2>&1
echo "decode bench wide: rc=$? at $((SECONDS - t0)) s" >> $O/call.log
for v in "decode 64 2" "decode 128 1"; do set -- $v; echo "== $1 BN=$2 MT=$3"; MOEFUSE_V1_TILE=$1 MOEFUSE_V1_DECODE_BN=$2 MOEFUSE_V1_DECODE_MT=$3 timeout 40 $B/test_gpu_forward --quick --gemm v1 | tail -3; done > $O/decode_variants.log 2>&1
echo "decode variants: at $((SECONDS - t0)) s" >> $O/call.log
cd $O && tar czf call2.tgz grp *.log *.out && rm -rf grp
