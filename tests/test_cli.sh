#!/usr/bin/env bash
# Tests of the moefuse command-line tool: run (JSON keys, determinism, presets, dtypes,
# --config, the memory check), info, models, and the error messages.
# Usage: bash tests/test_cli.sh path/to/moefuse   (ctest sets MOEFUSE_SOURCE_DIR)
set -u

HARNESS_USAGE="usage: bash tests/test_cli.sh path/to/moefuse"
# shellcheck source=tests/cli_harness.sh
source "$(dirname "$0")/cli_harness.sh"
# The config line goes to stderr only when asked; run_ok demands an empty stderr.
unset MOEFUSE_PRINT_CONFIG

# json_get FILE KEY: a top-level value of the JSON object in FILE (strings unquoted).
json_get() {
    if [ $HAVE_PYTHON -eq 1 ]; then
        python3 -c 'import json,sys; v=json.load(open(sys.argv[1]))[sys.argv[2]]; print(json.dumps(v) if isinstance(v,(list,dict,bool)) or v is None else v)' "$1" "$2"
    else
        grep -o "\"$2\": *[^,}]*" "$1" | head -1 | sed 's/^[^:]*: *//; s/^"//; s/"$//'
    fi
}

# json_has_keys FILE KEYS...: FILE is exactly one JSON object holding every key.
json_has_keys() {
    local file=$1
    shift
    if [ $HAVE_PYTHON -eq 1 ]; then
        python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
missing = [k for k in sys.argv[2:] if k not in d]
sys.exit("missing keys: " + " ".join(missing) if missing else 0)' "$file" "$@" 2>"$TMP/json_err"
        return $?
    fi
    [ "$(grep -c '^{' "$file")" -eq 1 ] || return 1
    for k in "$@"; do grep -q "\"$k\":" "$file" || return 1; done
}

# A tiny Qwen3-MoE-like config, a tiny DeepSeek-like one (groups, sigmoid, correction bias,
# shared expert, a dense first layer) and a tiny GPT-OSS-like one (biases, clamped SwiGLU).
cat >"$TMP/tiny_qwen.json" <<'EOF'
{"model_type": "qwen3_moe", "hidden_size": 256, "num_hidden_layers": 4, "num_experts": 16,
 "num_experts_per_tok": 4, "moe_intermediate_size": 128, "intermediate_size": 512,
 "norm_topk_prob": true, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64,
 "vocab_size": 1000, "hidden_act": "silu"}
EOF
cat >"$TMP/tiny_deepseek.json" <<'EOF'
{"model_type": "deepseek_v3", "hidden_size": 256, "num_hidden_layers": 3, "n_routed_experts": 32,
 "num_experts_per_tok": 4, "moe_intermediate_size": 128, "intermediate_size": 512,
 "n_shared_experts": 1, "n_group": 4, "topk_group": 2, "routed_scaling_factor": 2.5,
 "scoring_func": "sigmoid", "topk_method": "noaux_tc", "norm_topk_prob": true,
 "first_k_dense_replace": 1, "num_attention_heads": 4, "num_key_value_heads": 4,
 "vocab_size": 1000, "hidden_act": "silu"}
EOF
mkdir -p "$TMP/tiny_gptoss"
cat >"$TMP/tiny_gptoss/config.json" <<'EOF'
{"model_type": "gpt_oss", "hidden_size": 192, "num_hidden_layers": 2, "num_local_experts": 8,
 "num_experts_per_tok": 2, "experts_per_token": 2, "intermediate_size": 192,
 "swiglu_limit": 7.0, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 48,
 "vocab_size": 1000}
EOF
# Odd hidden size: FP4 formats need an even number of columns.
sed 's/"hidden_size": 256/"hidden_size": 255/' "$TMP/tiny_qwen.json" >"$TMP/tiny_odd.json"
echo '{"model_type": "qwen3_moe", "hidden_size": ' >"$TMP/broken.json"

