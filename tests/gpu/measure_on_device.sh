#!/usr/bin/env bash
# roofline --measure on the GPU in one command (issue 5, "Must show": predicted vs measured):
# builds the CLI with the CUDA backend, then times with cuBLAS, bf16 and fp8 (--dtype both),
#   - the four PERF.md shapes (qwen3-30b-a3b, gpt-oss-120b, mixtral-8x7b, deepseek-v3) in
#     prefill at T = 512, 4096, 16384 (batch 1, seq T), every distinct GEMM of the step;
#   - one model's whole training step (qwen3-30b-a3b and deepseek-v3, batch 1, seq 4096):
#     every dense GEMM, Fprop, Dgrad and Wgrad.
# Writes to $OUT (default ./gpu-out): one JSON per run (roofline_<model>_<mode>_T<T>.json, the
# raw rows to commit), measure.log (the runs' stderr and exit codes), and measure_table.md
# (every shape: predicted, measured, ratio, FP8 speedup; and the count within +-25%).
# The routed-expert rows are timed as one plain cuBLAS GEMM of the expected tokens per expert
# (rounded up); moefuse's own grouped path is not timed by --measure yet ("moefuse_ms": null).
# Stage "bench" times it instead with `moefuse bench` (the whole MoE layer forward: router,
# routing, grouped experts, shared expert; CUDA graph replay) at the same T: bench_<model>.json,
# set in the table beside the model's predicted GEMM time of one MoE layer (router + routed +
# shared experts, fprop), which leaves out routing and the elementwise work.
#
#   bash tests/gpu/measure_on_device.sh                 # build, measure, bench (not yet timed on a GPU)
#   STAGES="build measure" bash tests/gpu/measure_on_device.sh   # then STAGES="bench" on the same machine
#   MODELS="qwen3-30b-a3b" TOKENS="4096" bash tests/gpu/measure_on_device.sh
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
BUILD=${BUILD:-build-device}
JOBS=${JOBS:-$(nproc)}
MODELS=${MODELS:-"qwen3-30b-a3b gpt-oss-120b mixtral-8x7b deepseek-v3"}
TOKENS=${TOKENS:-"512 4096 16384"}
TRAIN_MODELS=${TRAIN_MODELS-"qwen3-30b-a3b deepseek-v3"}
TRAIN_SEQ=${TRAIN_SEQ:-4096}
STAGES=${STAGES:-"build measure bench"}
LOG=$OUT/measure.log
has() { [[ " $STAGES " == *" $1 "* ]]; }

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv >>"$LOG" 2>&1

# cJSON: the system's, else the copy carried in .deps/cjson (as run_on_device.sh does).
CJSON_ARGS=()
if [ ! -e /usr/include/cjson/cJSON.h ] && [ -e .deps/cjson/include/cjson/cJSON.h ]; then
    CJSON_ARGS=(-DCJSON_INCLUDE_DIR="$PWD/.deps/cjson/include" -DCJSON_LIBRARY="$PWD/.deps/cjson/lib/libcjson.so")
    export LD_LIBRARY_PATH="$PWD/.deps/cjson/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi

t0=$SECONDS
if has build && ! {
    cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DMOEFUSE_CUDA=ON "${CJSON_ARGS[@]}" &&
        cmake --build "$BUILD" -j "$JOBS" --target moefuse_cli
} >>"$LOG" 2>&1; then
    tail -n 40 "$LOG"
    echo "build failed (log: $LOG)"
    exit 1
fi
has build && echo "build: $((SECONDS - t0)) s" | tee -a "$LOG"
CLI=$BUILD/moefuse
[ -x "$CLI" ] || { echo "no $CLI: run the build stage first"; exit 1; }

failed=0
measure() { # model mode batch seq: one roofline --measure run, JSON to $OUT
    local model=$1 mode=$2 batch=$3 seq=$4
    local T=$((batch * seq))
    local out="$OUT/roofline_${model}_${mode}_T${T}.json"
    local t=$SECONDS
    timeout "${RUN_LIMIT:-240}" "$CLI" roofline --model "$model" --batch "$batch" --seq "$seq" --mode "$mode" \
        --gpu h200 --dtype both --measure --json >"$out" 2>>"$LOG"
    local rc=$?
    echo "$model $mode T=$T: rc=$rc in $((SECONDS - t)) s" | tee -a "$LOG"
    [ $rc -eq 0 ] || failed=1
}

