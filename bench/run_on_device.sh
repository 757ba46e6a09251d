#!/usr/bin/env bash
# The bench in one command on the GPU machine (the lent H200): build libmoefuse with CUDA
# (incremental when $BUILD is already there), then bench/bench_moe.py in one process with the
# library it just built. The JSON, its markdown table and the full log go to $OUT.
#
#   OUT=/some/dir bash bench/run_on_device.sh                 # the default run (bf16, ~4 minutes)
#   OUT=/some/dir bash bench/run_on_device.sh --dtype fp8     # the FP8 rows (<date>-h200-bench-fp8.json)
#   bash bench/run_on_device.sh --quick --shapes qwen3-30b-a3b  # extra arguments go to bench_moe.py
#
# Needs python3 with torch (CUDA) on the machine, and cJSON: the system's, else the copy in
# .deps/cjson (ignored by git: carry it to the device machine).
# Time: TOTAL_S (default 560, inside the device's 600 s per command) is the whole command's;
# after the build, bench_moe gets BENCH_BUDGET_S (default: what is left less 40 s) to start
# new rows in, and is killed at BENCH_LIMIT (default: what is left less 5 s). The JSON and
# markdown, rewritten after every row, are kept either way.
set -u
cd "$(dirname "$0")/.." || exit 1
OUT=${OUT:-$PWD/bench-out}
mkdir -p "$OUT"
BUILD=${BUILD:-build-device}
JOBS=${JOBS:-$(nproc)}
LOG=$OUT/bench.log
t0=$SECONDS

{
    date -u
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.used,memory.total --format=csv
    python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)"
} >"$LOG" 2>&1

# cJSON: the system's, else the copy carried in .deps/cjson (headers and libcjson.so.1).
CJSON_ARGS=()
if [ ! -e /usr/include/cjson/cJSON.h ] && [ -e .deps/cjson/include/cjson/cJSON.h ]; then
    CJSON_ARGS=(-DCJSON_INCLUDE_DIR="$PWD/.deps/cjson/include" -DCJSON_LIBRARY="$PWD/.deps/cjson/lib/libcjson.so")
    export LD_LIBRARY_PATH="$PWD/.deps/cjson/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi

{
    cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DMOEFUSE_CUDA=ON "${CJSON_ARGS[@]}" &&
        cmake --build "$BUILD" -j "$JOBS" --target moefuse
} >"$OUT/build.log" 2>&1
rc=$?
if [ $rc -ne 0 ] || [ ! -e "$BUILD/libmoefuse.so" ]; then
    tail -n 40 "$OUT/build.log"
    echo "run_on_device: FATAL: building libmoefuse failed (rc=$rc, log $OUT/build.log)"
    exit 1
fi
echo "build: ok in $((SECONDS - t0)) s" | tee -a "$LOG"

export MOEFUSE_LIB=$PWD/$BUILD/libmoefuse.so
export PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH}
if [ -z "${BENCH_COMMIT:-}" ]; then
    BENCH_COMMIT=$(git rev-parse HEAD 2>/dev/null || true)
    [ -n "$BENCH_COMMIT" ] && [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ] &&
        BENCH_COMMIT="$BENCH_COMMIT-dirty"
    export BENCH_COMMIT
fi

left=$((${TOTAL_S:-560} - (SECONDS - t0)))
BENCH_BUDGET_S=${BENCH_BUDGET_S:-$((left - 40))}
BENCH_LIMIT=${BENCH_LIMIT:-$((left - 5))}
if [ "$BENCH_BUDGET_S" -lt 30 ]; then
    echo "run_on_device: FATAL: only $left s left of TOTAL_S=${TOTAL_S:-560} after the build" | tee -a "$LOG"
    exit 1
fi
# The JSON's name says the dtype (the default --out unless the arguments give one).
stem="$(date -u +%F)-h200-bench"
prev=""
for arg in "$@"; do
    case "$prev=$arg" in --dtype=fp8 | *=--dtype=fp8) stem="$stem-fp8" ;; esac
    prev=$arg
done
echo "bench: budget $BENCH_BUDGET_S s for new rows, killed at $BENCH_LIMIT s" | tee -a "$LOG"
PYTHONUNBUFFERED=1 timeout "$BENCH_LIMIT" python3 bench/bench_moe.py \
    --out "$OUT/$stem.json" --budget-s "$BENCH_BUDGET_S" "$@" 2>&1 | tee -a "$LOG"
rc=${PIPESTATUS[0]}
note=""
[ "$rc" -eq 124 ] && note=" (killed at BENCH_LIMIT=$BENCH_LIMIT s; rows written before are kept)"
echo "run_on_device: bench_moe rc=$rc$note; total $((SECONDS - t0)) s; outputs in $OUT" | tee -a "$LOG"
exit "$rc"