RUN_KEYS="model tokens experts hidden intermediate top_k score activation backend dtype time_ms tflops gbps checksum seed threads config"

# ---- help ----
for cmd in run info models; do
    if run_ok "help $cmd" "$cmd" --help; then
        if grep -q "usage: moefuse $cmd" "$OUT"; then pass "help $cmd"; else fail "help $cmd" "no usage line"; fi
    fi
done
if run_ok "help -h" info -h; then
    if grep -q "usage: moefuse info" "$OUT"; then pass "help -h"; else fail "help -h" "no usage line"; fi
fi
if run_ok "help top" --help; then
    if grep -q "run" "$OUT" && grep -q "models" "$OUT"; then pass "help top"; else fail "help top" "commands not listed"; fi
fi

# ---- run: the README's command, as JSON ----
if run_ok "run qwen3-30b-a3b json" run --model qwen3-30b-a3b --tokens 64 --backend cpu --json; then
    cp "$OUT" "$TMP/qwen.json"
    if ! json_has_keys "$TMP/qwen.json" $RUN_KEYS; then fail "run json keys" "$(cat "$TMP/json_err" 2>/dev/null)"
    elif [ "$(json_get "$TMP/qwen.json" tokens)" != 64 ] || [ "$(json_get "$TMP/qwen.json" experts)" != 128 ] ||
        [ "$(json_get "$TMP/qwen.json" top_k)" != 8 ] || [ "$(json_get "$TMP/qwen.json" backend)" != cpu ] ||
        [ "$(json_get "$TMP/qwen.json" dtype)" != bf16 ]; then
        fail "run json values" "$(cat "$TMP/qwen.json")"
    elif [ "$(json_get "$TMP/qwen.json" checksum)" = null ]; then fail "run json checksum" "not finite"
    else pass "run json keys and values"; fi
fi

# ---- run: determinism (a tiny DeepSeek-like model: groups, correction bias, shared expert) ----
checksum_of() { # ARGS...: the checksum of a JSON run, or "error"
    if "$BIN" run "$@" --json >"$OUT" 2>"$ERR"; then json_get "$OUT" checksum; else echo "error"; fi
}
for dt in bf16 fp8; do
    a=$(checksum_of --config "$TMP/tiny_deepseek.json" --tokens 33 --dtype $dt --backend cpu --seed 7)
    b=$(checksum_of --config "$TMP/tiny_deepseek.json" --tokens 33 --dtype $dt --backend cpu --seed 7)
    c=$(checksum_of --config "$TMP/tiny_deepseek.json" --tokens 33 --dtype $dt --backend cpu --seed 8)
    d=$(checksum_of --config "$TMP/tiny_deepseek.json" --tokens 33 --dtype $dt --backend cpu --seed 7 --threads 1)
    if [ "$a" = error ] || [ "$c" = error ] || [ "$d" = error ]; then fail "determinism $dt" "a run failed"
    elif [ "$a" != "$b" ]; then fail "determinism $dt same seed" "$a != $b"
    elif [ "$a" = "$c" ]; then fail "determinism $dt other seed" "seeds 7 and 8 both give $a"
    elif [ "$a" != "$d" ]; then fail "determinism $dt threads" "--threads 1 gives $d, default gives $a"
    else pass "determinism $dt (seed 7: $a twice, and with 1 thread; seed 8: $c)"; fi
done
# ---- run: text output ----
if run_ok "run text" run --config "$TMP/tiny_qwen.json" --tokens 5 --backend cpu; then
    if grep -q "^checksum " "$OUT" && grep -q "TFLOP/s" "$OUT" && [ "$(wc -l <"$OUT")" -le 8 ]; then pass "run text"
    else fail "run text" "unexpected output: $(head -3 "$OUT")"; fi
fi

