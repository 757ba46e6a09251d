#!/usr/bin/env bash
# The GPU suite in one command, on a machine with an NVIDIA GPU (the lent H200):
# build, the GPU test, the test under compute-sanitizer (memcheck, racecheck) on reduced case
# lists, and the benchmark (moefuse vs torch._grouped_mm). Logs go to $OUT (default
# ./gpu-out). Each stage has a time limit so the whole run fits one device call.
# The test runs every model case on both grouped-GEMM paths (v1 and hopper, see
# moe__cuda_gemm_select); the bench times both on PERF.md's four shapes and cross-checks the
# hopper y against the v1 y. Order: build, test --quick, bench, the full test, sanitizers, the
# torch peer (the moefuse numbers and the quick verdict come first if time runs out).
# At most 8 files come back from a device call: build.log, test_quick.log, bench_moefuse.log,
# test_gpu_forward.log (--perf), bench_torch.log, bench.json, bench.md (+ sanitizer logs if asked).
#
#   bash tests/gpu/run_on_device.sh            # everything
#   STAGES="build test bench" bash tests/gpu/run_on_device.sh   # < 6 minutes on the H200
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
            cmake --build "$BUILD" -j "$JOBS" --target test_gpu_forward bench_gpu_forward test_gpu_wgrad
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
t_start=$SECONDS
has test && stage test_quick "${QUICK_LIMIT:-60}" "$T" --quick
# The K-grouped GEMM (weight gradients) against its oracle.
has test && stage test_gpu_wgrad "${WGRAD_LIMIT:-60}" "$BUILD/test_gpu_wgrad"
# The FP8 list again with GEMM1's epilogue quantising A2 (the opt-in path, MOEFUSE_FP8_A2=epilogue).
has test && stage test_fp8_a2_epilogue "${QUICK_LIMIT:-60}" env MOEFUSE_FP8_A2=epilogue "$T" --quick --filter fp8
if has bench; then
    # The moefuse rows go to /tmp, merged into bench.json by the torch peer below.
    rows=${TMPDIR:-/tmp}/moefuse_rows.jsonl
    stage bench_moefuse "${BENCH_LIMIT:-100}" "$BUILD/bench_gpu_forward" --tokens "${BENCH_TOKENS:-512,4096,16384}" \
        --gemm v1,hopper --json "$rows"
fi
# PERF.md's shapes (real H and I, fewer experts) at T = 8, 4096, 512, 129 on both paths; the
# full list (TEST_ARGS=" ") runs every case twice and may not fit beside the bench. 240 s: the CPU
# oracle of the FP8 cases is the slow part, and 130 s cut the list after 58 cases on an H100
# (bench/results/2026-12-05-session36/call7/suite/test_gpu_forward.log).
has test && stage test_gpu_forward "${TEST_LIMIT:-240}" "$T" ${TEST_ARGS:---perf 8,4096,512,129}
# memcheck: the quick list, then one PERF.md shape at every T (qwen3-30b-a3b, real H and I).
has memcheck && stage memcheck "${MEMCHECK_LIMIT:-150}" bash -c "compute-sanitizer --tool memcheck --leak-check no \
    --error-exitcode 3 $T --quick && compute-sanitizer --tool memcheck --leak-check no --error-exitcode 3 \
    $T --filter qwen3-30b-a3b"
# racecheck: a fused-shared preset and relu2-bias (v1 only: I = 40), each on both paths' selection.
has racecheck && stage racecheck "${RACECHECK_LIMIT:-90}" bash -c "compute-sanitizer --tool racecheck \
    --error-exitcode 3 $T --quick --filter deepseek-v3-small && compute-sanitizer --tool racecheck \
    --error-exitcode 3 $T --filter relu2-bias"
if has bench; then
    PYTHONUNBUFFERED=1 stage bench_torch "${TORCH_LIMIT:-75}" python3 tests/gpu/bench_torch_peer.py \
        "$rows" "$OUT/bench.json" "$OUT/bench.md" "${BENCH_TOKENS:-512,4096,16384}"
fi
summary+=("after the build: $((SECONDS - t_start)) s")
printf '%s\n' "${summary[@]}" | tee -a "$OUT/build.log"
