#!/usr/bin/env bash
# Tests of the analysis commands (shapes, roofline, advise): outputs in each format, the SVG
# charts rendered to PNG with rsvg-convert (Debian: librsvg2-bin; that part SKIPs with a message
# when it is absent), and bad input: each must give one "moefuse: ..." line and a non-zero exit.
# Usage: bash tests/test_analysis.sh path/to/moefuse
set -u

HARNESS_USAGE="usage: bash tests/test_analysis.sh path/to/moefuse"
# shellcheck source=tests/cli_harness.sh
source "$(dirname "$0")/cli_harness.sh"

# json_check NAME FILE PYTHON-EXPR: the file parses as JSON and the expression (over `d`) holds.
json_check() {
    local name=$1 file=$2 expr=$3
    if [ $HAVE_PYTHON -eq 0 ]; then skip "$name" "python3 absent: JSON not checked"; return; fi
    if python3 -c "import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if ($expr) else 1)" "$file" 2>"$ERR"
    then pass "$name"; else fail "$name" "JSON check failed: $expr"; fi
}

# ---- shapes -------------------------------------------------------------------------------
STEP="--batch 2 --seq 2048 --mode train"
if run_ok "shapes table" shapes --model deepseek-v3 $STEP; then
    if grep -q "Transformer Engine" "$OUT" && grep -q "Wgrad M=in K=T N=out" "$OUT" &&
        grep -q "not weight GEMMs" "$OUT" && grep -q "^total " "$OUT" &&
        grep -q "experts.gate_up" "$OUT"; then
        pass "shapes table"
    else fail "shapes table" "convention, scope, totals or expert rows missing"; fi
fi
if run_ok "shapes json" shapes --model deepseek-v3 $STEP --json; then
    cp "$OUT" "$TMP/shapes.json"
    # 13 GEMMs x 3 passes; the totals are the sums of the rows
    json_check "shapes json" "$TMP/shapes.json" \
        "len(d['gemms']) == 39 and abs(sum(g['flops'] for g in d['gemms']) - d['totals']['flops']) <= 1e-9 * d['totals']['flops'] and 'Transformer Engine' in d['convention'] and set(g['kind'] for g in d['gemms']) >= {'attn_q','attn_kv','attn_o','router','expert_gate_up','expert_down','shared_gate_up','shared_down','dense_gate_up','dense_down','lm_head'}"
fi
if run_ok "shapes csv" shapes --model qwen3-30b-a3b $STEP --csv; then
    # header + 7 GEMMs x 3 passes + total
    if [ "$(wc -l <"$OUT")" -eq 23 ] && head -1 "$OUT" | grep -q '^layers,.*,pass,m,k,n,count' &&
        grep -q '^0-47,0,47,1,48,experts.gate_up,expert_gate_up,fprop,256,2048,1536,6144,' "$OUT"; then
        pass "shapes csv"
    else fail "shapes csv" "unexpected CSV ($(wc -l <"$OUT") lines)"; fi
fi
if run_ok "shapes decode" shapes --model qwen3-next-80b-a3b --batch 16 --seq 1 --context 8192 --mode decode --tp 2 --ep 4; then
    if grep -q "T = 16 tokens" "$OUT" && grep -q "linear attention" "$OUT" && ! grep -q " dgrad " "$OUT"; then
        pass "shapes decode"
    else fail "shapes decode" "decode header, Qwen3-Next note or fprop-only missing"; fi
fi

# ---- roofline -----------------------------------------------------------------------------
if run_ok "roofline h200 table" roofline --model deepseek-v3 $STEP --gpu h200 --svg "$TMP/roof_train.svg"; then
    if grep -q "step summary" "$OUT" && grep -q "predicted" "$OUT" && [ -s "$TMP/roof_train.svg" ]; then
        pass "roofline h200 table"
    else fail "roofline h200 table" "summary or SVG missing"; fi
fi
if run_ok "roofline decode json" roofline --model qwen3-30b-a3b --batch 64 --seq 1 --context 4096 --mode decode \
    --gpu h200 --json --svg "$TMP/roof_decode.svg"; then
    cp "$OUT" "$TMP/roof.json"
    json_check "roofline decode json" "$TMP/roof.json" \
        "d['gpu']['bf16_tflops'] == 751 and all(g['bound'] == 'memory' for g in d['gemms']) and d['summary']['kv_cache_bytes'] > 0 and all(g['predicted_ms'] >= g['ideal_ms'] * (1 - 1e-9) for g in d['gemms'])"