# ---- run: the forward's configuration (moe_forward_config): JSON field always, stderr on request ----
CFG_RE='^config   backend=cpu T=5 weights=bf16 path=reference .*threads=1 \(moe_context_set_threads\); shared expert: separate pass over all T tokens \(Is = [0-9]+\); act_format=f32; workspace=[0-9]+ bytes$'
# print_config_ok NAME: exit 0, exactly one stderr line matching CFG_RE, the normal output on stdout.
print_config_ok() {
    local rc=$1 name=$2
    if [ "$rc" -ne 0 ]; then fail "$name" "exit $rc"
    elif [ "$(wc -l <"$ERR")" -ne 1 ] || ! grep -qE "$CFG_RE" "$ERR"; then fail "$name" "stderr is not the one config line"
    elif ! grep -q "^checksum " "$OUT"; then fail "$name" "the text output is missing from stdout"
    else pass "$name: $(cut -c1-60 "$ERR")..."; fi
}
"$BIN" run --config "$TMP/tiny_deepseek.json" --tokens 5 --backend cpu --threads 1 --print-config >"$OUT" 2>"$ERR"
print_config_ok $? "run --print-config"
MOEFUSE_PRINT_CONFIG=1 "$BIN" run --config "$TMP/tiny_deepseek.json" --tokens 5 --backend cpu --threads 1 >"$OUT" 2>"$ERR"
print_config_ok $? "run MOEFUSE_PRINT_CONFIG=1"
# Any other value is off.
if MOEFUSE_PRINT_CONFIG=0 run_ok "run MOEFUSE_PRINT_CONFIG=0 prints nothing" run --config "$TMP/tiny_qwen.json" --tokens 5 \
    --backend cpu; then pass "run MOEFUSE_PRINT_CONFIG=0: stderr empty"; fi
if run_ok "run json config" run --config "$TMP/tiny_qwen.json" --tokens 6 --backend cpu --threads 2 --json; then
    v=$(json_get "$OUT" config)
    if echo "$v" | grep -qE '^backend=cpu T=6 weights=bf16 path=reference .*threads=2 .*shared expert: none; act_format=f32; workspace=[0-9]+ bytes$'; then
        pass "run json config: $v"
    else fail "run json config" "got '$v'"; fi
fi
# With --json and --print-config: the JSON on stdout, the same line on stderr.
"$BIN" run --config "$TMP/tiny_qwen.json" --tokens 6 --backend cpu --threads 2 --json --print-config >"$OUT" 2>"$ERR"
rc=$?
if [ $rc -ne 0 ]; then fail "run json --print-config" "exit $rc"
elif [ "config   $(json_get "$OUT" config)" != "$(cat "$ERR")" ]; then fail "run json --print-config" "stderr and JSON differ"
else pass "run json --print-config: stderr line equals the JSON field"; fi

# ---- run: presets, small batches ----
# (each draws and packs a few GiB of weights: seconds apiece on a small machine)
for spec in "gpt-oss-20b 4" "mixtral-8x7b 2" "qwen3-next-80b-a3b 3"; do
    set -- $spec
    if run_ok "run $1" run --model "$1" --tokens "$2" --backend cpu --json; then
        if [ "$(json_get "$OUT" tokens)" = "$2" ] && [ "$(json_get "$OUT" checksum)" != null ]; then pass "run $1 T=$2"
        else fail "run $1" "$(cat "$OUT")"; fi
    fi
done

# ---- run: every --dtype on tiny models ----
for cfg in tiny_qwen.json tiny_deepseek.json tiny_gptoss; do
    for dt in bf16 f16 f32 fp8 fp8-tensor mxfp8 mxfp4 nvfp4; do
        if run_ok "dtype $dt $cfg" run --config "$TMP/$cfg" --tokens 7 --dtype "$dt" --backend cpu --json; then
            if [ "$(json_get "$OUT" dtype)" = "$dt" ] && [ "$(json_get "$OUT" checksum)" != null ]; then
                pass "dtype $dt $cfg"
            else fail "dtype $dt $cfg" "$(cat "$OUT")"; fi
        fi
    done
done