if has measure; then
    for model in $MODELS; do
        for T in $TOKENS; do measure "$model" prefill 1 "$T"; done
    done
    for model in $TRAIN_MODELS; do measure "$model" train 1 "$TRAIN_SEQ"; done
fi
if has bench; then
    for model in $MODELS; do
        t=$SECONDS
        timeout "${BENCH_LIMIT:-150}" "$CLI" bench --model "$model" --tokens "$(echo $TOKENS | tr ' ' ',')" \
            --backend cuda --json --out "$OUT/bench_${model}.json" >/dev/null 2>>"$LOG"
        rc=$?
        echo "bench $model: rc=$rc in $((SECONDS - t)) s" | tee -a "$LOG"
        [ $rc -eq 0 ] || failed=1
    done
fi

# The table: every shape of every run, and how many fall within +-25% of the prediction.
python3 - "$OUT" >"$OUT/measure_table.md" 2>>"$LOG" <<'EOF'
import glob, json, os, sys

def f(v, fmt="%.4f"):
    return "-" if v is None else fmt % v

out = sys.argv[1]
print("# roofline --measure: predicted vs measured (cuBLAS), H200\n")
print("ratio = measured / predicted; fp8x = bf16 time / fp8 time (th: model, ach: measured). "
      "Routed-expert rows: one plain GEMM of the expected tokens per expert, rounded up; "
      "moefuse's grouped path not measured.\n")
for path in sorted(glob.glob(os.path.join(out, "roofline_*.json"))):
    try:
        doc = json.load(open(path))
    except (OSError, ValueError) as e:
        print("## %s: unreadable (%s)\n" % (os.path.basename(path), e))
        continue
    meas = doc.get("measured", {})
    print("## %s %s T=%d\n" % (doc["model"], doc["mode"], doc["tokens"]))
    print("| M | K | N | rows | kinds | pred bf16 ms | meas bf16 ms | ratio | pred fp8 ms | meas fp8 ms | ratio | fp8x th | fp8x ach |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for s in meas.get("shapes", []):
        b, e = s.get("bf16", {}), s.get("fp8", {})
        kinds = "expert" if s["routed_expert"] else "dense"
        print("| %d | %d | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            s["m"], s["k"], s["n"], ", ".join(s["names"]), kinds,
            f(b.get("predicted_ms")), f(b.get("measured_ms")), f(b.get("ratio"), "%.2f"),
            f(e.get("predicted_ms")), f(e.get("measured_ms")), f(e.get("ratio"), "%.2f"),
            f(s.get("fp8_speedup_theoretical"), "%.2f"), f(s.get("fp8_speedup_achieved"), "%.2f")))
        for d in ("bf16", "fp8"):
            if s.get(d, {}).get("error"):
                print("|  |  |  | %s not timed: %s |  |  |  |  |  |  |  |  |  |" % (d, s[d]["error"]))
    w = meas.get("within_25_percent", {})
    print("\nwithin +-25%%: %s\n" % ", ".join("%s %d of %d" % (d, v["within"], v["measured"]) for d, v in w.items()))
    # moefuse's layer forward (stage bench) beside the predicted GEMMs of one MoE layer.
    bench_path = os.path.join(out, "bench_%s.json" % doc["model"])
    if doc["mode"] != "prefill" or not os.path.exists(bench_path):
        continue
    try:
        rows = [r for r in json.load(open(bench_path))["rows"] if r["T"] == doc["tokens"]]
    except (OSError, ValueError, KeyError) as e:
        print("bench_%s.json unreadable (%s)\n" % (doc["model"], e))
        continue
    gemms = doc["gemms"]
    layers = [g["count"] for g in gemms if g["kind"] == "router" and g["pass"] == "fprop"]
    moe_kinds = ("router", "expert_gate_up", "expert_down", "shared_gate_up", "shared_down")
    predicted = sum(g["predicted_ms"] for g in gemms if g["kind"] in moe_kinds and g["pass"] == "fprop")
    if rows and layers and layers[0] > 0 and rows[0].get("ms"):
        per_layer = predicted / layers[0]
        print("moefuse layer forward (bench, %s): %.4f ms; predicted GEMMs of one MoE layer (router, routed and "
              "shared experts): %.4f ms; ratio %.2f\n" % (rows[0]["timing"], rows[0]["ms"], per_layer,
                                                          rows[0]["ms"] / per_layer))
EOF
echo "table: rc=$? ($OUT/measure_table.md)" | tee -a "$LOG"
tail -n 3 "$OUT/measure_table.md"
exit $failed
