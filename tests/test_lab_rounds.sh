#!/usr/bin/env bash
# tools/lab_rounds.py on a made-up lab JSON: each round's median over the row's median, the spread,
# the per-(file, shape) mean per round, two files' rows of one shape name kept apart; rows without
# round_ms left out; a missing file is exit 2.
#   ctest runs: bash tests/test_lab_rounds.sh <build>/moefuse   (MOEFUSE_SOURCE_DIR = the source tree)
# Exit 77 (SKIP) when python3 is missing.
. "$(dirname "$0")/python_tool_env.sh"
cat >"$tmp/lab.json" <<'J'
{"rows": [
 {"shape": "sq", "impl": "a", "ms": 1.0, "round_ms": [0.98, 1.0, 1.02]},
 {"shape": "sq", "impl": "b", "ms": 2.0, "round_ms": [2.0, 2.0, 2.1]},
 {"shape": "sq", "impl": "old", "ms": 3.0}
]}
J
cat >"$tmp/fp8.json" <<'J'
{"rows": [{"shape": "sq", "impl": "c", "ms": 1.0, "round_ms": [1.2, 1.0, 1.0]}]}
J
out=$("$python" "$src/tools/lab_rounds.py" "$tmp/lab.json" "$tmp/fp8.json") || { echo "FAIL: exit $?"; exit 1; }
grep -q "| lab.json | sq | a | 0.980 | 1.000 | 1.020 | 1.041 |" <<<"$out" || { echo "FAIL: row a"; echo "$out"; exit 1; }
grep -q "| lab.json | sq | b | 1.000 | 1.000 | 1.050 | 1.050 |" <<<"$out" || { echo "FAIL: row b"; echo "$out"; exit 1; }
grep -q "| lab.json | sq | 2 | 0.990 | 1.000 | 1.035 |" <<<"$out" || { echo "FAIL: the shape's means"; echo "$out"; exit 1; }
grep -q "| fp8.json | sq | 1 | 1.200 | 1.000 | 1.000 |" <<<"$out" || { echo "FAIL: the second file's shape"; echo "$out"; exit 1; }
grep -q "| old |" <<<"$out" && { echo "FAIL: a row without round_ms was kept"; exit 1; }
"$python" "$src/tools/lab_rounds.py" "$tmp/none.json" >/dev/null 2>&1
[ $? -eq 2 ] || { echo "FAIL: a missing file is not exit 2"; exit 1; }
echo "PASS: lab_rounds.py on made-up inputs"