# ---- run: --config, and zero tokens ----
if run_ok "config dir" run --config "$TMP/tiny_gptoss" --tokens 3 --backend cpu --json; then
    if [ "$(json_get "$OUT" experts)" = 8 ] && [ "$(json_get "$OUT" activation)" = swiglu-oai ]; then pass "config dir"
    else fail "config dir" "$(cat "$OUT")"; fi
fi
if run_ok "zero tokens" run --config "$TMP/tiny_qwen.json" --tokens 0 --backend cpu --json; then
    if [ "$(json_get "$OUT" checksum)" = 0 ]; then pass "zero tokens"; else fail "zero tokens" "$(cat "$OUT")"; fi
fi

# ---- run: DeepSeek-V3 in fp8 (about 21 GiB of host memory, minutes of packing on a CPU):
# only with MOEFUSE_TEST_BIG=1, and then only when this machine has the memory ----
if [ "${MOEFUSE_TEST_BIG:-0}" = 1 ]; then
    "$BIN" run --model deepseek-v3 --tokens 1 --dtype fp8 --backend cpu --json >"$OUT" 2>"$ERR"
    rc=$?
    if [ $rc -eq 0 ] && [ "$(json_get "$OUT" checksum)" != null ]; then pass "deepseek-v3 fp8 T=1"
    elif [ $rc -eq 1 ] && grep -q "is available" "$ERR" && [ "$(wc -l <"$ERR")" -eq 1 ]; then
        echo "SKIP deepseek-v3 fp8 T=1: $(cat "$ERR")"
    else fail "deepseek-v3 fp8 T=1" "exit $rc"; fi
else
    echo "SKIP deepseek-v3 fp8 T=1 (set MOEFUSE_TEST_BIG=1: it needs about 21 GiB and minutes)"
fi

# ---- run: weights from a safetensors checkpoint (written here with python3) ----
write_checkpoint() { # DIR [SKIP]: a 2-layer Qwen3-MoE-like checkpoint, f16, without tensor SKIP
    mkdir -p "$1"
    cat >"$1/config.json" <<'EOF'
{"model_type": "qwen3_moe", "hidden_size": 64, "num_hidden_layers": 2, "num_experts": 4,
 "num_experts_per_tok": 2, "moe_intermediate_size": 32, "intermediate_size": 128,
 "norm_topk_prob": true, "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 32,
 "vocab_size": 100}
EOF
    python3 - "$1/model.safetensors" "${2:-}" <<'EOF'
import json, random, struct, sys
E, H, I = 4, 64, 32
rng = random.Random(1)
tensors = []
def add(name, shape):
    if name == sys.argv[2]:
        return
    n = 1
    for d in shape:
        n *= d
    vals = [rng.uniform(-1, 1) / shape[-1] ** 0.5 for _ in range(n)]
    tensors.append((name, shape, struct.pack("<%de" % n, *vals)))
for layer in range(2):
    p = "model.layers.%d.mlp." % layer
    add(p + "gate.weight", [E, H])
    for e in range(E):
        add(p + "experts.%d.gate_proj.weight" % e, [I, H])
        add(p + "experts.%d.up_proj.weight" % e, [I, H])
        add(p + "experts.%d.down_proj.weight" % e, [H, I])
header, offset = {}, 0
for name, shape, blob in tensors:
    header[name] = {"dtype": "F16", "shape": shape, "data_offsets": [offset, offset + len(blob)]}
    offset += len(blob)
text = json.dumps(header).encode()
text += b" " * (-len(text) % 8)
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<Q", len(text)) + text + b"".join(blob for _, _, blob in tensors))
EOF
}
if [ $HAVE_PYTHON -eq 1 ]; then
    CK=$TMP/ckpt
    write_checkpoint "$CK"
    if run_ok "weights layer 1" run --config "$CK" --weights "$CK" --layer 1 --tokens 9 --backend cpu --json; then
        a=$(json_get "$OUT" checksum)
        if [ "$(json_get "$OUT" layer)" = 1 ] && [ "$(json_get "$OUT" weights)" = "$CK" ] && [ "$a" != null ]; then
            pass "weights layer 1"
        else fail "weights layer 1" "$(cat "$OUT")"; fi
        b=$(checksum_of --config "$CK" --weights "$CK" --layer 1 --tokens 9 --backend cpu)
        c=$(checksum_of --config "$CK" --weights "$CK" --tokens 9 --backend cpu)
        l=$(json_get "$OUT" layer)
        if [ "$a" = "$b" ] && [ "$a" != "$c" ] && [ "$l" = 0 ]; then pass "weights determinism, default layer 0"
        else fail "weights determinism" "layer 1: $a then $b; default layer $l: $c"; fi
    fi
    if run_ok "weights fp8" run --config "$CK" --weights "$CK" --layer 1 --tokens 3 --dtype fp8 --backend cpu --json; then
        pass "weights fp8"
    fi
    write_checkpoint "$TMP/ckpt_missing" model.layers.1.mlp.experts.3.down_proj.weight
    run_error "weights missing tensor" 1 "experts.3.down_proj" run --config "$TMP/ckpt_missing" \
        --weights "$TMP/ckpt_missing" --layer 1 --tokens 2 --backend cpu
