#!/usr/bin/env bash
# Tests of `moefuse bench` on the CPU backend with a tiny config: the table, PERF.md's results
# JSON (stdout and --out), determinism of the checksums, the progress bar (only on a TTY),
# and the one-line errors of bad input.
# Usage: bash tests/test_cli_bench.sh path/to/moefuse
set -u

HARNESS_USAGE="usage: bash tests/test_cli_bench.sh path/to/moefuse"
# shellcheck source=tests/cli_harness.sh
source "$(dirname "$0")/cli_harness.sh"
# The config lines go to stderr only when asked; run_ok demands an empty stderr.
unset MOEFUSE_PRINT_CONFIG

# check_results FILE TOKENS IMPL: FILE is PERF.md's results JSON with one row per T of TOKENS
# (comma-separated), in order, each with PERF.md's keys, impl IMPL, finite positive times.
check_results() {
    python3 - "$@" <<'EOF'
import json, re, sys
path, tokens, impl = sys.argv[1], [int(t) for t in sys.argv[2].split(",")], sys.argv[3]
d = json.load(open(path))
def need(cond, what):
    if not cond:
        sys.exit(what)
for key in ("gpu", "date", "commit", "ceilings", "rows"):
    need(key in d, "missing top-level key " + key)
need(re.fullmatch(r"\d{4}-\d{2}-\d{2}", d["date"]) is not None, "date not YYYY-MM-DD: %r" % d["date"])
for key in ("read_TBps", "bf16_TFLOPs", "fp8_TFLOPs"):
    need(key in d["ceilings"], "missing ceilings key " + key)
rows = d["rows"]
need(len(rows) == len(tokens), "%d rows, expected %d" % (len(rows), len(tokens)))
keys = ("shape", "E", "H", "I", "k", "T", "dtype", "pass", "impl", "ms", "tflops", "gbps", "err")
for row, t in zip(rows, tokens):
    for key in keys:
        need(key in row, "row T=%s misses key %s" % (row.get("T"), key))
    need(row["T"] == t, "row T=%s, expected %d" % (row["T"], t))
    need((row["E"], row["H"], row["I"], row["k"]) == (8, 64, 32, 2), "shape %r" % ((row["E"], row["H"], row["I"], row["k"]),))
    need(row["impl"] == impl, "impl %r, expected %r" % (row["impl"], impl))
    need(row["pass"] == "forward" and row["dtype"] == "bf16", "pass/dtype %r %r" % (row["pass"], row["dtype"]))
    need(row["routing"] == "router", "routing %r" % row["routing"])
    for key in ("ms", "tflops", "gbps"):
        need(isinstance(row[key], (int, float)) and row[key] > 0, "row T=%d: %s = %r" % (t, key, row[key]))
    need(1 <= row["experts_touched"] <= min(8, 2 * t), "experts_touched %r" % row["experts_touched"])
    need(re.fullmatch(r"backend=cpu T=%d weights=bf16 path=reference .*; workspace=\d+ bytes" % t, row.get("config", "")),
         "row T=%d: config %r" % (t, row.get("config")))
EOF
}

cat >"$TMP/config.json" <<'EOF'
{"model_type": "qwen3_moe", "hidden_size": 64, "num_hidden_layers": 2, "num_experts": 8,
 "num_experts_per_tok": 2, "moe_intermediate_size": 32, "intermediate_size": 128,
 "norm_topk_prob": true, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
 "vocab_size": 1000, "hidden_act": "silu"}
EOF
TINY=(--config "$TMP/config.json" --backend cpu --tokens 1,3,17)

# ---- help ----
if run_ok "help" bench --help; then
    if grep -q "usage: moefuse bench" "$OUT" && grep -q -- "--tokens LIST" "$OUT"; then pass "help"
    else fail "help" "no usage line"; fi
fi
if run_ok "listed" --help; then
    if grep -q "^  bench " "$OUT"; then pass "bench listed in moefuse --help"; else fail "listed" "bench not listed"; fi
fi

# ---- the table ----
if run_ok "table" bench "${TINY[@]}"; then
    rows=$(awk '$1 ~ /^[0-9]+$/ && NF >= 5 {print $1}' "$OUT" | tr '\n' ,)
    if ! grep -qE '^ +T +ms +TFLOP/s +GB/s' "$OUT"; then fail "table" "no header line"
    elif [ "$rows" != "1,3,17," ]; then fail "table" "rows for T = '$rows', expected 1,3,17,"
    elif ! grep -q "^routing .*router weights" "$OUT"; then fail "table" "does not say how routing is done"
    elif ! grep -q "^timing .*median of 3" "$OUT"; then fail "table" "does not say the timing (median of 3 on cpu)"
    elif grep -q "floor" "$OUT"; then fail "table" "a memory floor on the cpu without --read-tbps"
    else pass "table: header, one row per T, routing and timing named, no floor on cpu"; fi