fi
cat >"$TMP/gpu.json" <<'EOF'
{"name": "half-h200", "bf16_tflops": 375.5, "fp8_tflops": 667.5, "read_tbps": 2.095, "sms": 66, "l2_mb": 30}
EOF
if run_ok "roofline gpu file" roofline --model mixtral-8x7b --batch 1 --seq 4096 --mode prefill --gpu "$TMP/gpu.json" --json; then
    cp "$OUT" "$TMP/roof_file.json"
    json_check "roofline gpu file" "$TMP/roof_file.json" \
        "d['gpu']['name'] == 'half-h200' and d['gpu']['sms'] == 66 and d['summary']['predicted_ms'] > 0"
fi
# the example file holds the built-in h200 entry: same predictions
SRC=${MOEFUSE_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
if [ -f "$SRC/src/analysis/gpus/h200.json" ]; then
    "$BIN" roofline --model qwen3-30b-a3b $STEP --gpu h200 --json >"$TMP/a.json" 2>"$ERR"
    "$BIN" roofline --model qwen3-30b-a3b $STEP --gpu "$SRC/src/analysis/gpus/h200.json" --json >"$TMP/b.json" 2>>"$ERR"
    json_check "gpu file = built-in h200" "$TMP/b.json" \
        "d['summary']['predicted_ms'] == json.load(open('$TMP/a.json'))['summary']['predicted_ms'] and d['gpu']['name'] == 'h200'"
else
    skip "gpu file = built-in h200" "source tree not found"
fi
if run_ok "roofline fp8 h100" roofline --model gpt-oss-120b --batch 4 --seq 1024 --mode train --gpu h100 --dtype fp8 \
    --svg "$TMP/roof_fp8.svg"; then
    if grep -q "datasheet" "$OUT" && grep -q "fp8 operands" "$OUT"; then pass "roofline fp8 h100"
    else fail "roofline fp8 h100" "datasheet label or fp8 missing"; fi
fi

# ---- advise -------------------------------------------------------------------------------
if run_ok "advise table" advise --model gpt-oss-120b --svg "$TMP/advise.svg"; then
    if grep -q "2880" "$OUT" && grep -q "97.8%" "$OUT" && grep -q "93.8%" "$OUT" && grep -q "Decode curve" "$OUT" &&
        grep -q "MoE Wgrad" "$OUT" && [ -s "$TMP/advise.svg" ]; then
        pass "advise table"
    else fail "advise table" "alignment, Wgrad, decode curve or SVG missing"; fi
fi
if run_ok "advise json" advise --model deepseek-v3 --tp 8 --ep 8 --context 8192 --json --svg "$TMP/advise_ds.svg"; then
    cp "$OUT" "$TMP/advise.json"
    json_check "advise json" "$TMP/advise.json" \
        "len(d['decode']) == 11 and d['decode'][0]['batch'] == 1 and d['decode'][-1]['batch'] == 1024 and any(x['value'] == 576 for x in d['dimensions'])"
fi

# The decode curve's attention FLOPs through the CLI: advise's decode FLOPs minus the same decode
# step's GEMM FLOPs (shapes). DeepSeek-V3 caches MLA's latent, so attention runs on it with kv_b_proj
# absorbed: per head and cached token 2*(512 + 64) + 2*512 = 2176 FLOPs; batch 1, context 4096:
# 61 layers * 4096 * 128 heads * 2176 = 69591891968 (the decompressed-head count, 640 per head,
# gave 20468203520).
if run_ok "advise mla attention flops" advise --model deepseek-v3 --context 4096 --json; then
    cp "$OUT" "$TMP/advise_mla.json"
    if run_ok "shapes mla decode" shapes --model deepseek-v3 --batch 1 --seq 1 --context 4096 --mode decode --json; then
        cp "$OUT" "$TMP/shapes_mla.json"
        json_check "advise mla attention flops" "$TMP/advise_mla.json" \
            "d['decode'][0]['batch'] == 1 and abs(d['decode'][0]['flops'] - json.load(open('$TMP/shapes_mla.json'))['totals']['flops'] - 69591891968) <= 1e-9 * d['decode'][0]['flops']"
    fi
fi
# the Wgrad note counts k-steps of the dtype's tile: DeepSeek-V3 at 4096 tokens, K = 4096*8/256 = 128
# tokens per expert: 2 k-steps of 64 (bf16), 128/128 = 1 k-step of 128 (fp8)
if run_ok "advise wgrad k-steps" advise --model deepseek-v3 --dtype fp8; then
    if grep -q "(1 k-steps of 128)" "$OUT" && "$BIN" advise --model deepseek-v3 2>"$ERR" | grep -q "(2 k-steps of 64)"; then
        pass "advise wgrad k-steps"
    else fail "advise wgrad k-steps" "fp8 must count k-steps of 128, bf16 of 64"; fi
fi
# GPT-OSS's sliding-window layers (18 of 36, 128 tokens): decode lists and the advisor say how they are counted
if run_ok "gpt-oss sliding-window note" shapes --model gpt-oss-120b --batch 8 --seq 1 --context 8192 --mode decode; then
    if grep -q "18 of 36 layers attend at most 128" "$OUT" &&
        "$BIN" advise --model gpt-oss-120b 2>"$ERR" | grep -q "18 of 36 layers attend at most 128"; then
        pass "gpt-oss sliding-window note"
    else fail "gpt-oss sliding-window note" "shapes (decode) or advise does not say which layers are windowed"; fi
fi

# ---- the SVGs: well formed, and rendered to PNG --------------------------------------------
for svg in roof_train roof_decode roof_fp8 advise advise_ds; do
    f="$TMP/$svg.svg"
    [ -s "$f" ] || { fail "svg $svg" "not written"; continue; }
    if [ $HAVE_PYTHON -eq 1 ]; then
        if python3 -c "import sys, xml.etree.ElementTree as E; E.parse(sys.argv[1])" "$f" 2>"$ERR"; then
            pass "svg $svg well-formed XML"
        else fail "svg $svg well-formed XML" "parse error"; fi
    fi
    if ! command -v rsvg-convert >/dev/null 2>&1; then
        skip "png $svg" "rsvg-convert not installed (Debian package librsvg2-bin); PNG rendering not checked"
        continue
    fi
    png="$TMP/$svg.png"
    if ! rsvg-convert -o "$png" "$f" 2>"$ERR"; then fail "png $svg" "rsvg-convert failed"; continue; fi
    size=$(wc -c <"$png")
    # PNG signature, then the IHDR width (bytes 16-19, big endian): the charts are 1000 px wide
    sig=$(head -c 8 "$png" | od -An -tx1 | tr -d ' \n')
    width=$(od -An -tu1 -j16 -N4 "$png" | awk '{print $1*16777216 + $2*65536 + $3*256 + $4}')
    if [ "$sig" = "89504e470d0a1a0a" ] && [ "$width" -eq 1000 ] && [ "$size" -gt 20000 ]; then
        pass "png $svg ($size bytes, $width px wide)"
    else fail "png $svg" "signature $sig, width $width, $size bytes (expected a PNG 1000 px wide over 20 kB)"; fi
    [ -n "${MOEFUSE_KEEP_PNG:-}" ] && cp "$png" "$MOEFUSE_KEEP_PNG/"
done

# ---- roofline --grouped: moefuse's launches as --measure times them ------------------------
if run_ok "roofline grouped" roofline --grouped 32768x7168x4096/256,4096x2048x7168/252:v1 --gpu h200 --dtype both; then
    if [ "$(grep -vc '^#' "$OUT")" = 4 ] && grep -q '^32768 7168 4096 256 bf16 hopper ' "$OUT" &&
        grep -q '^32768 7168 4096 256 fp8 hopper-fp8 ' "$OUT" && grep -q '^4096 2048 7168 252 fp8 v1 ' "$OUT"; then
        pass "roofline grouped"
    else fail "roofline grouped" "lines or kernels wrong: $(tr '\n' ';' <"$OUT")"; fi
fi

# ---- roofline --dense: moefuse's Hopper dense engine as --measure times it -----------------
# The lines only; the engine's tiles and times are derived by hand in test_shapes.c.
if run_ok "roofline dense" roofline --dense 4096x7168x1536,512x2880x2880 --gpu h200 --dtype both; then
    if [ "$(grep -vc '^#' "$OUT")" = 4 ] && grep -q "^# m k n dtype predicted_ms .*moefuse's Hopper dense engine" "$OUT" &&
        grep -q '^4096 7168 1536 bf16 ' "$OUT" && grep -q '^512 2880 2880 fp8 ' "$OUT"; then
        pass "roofline dense"
    else fail "roofline dense" "lines wrong: $(tr '\n' ';' <"$OUT")"; fi
fi

# ---- bad input: one line, non-zero exit ----------------------------------------------------
run_error "unknown model" any "unknown model 'no-such-model'" shapes --model no-such-model $STEP
run_error "batch 0" any "--batch" shapes --model deepseek-v3 --batch 0 --seq 2048 --mode train
run_error "tp past 4096" any "--tp: got 8192, expected 1..4096" shapes --model deepseek-v3 --tp 8192
if run_ok "roofline --dtype=both" roofline --gemm 128x128x128 --gpu h200 --dtype=both; then
    if [ "$(grep -vc '^#' "$OUT")" = 2 ]; then pass "--dtype=both as --dtype both"
    else fail "roofline --dtype=both" "expected a bf16 and an fp8 line: $(tr '\n' ';' <"$OUT")"; fi
fi
run_error "json and csv" any "--csv" shapes --model deepseek-v3 $STEP --json --csv
run_error "tp not dividing heads" any "--tp 3 does not divide num_attention_heads" shapes --model deepseek-v3 $STEP --tp 3
run_error "ep not dividing experts" any "--ep 3" shapes --model mixtral-8x7b $STEP --ep 3
run_error "unknown gpu" any "unknown --gpu 'a100'" roofline --model deepseek-v3 $STEP --gpu a100
run_error "gpu file missing a key" any "read_tbps" roofline --model deepseek-v3 $STEP --gpu "$(
    echo '{"bf16_tflops": 500, "fp8_tflops": 1000, "sms": 100}' >"$TMP/bad_gpu.json"; echo "$TMP/bad_gpu.json")"