else
    echo "SKIP checkpoint runs (no python3 to write one)"
fi

# ---- run and info on the configs checked in under tests/data ----
SRC=${MOEFUSE_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
CONFIGS=$SRC/tests/data/configs
if [ -d "$CONFIGS" ]; then
    for c in synthetic_sqrtsoftplus synthetic_dense_gelu; do
        if run_ok "config $c" run --config "$CONFIGS/$c.json" --tokens 2 --backend cpu --json; then
            if [ "$(json_get "$OUT" checksum)" != null ]; then
                pass "config $c ($(json_get "$OUT" score), $(json_get "$OUT" activation))"
            else fail "config $c" "$(cat "$OUT")"; fi
        fi
    done
    if run_ok "info maverick" info --config "$CONFIGS/llama4_maverick_moe_layers.json"; then
        if grep -q "layers" "$OUT"; then pass "info maverick: $(grep ' layers ' "$OUT" | sed 's/^ *//')"
        else fail "info maverick" "no layers line"; fi
    fi
fi

# ---- info ----
if run_ok "info json" info --model deepseek-v3 --json; then
    cp "$OUT" "$TMP/info.json"
    if ! json_has_keys "$TMP/info.json" experts top_k hidden intermediate score activation n_group topk_group \
        routed_scale norm_topk shared_experts shared_intermediate layers moe_layers moe_layer_ids num_heads \
        num_kv_heads head_dim; then
        fail "info json keys" "$(cat "$TMP/json_err" 2>/dev/null)"
    elif [ "$(json_get "$TMP/info.json" score)" != sigmoid ] || [ "$(json_get "$TMP/info.json" n_group)" != 8 ] ||
        [ "$(json_get "$TMP/info.json" moe_layers)" != 58 ] || [ "$(json_get "$TMP/info.json" shared_experts)" != 1 ] ||
        [ "$(json_get "$TMP/info.json" experts)" != 256 ] || [ "$(json_get "$TMP/info.json" routed_scale)" != 2.5 ]; then
        fail "info json values" "$(cut -c1-300 "$TMP/info.json")"
    else pass "info json deepseek-v3"; fi
    if [ $HAVE_PYTHON -eq 1 ]; then
        if python3 -c 'import json,sys; ids=json.load(open(sys.argv[1]))["moe_layer_ids"]; sys.exit(ids != list(range(3, 61)))' "$TMP/info.json"
        then pass "info moe_layer_ids"; else fail "info moe_layer_ids" "not 3..60"; fi
    fi
fi
# GPT-OSS-20b: a 128-token sliding window in its 12 even layers (0, 2, ..., 22)
if run_ok "info attention span" info --model gpt-oss-20b --json; then
    if [ "$(json_get "$OUT" attention_window)" != 128 ]; then fail "info attention_window" "$(cut -c1-300 "$OUT")"
    elif [ $HAVE_PYTHON -eq 1 ] && ! python3 -c 'import json,sys; ids=json.load(open(sys.argv[1]))["windowed_layer_ids"]; sys.exit(ids != list(range(0, 24, 2)))' "$OUT"
    then fail "info windowed_layer_ids" "not 0, 2, ..., 22"
    elif ! "$BIN" info --model gpt-oss-20b 2>"$ERR" | grep -q "12 of 24 layers attend at most 128 tokens"; then
        fail "info attention span text" "no span line"
    else pass "info attention span"; fi
fi
if run_ok "info text" info --model deepseek-v3; then
    if grep -q "0-2 dense, 3-60 MoE" "$OUT" && grep -q "sigmoid" "$OUT"; then pass "info text"
    else fail "info text" "no '0-2 dense, 3-60 MoE'"; fi
fi
# A long irregular layer list ends with whole runs and a pointer to --json, not cut mid-word.
dense_layers=$(for l in $(seq 0 1023); do [ $(((l * 7) % 5)) -lt 2 ] && printf '%s,' "$l"; done)
printf '{"model_type": "qwen3_moe", "hidden_size": 64, "intermediate_size": 128, "moe_intermediate_size": 32,
 "num_hidden_layers": 1024, "num_experts": 8, "num_experts_per_tok": 2, "mlp_only_layers": [%s]}' \
    "${dense_layers%,}" >"$TMP/irregular.json"
