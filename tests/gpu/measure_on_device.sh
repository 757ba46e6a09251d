#!/usr/bin/env bash
# roofline --measure on the GPU in one command (issue 5, "Must show": predicted vs measured):
# builds the CLI with the CUDA backend, then times with cuBLAS, bf16 and fp8 (--dtype both),
#   - the four PERF.md shapes (qwen3-30b-a3b, gpt-oss-120b, mixtral-8x7b, deepseek-v3) in
#     prefill at T = 512, 4096, 16384 (batch 1, seq T), every distinct GEMM of the step;
#   - whole training steps (qwen3-30b-a3b, then deepseek-v3; batch 1, seq 4096): every dense
#     GEMM, Fprop, Dgrad and Wgrad.
# The routed-expert rows are timed as one plain cuBLAS GEMM of the expected tokens per expert
# (rounded up), and (moefuse_ms) as moefuse's own grouped launch of one layer (GEMM1 gate_up or
# GEMM2 down over the touched experts, on the path the forward picks), against the model's time
# for that grouped launch; the other shapes on moefuse's Hopper dense engine, against the model's
# time for that engine (`moefuse roofline --dense`). The table counts the
# routed-expert shapes at T >= 512 whose moefuse time is within +-25% of that prediction.
# Stage "bench" times the whole layer with `moefuse bench` (the MoE layer forward: router,
# routing, grouped experts, shared expert; CUDA graph replay) at the same T: bench_<model>.json,
# set in the table beside the model's predicted GEMM time of one MoE layer (router + routed +
# shared experts, fprop), which leaves out routing and the elementwise work.
#
# Fits one device call: everything, build included, ends by DEADLINE seconds (default 520)
# after the start; each run has its own limit too (RUN_LIMIT, BENCH_LIMIT) and a run that would
# start too late is skipped (logged). Three files come back in $OUT (default ./gpu-out):
#   measure.log           the runs' stderr and exit codes (a shape not timed is named there), and
#                         cuBLASLt's own error log if it wrote one (CUBLASLT_LOG_LEVEL=1)
#   measure_table.md      every shape: predicted, measured (cuBLAS), ratio, FP8 speedup, moefuse's
#                         kernel's time and ratio; the +-25% counts
#   measure_json.tar.gz   the raw JSONs to commit: roofline_<model>_<mode>_T<T>.json, bench_<model>.json
#                         (re-packed after every run, so a cut-off run still leaves the others)
# Exit status: 0 when every run exited 0 (every shape and dtype timed), else 1.
#
#   bash tests/gpu/measure_on_device.sh                 # build, measure, bench
#   STAGES="build measure" bash tests/gpu/measure_on_device.sh
#   MODELS="qwen3-30b-a3b" TOKENS="4096" TRAIN_MODELS="" bash tests/gpu/measure_on_device.sh
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
DEADLINE=${DEADLINE:-520}  # seconds from the start; the table and the archive need RESERVE more
RESERVE=${RESERVE:-15}
RUN_LIMIT=${RUN_LIMIT:-90}
BENCH_LIMIT=${BENCH_LIMIT:-60}
LOG=$OUT/measure.log
JSON_DIR=$BUILD/measure-json # raw JSONs, packed into $OUT/measure_json.tar.gz
LT_LOG_DIR=$BUILD/measure-cublaslt-log
ARCHIVE=$OUT/measure_json.tar.gz
has() { [[ " $STAGES " == *" $1 "* ]]; }
left() { echo $((DEADLINE - RESERVE - SECONDS)); }
pack() { tar -czf "$ARCHIVE" -C "$JSON_DIR" . 2>>"$LOG"; }

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv >>"$LOG" 2>&1

# cJSON: the system's, else the copy carried in .deps/cjson (as run_on_device.sh does).
CJSON_ARGS=()
if [ ! -e /usr/include/cjson/cJSON.h ] && [ -e .deps/cjson/include/cjson/cJSON.h ]; then
    CJSON_ARGS=(-DCJSON_INCLUDE_DIR="$PWD/.deps/cjson/include" -DCJSON_LIBRARY="$PWD/.deps/cjson/lib/libcjson.so")
    export LD_LIBRARY_PATH="$PWD/.deps/cjson/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi

if has build && ! {
    cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DMOEFUSE_CUDA=ON "${CJSON_ARGS[@]}" &&
        timeout "$(left)" cmake --build "$BUILD" -j "$JOBS" --target moefuse_cli
} >>"$LOG" 2>&1; then
    tail -n 40 "$LOG"
    echo "build failed (log: $LOG)"
    exit 1