echo '{"model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32, "vocab_size": 32000}' \
    >"$TMP/no_heads.json"
run_error "config without heads" any "num_attention_heads" shapes --config "$TMP/no_heads.json" $STEP
echo '{"model_type": "llama", "num_hidden_layers": 32}' >"$TMP/no_hidden.json"
run_error "config without hidden size" any "hidden_size" advise --config "$TMP/no_hidden.json"
run_error "mode missing" any "--mode" shapes --model deepseek-v3 --batch 2 --seq 2048
run_error "bad mode" any "infer" shapes --model deepseek-v3 --batch 2 --seq 2048 --mode infer
run_error "model and config" any "not both" shapes --model deepseek-v3 --config "$TMP/no_heads.json" $STEP
run_error "measure without CUDA kernels" any "--measure needs" roofline --model deepseek-v3 $STEP --gpu h200 --measure
run_error "roofline without gpu" any "--gpu" roofline --model deepseek-v3 $STEP
run_error "grouped launch malformed" 2 "'4096x7168'" roofline --grouped 32768x7168x4096/256,4096x7168 --gpu h200
run_error "grouped launch kernel" 2 "kernel 'v' is not v1, hopper or decode" roofline --grouped 4096x7168x4096/252:v --gpu h200
run_error "dense malformed" 2 "--dense: '4096x7168'" roofline --dense 4096x7168 --gpu h200
run_error "dense with gemm" 2 "nor each other" roofline --dense 4096x7168x1536 --gemm 4096x7168x1536 --gpu h200
run_error "advise with mode" any "--mode does not apply" advise --model qwen3-30b-a3b --mode train
run_error "unknown option" any "--bogus" shapes --model deepseek-v3 $STEP --bogus

echo "$PASSED passed, $FAILED failed, $SKIPPED skipped"
[ "$FAILED" -eq 0 ]