if run_ok "info irregular layers" info --config "$TMP/irregular.json"; then
    line=$(grep '^  layers' "$OUT")
    if [[ "$line" == *"... (the rest in --json's moe_layer_ids)"* ]] && ! [[ "$line" =~ (MoE|dense)[a-zA-Z] ]]; then
        pass "info: a long layer list ends with whole runs"
    else fail "info irregular layers" "$line"; fi
fi
# A name that is not UTF-8 (bytes 0xff 0xfe) still gives valid JSON (U+FFFD in its place).
printf '{"model_type": "bad\377\376", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2}' \
    >"$TMP/bad_utf8.json"
if run_ok "info json, name not UTF-8" info --config "$TMP/bad_utf8.json" --json && [ $HAVE_PYTHON -eq 1 ]; then
    if [ "$(json_get "$OUT" model_type)" = "bad$(printf '\357\277\275\357\277\275')" ]; then pass "info json, name not UTF-8"
    else fail "info json, name not UTF-8" "$(head -c 200 "$OUT" | od -c | head -3)"; fi
fi
if run_ok "info config" info --config "$TMP/tiny_deepseek.json" --json; then
    if [ "$(json_get "$OUT" moe_layers)" = 2 ] && [ "$(json_get "$OUT" topk_group)" = 2 ]; then pass "info config"
    else fail "info config" "$(cut -c1-300 "$OUT")"; fi
fi

# ---- models ----
if run_ok "models" models; then
    n=$(tail -n +2 "$OUT" | grep -c .)
    if [ "$n" -ge 12 ] && grep -q "^deepseek-v3 " "$OUT" && grep -q "^qwen3-30b-a3b " "$OUT"; then pass "models ($n)"
    else fail "models" "$n presets listed"; fi
fi
if run_ok "models json" models --json; then
    if [ $HAVE_PYTHON -eq 0 ] || python3 -c 'import json,sys; m=json.load(open(sys.argv[1]))["models"]; sys.exit(len(m) < 12)' "$OUT"
    then pass "models json"; else fail "models json" "not >= 12 models"; fi
fi

