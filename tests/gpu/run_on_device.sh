#!/usr/bin/env bash
# The GPU suite in one command, on a machine with an NVIDIA GPU (the lent H200):
# build, the GPU test, the test under compute-sanitizer (memcheck, racecheck) on reduced case
# lists, and the benchmark (moefuse vs torch._grouped_mm). Logs go to $OUT (default
# ./gpu-out). Each stage has a time limit so the whole run fits one device call.
#
#   bash tests/gpu/run_on_device.sh            # everything
#   STAGES="build test" bash tests/gpu/run_on_device.sh
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
STAGES=${STAGES:-"build test memcheck racecheck bench"}
BUILD=${BUILD:-build-device}
JOBS=${JOBS:-$(nproc)}
summary=()
has() { [[ " $STAGES " == *" $1 "* ]]; }
stage() { # name, seconds, command...: runs with a time limit, logs to $OUT/name.log
    local name=$1 limit=$2
    shift 2
    local t0=$SECONDS
    timeout "$limit" "$@" >"$OUT/$name.log" 2>&1
    local rc=$?
    summary+=("$name: rc=$rc in $((SECONDS - t0)) s; $(tail -n 1 "$OUT/$name.log")")
    return $rc
}

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv >"$OUT/build.log" 2>&1

# cJSON: the system's, else the copy carried in .deps/cjson (headers and libcjson.so.1).
CJSON_ARGS=()
if [ ! -e /usr/include/cjson/cJSON.h ] && [ -e .deps/cjson/include/cjson/cJSON.h ]; then
    CJSON_ARGS=(-DCJSON_INCLUDE_DIR="$PWD/.deps/cjson/include" -DCJSON_LIBRARY="$PWD/.deps/cjson/lib/libcjson.so")
    export LD_LIBRARY_PATH="$PWD/.deps/cjson/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi

if has build; then
    t0=$SECONDS
    {
        cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DMOEFUSE_CUDA=ON "${CJSON_ARGS[@]}" &&
            cmake --build "$BUILD" -j "$JOBS" --target test_gpu_forward bench_gpu_forward
    } >>"$OUT/build.log" 2>&1
    rc=$?
    summary+=("build: rc=$rc in $((SECONDS - t0)) s")
    if [ $rc -ne 0 ]; then
        tail -n 40 "$OUT/build.log"
        printf '%s\n' "${summary[@]}"
        exit 1
    fi
fi

T=$BUILD/test_gpu_forward
has test && stage test_gpu_forward "${TEST_LIMIT:-240}" "$T" ${TEST_ARGS:---big}
# memcheck: the quick list, then one PERF.md shape at every T (qwen3-30b-a3b, real H and I).
has memcheck && stage memcheck "${MEMCHECK_LIMIT:-150}" bash -c "compute-sanitizer --tool memcheck --leak-check no \
    --error-exitcode 3 $T --quick && compute-sanitizer --tool memcheck --leak-check no --error-exitcode 3 \
    $T --filter qwen3-30b-a3b"
# racecheck: a fused-shared preset (64-row tile) and relu2-bias (its T=600 runs the 128-row tile).
has racecheck && stage racecheck "${RACECHECK_LIMIT:-90}" bash -c "compute-sanitizer --tool racecheck \
    --error-exitcode 3 $T --quick --filter deepseek-v3-small && compute-sanitizer --tool racecheck \
    --error-exitcode 3 $T --filter relu2-bias"
if has bench; then
    # At most 8 files come back from a device call: the moefuse rows go to /tmp, merged into bench.json.
    rows=${TMPDIR:-/tmp}/moefuse_rows.jsonl
    stage bench_moefuse "${BENCH_LIMIT:-100}" "$BUILD/bench_gpu_forward" --json "$rows"
    PYTHONUNBUFFERED=1 stage bench_torch "${BENCH_LIMIT:-100}" python3 tests/gpu/bench_torch_peer.py \
        "$rows" "$OUT/bench.json" "$OUT/bench.md"
fi
printf '%s\n' "${summary[@]}"