fi
has build && echo "build: $SECONDS s" | tee -a "$LOG"
CLI=$BUILD/moefuse
[ -x "$CLI" ] || { echo "no $CLI: run the build stage first"; exit 1; }
rm -rf "$JSON_DIR" "$LT_LOG_DIR"
mkdir -p "$JSON_DIR" "$LT_LOG_DIR"
# cuBLASLt's own error log (level 1: errors only; it says why a call returned NOT_SUPPORTED),
# one file per process, appended to measure.log at the end.
export CUBLASLT_LOG_LEVEL=1 CUBLASLT_LOG_FILE="$LT_LOG_DIR/cublaslt_%i.log"

failed=0
# run NAME LIMIT STDOUT COMMAND...: with the smaller of LIMIT and the time left, stdout to the file
# STDOUT, stderr to the log; skipped when under 5 s remain.
run() {
    local name=$1 limit=$2 stdout=$3 t=$SECONDS
    shift 3
    if [ "$(left)" -lt 5 ]; then
        echo "$name: skipped (deadline of $DEADLINE s reached)" | tee -a "$LOG"
        failed=1
        return
    fi
    [ "$limit" -gt "$(left)" ] && limit=$(left)
    timeout "$limit" "$@" >"$stdout" 2>>"$LOG"
    local rc=$?
    echo "$name: rc=$rc in $((SECONDS - t)) s" | tee -a "$LOG"
    [ $rc -eq 0 ] || failed=1
    pack
}
measure() { # model mode batch seq: one roofline --measure run, its JSON to $JSON_DIR
    local model=$1 mode=$2 batch=$3 seq=$4 T=$(($3 * $4))
    run "$model $mode T=$T" "$RUN_LIMIT" "$JSON_DIR/roofline_${model}_${mode}_T${T}.json" \
        "$CLI" roofline --model "$model" --batch "$batch" --seq "$seq" --mode "$mode" --gpu h200 --dtype both \
        --measure --json
}

if has measure; then
    for model in $MODELS; do
        for T in $TOKENS; do measure "$model" prefill 1 "$T"; done
    done
    for model in $TRAIN_MODELS; do measure "$model" train 1 "$TRAIN_SEQ"; done
fi
if has bench; then
    for model in $MODELS; do
        run "bench $model" "$BENCH_LIMIT" /dev/null "$CLI" bench --model "$model" \
            --tokens "$(echo $TOKENS | tr ' ' ',')" --backend cuda --json --out "$JSON_DIR/bench_${model}.json"
    done