fi
# No progress bar when stderr is not a TTY: run_ok already demands an empty stderr.
pass "no progress bar when stderr is a file"

if run_ok "table floor" bench "${TINY[@]}" --read-tbps 0.05; then
    if grep -q "% floor" "$OUT" && [ "$(awk '$1 == 17 {print $NF}' "$OUT" | grep -c '%$')" -eq 1 ]; then
        pass "table: --read-tbps adds the floor columns"
    else fail "table floor" "no floor column"; fi
fi

# ---- JSON ----
if [ $HAVE_PYTHON -eq 1 ]; then
    if run_ok "json" bench "${TINY[@]}" --json; then
        if check_results "$OUT" 1,3,17 moefuse-cpu 2>"$TMP/why"; then pass "json: PERF.md keys, one row per T"
        else fail "json" "$(cat "$TMP/why")"; fi
        v=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["gpu"], d["commit"], d["ceilings"]["read_TBps"], d["rows"][0]["reps"])' "$OUT")
        if [ "$v" = "cpu unknown None 3" ]; then pass "json: gpu cpu, commit unknown, no read ceiling, 3 reps"
        else fail "json values" "got '$v'"; fi
    fi
    if MOEFUSE_COMMIT=abc1234 run_ok "json out" bench "${TINY[@]}" --reps 5 --read-tbps 2.5 --bf16-tflops 700 --out "$TMP/r.json"; then
        v=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); c=d["ceilings"]; print(d["commit"], c["read_TBps"], c["bf16_TFLOPs"], c["fp8_TFLOPs"], d["rows"][2]["reps"], d["rows"][2]["pct_floor"] > 0)' "$TMP/r.json" 2>&1)
        if ! grep -qE '^ +T +ms' "$OUT"; then fail "json out" "--out without --json should still print the table"
        elif ! check_results "$TMP/r.json" 1,3,17 moefuse-cpu 2>"$TMP/why"; then fail "json out" "$(cat "$TMP/why")"
        elif [ "$v" != "abc1234 2.5 700 None 5 True" ]; then fail "json out values" "got '$v'"
        else pass "--out: results JSON with MOEFUSE_COMMIT, ceilings from options, --reps"; fi
    fi
    # The same seed gives the same outputs; another seed, other outputs.
    sums() { python3 -c 'import json,sys; print(" ".join(repr(r["checksum"]) for r in json.load(open(sys.argv[1]))["rows"]))' "$1"; }
    "$BIN" bench "${TINY[@]}" --seed 7 --json >"$TMP/a.json" 2>"$ERR" &&
        "$BIN" bench "${TINY[@]}" --seed 7 --json --threads 1 >"$TMP/b.json" 2>"$ERR" &&
        "$BIN" bench "${TINY[@]}" --seed 8 --json >"$TMP/c.json" 2>"$ERR"
    if [ $? -ne 0 ]; then fail "determinism" "a run failed"
    else
        a=$(sums "$TMP/a.json") b=$(sums "$TMP/b.json") c=$(sums "$TMP/c.json")
        if [ "$a" != "$b" ]; then fail "determinism" "seed 7 gave '$a' then '$b'"
        elif [ "$a" = "$c" ]; then fail "determinism" "seeds 7 and 8 gave the same checksums '$a'"
        elif echo "$a" | grep -q None; then fail "determinism" "a checksum is not finite: '$a'"
        else pass "determinism: same seed same checksums (threads too), other seed other checksums"; fi
    fi
    # On a TTY the bar appears, and the table on stdout stays clean.
    python3 - "$BIN" "$TMP/config.json" >"$TMP/tty" 2>&1 <<'EOF'
import os, pty, subprocess, sys
master, slave = pty.openpty()
p = subprocess.run([sys.argv[1], "bench", "--config", sys.argv[2], "--backend", "cpu", "--tokens", "1,3,17"],
                   stdout=subprocess.PIPE, stderr=slave, timeout=60)
os.close(slave)
err = b""
try:
    while True:
        chunk = os.read(master, 4096)
        if not chunk:
            break
        err += chunk
except OSError:
    pass
out = p.stdout.decode()
sys.exit(0 if p.returncode == 0 and b"[" in err and b"T=17" in err and "[" not in out and "\r" not in out
         else "rc %d, stderr %r, stdout %r" % (p.returncode, err[:200], out[:200]))
EOF
    if [ $? -eq 0 ]; then pass "progress bar on a TTY stderr, not on stdout"; else fail "tty" "$(tail -1 "$TMP/tty")"; fi
else
    echo "SKIP json checks: no python3"
fi

