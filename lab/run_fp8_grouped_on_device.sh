#!/usr/bin/env bash
# The Hopper grouped FP8 path (src/cuda/gemm_hopper_fp8.cu) on the device, in one command:
#
#   OUT=$OUT bash lab/run_fp8_grouped_on_device.sh      # carry .deps (tests/gpu/prepare_deps.sh)
#
# Builds the suite and the bench (tests/gpu/run_on_device.sh's build stage), then
#   fp8_suite.log  test_gpu_forward --filter fp8: every FP8 case vs the CPU oracle, v1 pass then
#                  hopper pass (cases whose forced-hopper run would fall back to v1 are skipped
#                  there); each line names the path that ran and its err; the hopper-path
#                  tolerance carries a predicted wgmma-accumulation term (fp8_tolerance)
#   fp8_bench.log  bench_gpu_forward --dtype fp8 --tokens 512,4096,16384, v1 then hopper per
#                  (shape, T), the hopper y vs the v1 y in the last column
# and prints the summary lines. About 2-3 minutes with the build.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/fp8-out}
mkdir -p "$OUT"
BUILD=${BUILD:-build-device}
STAGES=build OUT="$OUT" BUILD="$BUILD" bash tests/gpu/run_on_device.sh || exit 1
[ -d .deps/cjson/lib ] && export LD_LIBRARY_PATH="$PWD/.deps/cjson/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
t0=$SECONDS
timeout "${SUITE_LIMIT:-130}" "$BUILD/test_gpu_forward" --filter fp8 >"$OUT/fp8_suite.log" 2>&1
echo "fp8 suite: rc=$? in $((SECONDS - t0)) s; $(grep -c '^FAIL' "$OUT/fp8_suite.log") FAIL lines; $(tail -n 2 "$OUT/fp8_suite.log" | tr '\n' ' ')"
t0=$SECONDS
timeout "${BENCH_LIMIT:-60}" "$BUILD/bench_gpu_forward" --dtype fp8 --tokens 512,4096,16384 --gemm v1,hopper \
    >"$OUT/fp8_bench.log" 2>&1
echo "fp8 bench: rc=$? in $((SECONDS - t0)) s"
cat "$OUT/fp8_bench.log"