# ---- errors: exit code, one line, the culprit named ----
run_error "unknown option" 2 "--bogus" run --model qwen3-30b-a3b --bogus
run_error "missing value" 2 "--model" run --model
run_error "missing value before option" 2 "--tokens" run --model qwen3-30b-a3b --tokens --json
run_error "model and config" 2 "not both" run --model qwen3-30b-a3b --config "$TMP/tiny_qwen.json"
run_error "neither model nor config" 2 "--model" run --tokens 4
run_error "unknown model" 2 "no-such-model" run --model no-such-model
run_error "unknown model lists names" 2 "deepseek-v3" run --model no-such-model
run_error "tokens not a number" 2 "abc" run --model qwen3-30b-a3b --tokens abc
run_error "tokens trailing junk" 2 "12x" run --model qwen3-30b-a3b --tokens 12x
run_error "tokens negative" 2 "--tokens" run --model qwen3-30b-a3b --tokens -1
run_error "tokens too large" 2 "too large" run --model qwen3-30b-a3b --tokens 3000000000
run_error "tokens overflow" 2 "--tokens" run --model qwen3-30b-a3b --tokens 99999999999999999999999
run_error "bad dtype" 2 "int3" run --model qwen3-30b-a3b --dtype int3
run_error "bad dtype lists valid" 2 "nvfp4" run --model qwen3-30b-a3b --dtype int3
run_error "bad backend" 2 "tpu" run --model qwen3-30b-a3b --backend tpu
run_error "layer without weights" 2 "--weights" run --model qwen3-30b-a3b --layer 3
run_error "dense layer" 2 "dense" run --model deepseek-v3 --weights "$TMP" --layer 1
run_error "layer out of range" 2 "--layer" run --model deepseek-v3 --weights "$TMP" --layer 61
run_error "bad seed" 2 "--seed" run --model qwen3-30b-a3b --seed -5
run_error "bad threads" 2 "--threads" run --model qwen3-30b-a3b --threads many
run_error "bad mem-limit" 2 "12Q" run --model qwen3-30b-a3b --mem-limit 12Q
run_error "missing config file" 1 "$TMP/nope.json" run --config "$TMP/nope.json"
run_error "broken config file" 1 "broken.json" run --config "$TMP/broken.json"
run_error "missing checkpoint" 1 "$TMP/no-ckpt" run --model qwen3-30b-a3b --weights "$TMP/no-ckpt" --layer 0
run_error "odd width in fp4" 1 "mxfp4" run --config "$TMP/tiny_odd.json" --dtype mxfp4 --tokens 2
run_error "info unknown option" 2 "--tokens" info --model deepseek-v3 --tokens 3
run_error "info unknown model" 2 "nope" info --model nope
run_error "models unknown option" 2 "--bogus" models --bogus
run_error "unknown command" 2 "frobnicate" frobnicate
# Memory: f32 DeepSeek-V3 cannot fit in 24 GiB; the message names the size and a --dtype that does.
run_error "memory refusal" 1 "needs" run --model deepseek-v3 --dtype f32 --mem-limit 24G
if grep -q "deepseek-v3 in f32 needs" "$ERR" && grep -q -- "--mem-limit is 24.0 GiB" "$ERR"; then
    alt=$(grep -o -- '--dtype [a-z0-9-]* needs [0-9.]* GiB' "$ERR")
    size=$(echo "$alt" | awk '{print $4}')
    if [ -n "$alt" ] && awk -v s="$size" 'BEGIN { exit !(s < 24) }'; then pass "memory refusal names '$alt'"
    else fail "memory refusal advice" "no fitting --dtype named"; fi
else fail "memory refusal text" "message does not give the sizes"; fi
run_error "memory refusal small limit" 1 "512.0 MiB" run --model qwen3-30b-a3b --mem-limit 512M
# No crash with no arguments at all: usage on stderr, exit 2.
"$BIN" >"$OUT" 2>"$ERR"
rc=$?
if [ $rc -eq 2 ] && grep -q "usage" "$ERR"; then pass "no arguments"; else fail "no arguments" "exit $rc"; fi

echo "$PASSED passed, $FAILED failed"
[ $FAILED -eq 0 ]