# ---- the forward's configuration: one stderr line per T, before its timing, on request ----
# config_lines_ok NAME RC: exit 0, stderr exactly one config line per T of 1,3,17, in order.
config_lines_ok() {
    local name=$1 rc=$2
    local got
    got=$(sed -E 's/^config   backend=cpu T=([0-9]+) weights=bf16 path=reference .*; workspace=[0-9]+ bytes$/\1/' "$ERR" | tr '\n' ,)
    if [ "$rc" -ne 0 ]; then fail "$name" "exit $rc"
    elif [ "$got" != "1,3,17," ]; then fail "$name" "stderr lines give T '$got', expected 1,3,17,"
    elif ! grep -qE '^ +T +ms' "$OUT"; then fail "$name" "the table is missing from stdout"
    else pass "$name: one config line per T"; fi
}
"$BIN" bench "${TINY[@]}" --reps 1 --print-config >"$OUT" 2>"$ERR"
config_lines_ok "print-config" $?
MOEFUSE_PRINT_CONFIG=1 "$BIN" bench "${TINY[@]}" --reps 1 >"$OUT" 2>"$ERR"
config_lines_ok "MOEFUSE_PRINT_CONFIG=1" $?
if MOEFUSE_PRINT_CONFIG=yes run_ok "MOEFUSE_PRINT_CONFIG=yes is off" bench "${TINY[@]}" --reps 1; then
    pass "MOEFUSE_PRINT_CONFIG=yes: stderr empty (only 1 turns it on)"
fi

# ---- errors: one line, non-zero exit ----
C=(--config "$TMP/config.json" --backend cpu)
run_error "tokens empty" 2 "--tokens" bench "${C[@]}" --tokens ""
run_error "tokens empty entry" 2 "empty entry" bench "${C[@]}" --tokens 1,,3
run_error "tokens trailing comma" 2 "empty entry" bench "${C[@]}" --tokens 1,3,
run_error "tokens not numeric" 2 "'abc' is not an integer" bench "${C[@]}" --tokens 1,abc
run_error "tokens negative" 2 "too small" bench "${C[@]}" --tokens 4,-5
run_error "tokens zero" 2 "too small" bench "${C[@]}" --tokens 0
run_error "tokens too large" 2 "too large" bench "${C[@]}" --tokens 1,99999999999
run_error "tokens blank" 2 "not an integer" bench "${C[@]}" --tokens "1, 3"
run_error "reps zero" 2 "--reps" bench "${C[@]}" --reps 0
run_error "reps not numeric" 2 "--reps" bench "${C[@]}" --reps x
run_error "unknown option" 2 "--bogus" bench "${C[@]}" --bogus
run_error "dtype unknown" 2 "--dtype" bench "${C[@]}" --dtype int3
run_error "backend unknown" 2 "--backend" bench "${C[@]}" --backend tpu
run_error "read-tbps negative" 2 "--read-tbps" bench "${C[@]}" --read-tbps -1
run_error "read-tbps text" 2 "--read-tbps" bench "${C[@]}" --read-tbps fast
run_error "no model" 2 "--model" bench --tokens 1
run_error "both model and config" 2 "not both" bench --model qwen3-30b-a3b "${C[@]}"
run_error "unknown model" 2 "nosuch" bench --model nosuch --backend cpu
run_error "missing value" 2 "--tokens needs a value" bench "${C[@]}" --tokens
run_error "memory check" 1 "--mem-limit" bench --model deepseek-v3 --backend cpu --mem-limit 1G --tokens 1
run_error "out unwritable" 1 "--out" bench "${C[@]}" --tokens 1 --out "$TMP/no/such/dir/r.json"
# A layer whose output is all zeros (H = I = 1, ReGLU, seed 0: the one product is negative) is a valid
# run; bench refused it as if the forward had written nothing (y now starts as NaN instead).
echo '{"model_type": "mixtral", "hidden_act": "relu", "hidden_size": 1, "intermediate_size": 1, "num_local_experts": 4,
 "num_experts_per_tok": 2, "num_hidden_layers": 2, "num_attention_heads": 1, "num_key_value_heads": 1,
 "vocab_size": 10}' >"$TMP/zero_out.json"
if run_ok "all-zero output" bench --config "$TMP/zero_out.json" --backend cpu --tokens 1 --seed 0 --json; then
    if grep -q '"checksum": 0[,}]' "$OUT"; then pass "bench: an all-zero output is a valid run"
    else fail "all-zero output" "expected checksum 0 (the case this tests): $(grep -o '"checksum": [^,]*' "$OUT")"; fi
fi
# A run that fails leaves what --out names as it was (it truncated, then removed, an earlier file).
echo '{"earlier": "results"}' >"$TMP/earlier.json"
run_error "out kept on failure" 1 "--mem-limit" bench --model deepseek-v3 --backend cpu --mem-limit 1G --tokens 1 \
    --out "$TMP/earlier.json"
if [ "$(cat "$TMP/earlier.json" 2>/dev/null)" != '{"earlier": "results"}' ] || ls "$TMP"/earlier.json.* >/dev/null 2>&1; then
    fail "out kept on failure" "the earlier --out file changed or a temporary file was left"
else pass "--out: a failed run leaves the earlier file and no temporary"; fi

echo "$PASSED passed, $FAILED failed"
[ $FAILED -eq 0 ]
