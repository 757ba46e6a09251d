#!/usr/bin/env bash
# Where the forward's time goes, kernel by kernel, on the GPU (the lent H200): builds
# bench_gpu_forward, then runs it under Nsight Compute for each PERF.md shape, token count and
# GEMM path (its first, eager forward is what gets profiled) and
# keeps each kernel's duration (gpu__time_duration; --clock-control none leaves the clocks as
# found, --cache-control all flushes caches before each kernel, so a kernel's time is its
# cold-cache time, an upper bound of what it costs inside the graph).
# Writes $OUT/profile.log (build + per-run status), $OUT/profile.tsv (model, T, gemm path,
# launch index, kernel, µs) and $OUT/profile.md (the first forward after warm-up, per run).
# DTYPE=fp8 (or fp8-tensor) profiles bench_gpu_forward's FP8 forward; METRICS="a,b" collects those
# ncu metrics too, into $OUT/metrics.tsv (model, T, gemm path, launch index, kernel, metric, value and unit).
#
#   MODELS="qwen3-30b-a3b" TOKENS="16384" bash tests/gpu/profile_on_device.sh
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
BUILD=${BUILD:-build-device}
MODELS=${MODELS:-"qwen3-30b-a3b gpt-oss-120b mixtral-8x7b deepseek-v3"}
TOKENS=${TOKENS:-"1 64 4096 16384"}
GEMMS=${GEMMS:-"v1 hopper"}
LOG=$OUT/profile.log
TSV=$OUT/profile.tsv

CJSON_ARGS=()
if [ ! -e /usr/include/cjson/cJSON.h ] && [ -e .deps/cjson/include/cjson/cJSON.h ]; then
    CJSON_ARGS=(-DCJSON_INCLUDE_DIR="$PWD/.deps/cjson/include" -DCJSON_LIBRARY="$PWD/.deps/cjson/lib/libcjson.so")
    export LD_LIBRARY_PATH="$PWD/.deps/cjson/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
t0=$SECONDS
if ! { cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DMOEFUSE_CUDA=ON "${CJSON_ARGS[@]}" &&
    cmake --build "$BUILD" -j "$(nproc)" --target bench_gpu_forward; } >>"$LOG" 2>&1; then
    tail -n 30 "$LOG"
    exit 1
fi
echo "build: $((SECONDS - t0)) s" | tee -a "$LOG"

printf 'model\tT\tgemm\tlaunch\tkernel\tus\n' >"$TSV"
printf 'model\tT\tgemm\tlaunch\tkernel\tmetric\tvalue\n' >"$OUT/metrics.tsv"
for model in $MODELS; do
    for T in $TOKENS; do
        for gemm in $GEMMS; do
            csv=$(mktemp)
            t=$SECONDS
            # The first 40 launches: the weight fills, the eager forward, the first replays.
            timeout "${RUN_LIMIT:-60}" ncu --clock-control none --metrics gpu__time_duration.sum${METRICS:+,$METRICS} --csv \
                --launch-count 40 "$BUILD/bench_gpu_forward" --shapes "$model" --tokens "$T" --gemm "$gemm" \
                ${DTYPE:+--dtype "$DTYPE"} \
                >"$csv" 2>>"$LOG"
            rc=$?
            echo "$model T=$T gemm=$gemm: rc=$rc in $((SECONDS - t)) s" | tee -a "$LOG"
            python3 - "$csv" "$model" "$T" "$gemm" "$OUT/metrics.tsv" >>"$TSV" 2>>"$LOG" <<'EOF'
import csv, sys
path, model, T, gemm, other = sys.argv[1:6]
other = open(other, "a")
lines = open(path, errors="replace").read().splitlines()
start = next((i for i, l in enumerate(lines) if l.startswith('"ID"')), None)
if start is not None:
    for row in csv.DictReader(lines[start:]):
        name = row["Kernel Name"].split("(")[0].replace("void ", "")[:60]
        if row.get("Metric Name") != "gpu__time_duration.sum":
            print(f"{model}\t{T}\t{gemm}\t{row['ID']}\t{name}\t{row.get('Metric Name')}\t{row['Metric Value']} {row.get('Metric Unit', '')}", file=other)
            continue
        v = float(row["Metric Value"].replace(",", ""))
        unit = row.get("Metric Unit", "")
        scale = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}.get(unit)
        if scale is None:
            sys.exit(f"unknown duration unit {unit!r}")
        us = v * scale
        print(f"{model}\t{T}\t{gemm}\t{row['ID']}\t{name}\t{us:.2f}")
EOF
            rm -f "$csv"
        done
    done
done

# One forward per run: the fills dropped, the launches from the first kernel up to its next
# occurrence (the eager forward before the graph capture).
python3 - "$TSV" >"$OUT/profile.md" 2>>"$LOG" <<'EOF'
import collections, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])][1:]
runs = collections.OrderedDict()
for m, T, g, i, k, us in rows:
    if k.startswith("fill"):
        continue
    runs.setdefault((m, T, g), []).append((k, float(us)))
print("# Kernel times of one forward (ncu, cold caches, clocks as found)\n")
for (m, T, g), ks in runs.items():
    first = ks[0][0]
    idx = [i for i, (k, _) in enumerate(ks) if k == first]
    a = 0
    b = idx[1] if len(idx) > 1 else len(ks)
    one = ks[a:b]
    total = sum(us for _, us in one)
    print(f"## {m} T={T} gemm={g}: {total:.1f} us in {len(one)} kernels\n")
    print("| kernel | us | share |\n|---|---|---|")
    for k, us in one:
        print(f"| {k} | {us:.1f} | {100 * us / total:.0f}% |")
    print()
EOF
echo "profile: $(grep -c '^## ' "$OUT/profile.md") runs summarised in $OUT/profile.md" | tee -a "$LOG"