fi
pack
for f in "$LT_LOG_DIR"/*.log; do
    [ -s "$f" ] && { echo "== cuBLASLt errors, $(basename "$f") (first 40 lines)"; head -n 40 "$f"; } >>"$LOG"
done

# The table: every shape of every run, and how many fall within +-25% of the prediction:
# per run, and over the must-show set (every shape of the prefill runs, the dense ones of train).
python3 - "$JSON_DIR" >"$OUT/measure_table.md" 2>>"$LOG" <<'EOF'
import glob, json, os, sys

def f(v, fmt="%.4f"):
    return "-" if v is None else fmt % v

out = sys.argv[1]
print("# roofline --measure: predicted vs measured (cuBLAS), H200\n")
print("ratio = measured / predicted; fp8x = bf16 time / fp8 time (th: model, ach: measured). "
      "Routed-expert rows: one plain cuBLAS GEMM of the expected tokens per expert, rounded up. "
      "mf: moefuse's own kernel, mf ratio = its time / its prediction: routed-expert fprop shapes as one "
      "grouped launch per layer (touched experts, expected rows; prediction: the model's grouped launch), "
      "other shapes on the Hopper dense engine (prediction: the model's time for that engine, as roofline "
      "--dense); kernel: bf16's (fp8's "
      "if bf16 was not timed; both when they differ). probe: 128x128x128, about a launch's fixed cost "
      "(the model adds the GPU's launch_us to every GEMM).\n")
must = {"bf16": [0, 0], "fp8": [0, 0]}  # within, measured
grouped = {"bf16": [0, 0], "fp8": [0, 0]}  # moefuse grouped, routed-expert shapes at T >= 512: within, measured
dense_mf = {"bf16": [0, 0], "fp8": [0, 0]}  # moefuse dense engine, all runs
for path in sorted(glob.glob(os.path.join(out, "roofline_*.json"))):
    try:
        doc = json.load(open(path))
    except (OSError, ValueError) as e:
        print("## %s: unreadable (%s)\n" % (os.path.basename(path), e))
        continue
    meas = doc.get("measured", {})
    print("## %s %s T=%d (launch_us %s)\n" % (doc["model"], doc["mode"], doc["tokens"], doc["gpu"].get("launch_us")))
    print("| M | K | N | rows | kinds | pred bf16 ms | meas bf16 ms | ratio | pred fp8 ms | meas fp8 ms | ratio | fp8x th | fp8x ach "
          "| mf pred bf16 | mf bf16 ms | mf ratio | mf pred fp8 | mf fp8 ms | mf ratio | moefuse kernel |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    probe = dict(meas.get("probe", {}), names=["probe"], routed_expert=False)
    for s in ([probe] if "m" in probe else []) + meas.get("shapes", []):
        b, e = s.get("bf16", {}), s.get("fp8", {})
        kinds = "probe" if s["names"] == ["probe"] else "expert" if s["routed_expert"] else "dense"
        mf_kind = s.get("moefuse", {}).get("kernel", "dense" if kinds == "probe" and "moefuse_ms" in b else "-")
        kb, ke = b.get("moefuse_kernel"), e.get("moefuse_kernel")
        # both when the dtypes ran different kernels (FP8's decode kernel beside bf16's v1)
        kernel = ("bf16: %s; fp8: %s" % (kb, ke) if kb and ke and kb != ke else kb or ke) or mf_kind
        if mf_kind == "grouped":
            l = s["moefuse"]
            kernel += " (%s, %d of %d experts, %d tokens x top-%d)" % (l["gemm"], l["experts"], l["num_experts"],
                                                                      l["tokens"], l["top_k"])
        print("| %d | %d | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            s["m"], s["k"], s["n"], ", ".join(s["names"]), kinds,
            f(b.get("predicted_ms")), f(b.get("measured_ms")), f(b.get("ratio"), "%.2f"),
            f(e.get("predicted_ms")), f(e.get("measured_ms")), f(e.get("ratio"), "%.2f"),
            f(s.get("fp8_speedup_theoretical"), "%.2f"), f(s.get("fp8_speedup_achieved"), "%.2f"),
            f(b.get("moefuse_predicted_ms")), f(b.get("moefuse_ms")), f(b.get("moefuse_ratio"), "%.2f"),
            f(e.get("moefuse_predicted_ms")), f(e.get("moefuse_ms")), f(e.get("moefuse_ratio"), "%.2f"), kernel))
        for d in ("bf16", "fp8"):
            if s.get(d, {}).get("error"):
                print("|  |  |  | %s not timed: %s |" % (d, s[d]["error"]) + "  |" * 16)
            if s.get(d, {}).get("moefuse_error"):
                print("|  |  |  | %s not timed on moefuse's kernel: %s |" % (d, s[d]["moefuse_error"]) + "  |" * 16)
            mr = s.get(d, {}).get("moefuse_ratio")
            if mr is not None and mf_kind == "grouped" and doc["tokens"] >= 512:
                grouped[d][1] += 1
                grouped[d][0] += abs(mr - 1) <= 0.25
            if mr is not None and mf_kind == "dense" and kinds != "probe":
                dense_mf[d][1] += 1
                dense_mf[d][0] += abs(mr - 1) <= 0.25
            r = s.get(d, {}).get("ratio")
            if kinds != "probe" and r is not None and (doc["mode"] == "prefill" or kinds == "dense"):
                must[d][1] += 1
                must[d][0] += abs(r - 1) <= 0.25
    w = meas.get("within_25_percent", {})
    print("\nwithin +-25%%: %s" % ", ".join("%s %d of %d" % (d, v["within"], v["measured"]) for d, v in w.items()))
    w = meas.get("moefuse_within_25_percent", {})
    print("moefuse's kernels within +-25%% of their prediction: %s\n" %
          (", ".join("%s %d of %d" % (d, v["within"], v["measured"]) for d, v in w.items()) or "-"))
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
print("moefuse's grouped launch, routed-expert shapes at T >= 512, within +-25%% of the model's grouped "
      "prediction: %s" % ", ".join("%s %d of %d" % (d, v[0], v[1]) for d, v in grouped.items()))
print("moefuse's Hopper dense engine, other shapes (all runs), within +-25%% of the plain prediction: %s\n" %
      ", ".join("%s %d of %d" % (d, v[0], v[1]) for d, v in dense_mf.items()))
print("must-show set (every shape of the prefill runs, the dense shapes of the train runs), within +-25%%: %s" %
      ", ".join("%s %d of %d" % (d, v[0], v[1]) for d, v in must.items()))
EOF
echo "table: rc=$? ($OUT/measure_table.md)" | tee -a "$LOG"
# The same JSONs re-checked by tools/check_measured.py (what CI runs on the committed copy).
{ echo; echo '```'; python3 tools/check_measured.py "$CLI" "$JSON_DIR"; echo '```'; } >>"$OUT/measure_table.md" 2>>"$LOG"
tail -n 1 "$OUT/measure_table.md"
ls "$OUT"
exit $failed
