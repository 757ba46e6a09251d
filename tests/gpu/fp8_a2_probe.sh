#!/usr/bin/env bash
# Builds libmoefuse (cmake, $BUILD, default build-device) and tests/gpu/fp8_a2_probe.c with the
# suite's gpu_test_data.c (cc against libmoefuse and cudart; not a cmake target: CMakeLists.txt
# builds only tests/gpu/test_* and bench_*), runs the probe's host-only --selftest, then the
# probe (default 6 trials, ~seconds): the fp32 A2, A2 codes and scale of
# fp8-relu2-stale-rows-tensor on MOEFUSE_GEMM=v1 and =hopper against the exact A2 (see the header
# of fp8_a2_probe.c for how to read its lines). The log goes to $OUT/fp8_a2_probe.log (default
# ./gpu-out) and to stdout. Carry .deps (tests/gpu/prepare_deps.sh) when the device image lacks
# cJSON.
#
#   OUT=$OUT bash tests/gpu/fp8_a2_probe.sh [trials]     # exit: the probe's (0 precision, 1 BUG)
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-out}
BUILD=${BUILD:-build-device}
mkdir -p "$OUT"
CJSON_ARGS=()
if [ ! -e /usr/include/cjson/cJSON.h ] && [ -e .deps/cjson/include/cjson/cJSON.h ]; then
    CJSON_ARGS=(-DCJSON_INCLUDE_DIR="$PWD/.deps/cjson/include" -DCJSON_LIBRARY="$PWD/.deps/cjson/lib/libcjson.so")
    export LD_LIBRARY_PATH="$PWD/.deps/cjson/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
# The probe is C (it builds on test_gpu_forward's gpu_test_data.c, as cmake builds that test: the
# C compiler with the CUDA runtime); nvcc only locates the toolkit.
CUDA_HOME=${CUDA_HOME:-$(dirname "$(dirname "$(command -v nvcc)")")}
t0=$SECONDS
{
    cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DMOEFUSE_CUDA=ON "${CJSON_ARGS[@]}" &&
        cmake --build "$BUILD" -j "$(nproc)" --target moefuse &&
        "${CC:-cc}" -std=gnu11 -O2 -Wall -Wextra -Iinclude -Isrc/core -Isrc/cuda -I"$CUDA_HOME/include" \
            tests/gpu/fp8_a2_probe.c tests/gpu/gpu_test_data.c -o "$BUILD/fp8_a2_probe" \
            -L"$BUILD" -L"$CUDA_HOME/lib64" -lmoefuse -lcudart -lm \
            -Wl,-rpath,"$PWD/$BUILD"
} >"$OUT/fp8_a2_probe_build.log" 2>&1
rc=$?
echo "build: rc=$rc in $((SECONDS - t0)) s"
if [ $rc -ne 0 ]; then
    tail -n 30 "$OUT/fp8_a2_probe_build.log"
    exit 2
fi
# The analysis itself first (host only, < 1 s): a clean readback must read ok, planted bugs BUG.
"$BUILD/fp8_a2_probe" --selftest >"$OUT/fp8_a2_probe_selftest.log" 2>&1
echo "selftest: rc=$? ($(tail -n 1 "$OUT/fp8_a2_probe_selftest.log"))"
timeout "${PROBE_LIMIT:-240}" "$BUILD/fp8_a2_probe" "$@" 2>&1 | tee "$OUT/fp8_a2_probe.log"
exit "${PIPESTATUS[0]}"
