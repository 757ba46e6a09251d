#!/usr/bin/env bash
# tools/issue3_gates.py on made-up inputs: a gate per (dtype, shape, T) against the right peer,
# the 1.5x gates only at T <= 64, the default path found under both of its names, a cell without
# both rows and an absent file reported missing (never passed), and what the 1.5x gates need
# against the memory floor (floor bytes recovered from gbps, at the run's read bandwidth).
#   ctest runs: bash tests/test_issue3_gates.sh <build>/moefuse   (MOEFUSE_SOURCE_DIR = the source tree)
# Exit 77 (SKIP) when python3 is missing.
. "$(dirname "$0")/python_tool_env.sh"

# gbps 4000 at 1.0 ms: 4 GB of floor bytes, 1.0 ms at 4 TB/s.
cat >"$tmp/bf16.json" <<'J'
{"ceilings": {"read_TBps": 4.0}, "rows": [
 {"shape": "a", "T": 64, "impl": "moefuse", "ms": 1.0, "gbps": 4000.0},
 {"shape": "a", "T": 64, "impl": "torch_grouped_mm", "ms": 1.4},
 {"shape": "a", "T": 64, "impl": "torch_scaled_grouped_mm", "ms": 9.0},
 {"shape": "a", "T": 512, "impl": "moefuse-auto", "ms": 2.0, "gbps": 100.0},
 {"shape": "a", "T": 512, "impl": "torch_grouped_mm", "ms": 2.2},
 {"shape": "b", "T": 8, "impl": "moefuse", "ms": 1.0, "gbps": 1000.0},
 {"shape": "b", "T": 8, "impl": "torch_grouped_mm", "ms": 1.6},
 {"shape": "b", "T": 4096, "impl": "moefuse", "ms": 3.0},
 {"shape": "b", "T": 4096, "impl": "torch_grouped_mm", "ms": 2.9},
 {"shape": "b", "T": 16384, "impl": "torch_grouped_mm", "ms": 9.0}
]}
J
"$python" "$src/tools/issue3_gates.py" "$tmp/bf16.json" "$tmp/absent.json" --out "$tmp/g.json" --md "$tmp/g.md" \
    >"$tmp/stdout" 2>"$tmp/stderr"
rc=$?
[ $rc -eq 0 ] || { echo "FAIL: issue3_gates.py exited $rc"; cat "$tmp/stderr"; exit 1; }
grep -q "absent.json" "$tmp/stderr" || { echo "FAIL: the missing input is not named on stderr"; exit 1; }
"$python" - "$tmp/g.json" <<'PY'
import json, sys
g = json.load(open(sys.argv[1]))["gates"]
def one(dtype, shape, T, thr):
    hits = [x for x in g if x["dtype"] == dtype and x["shape"] == shape and x["T"] == T and x["threshold"] == thr]
    assert len(hits) == 1, (dtype, shape, T, thr, hits)
    return hits[0]
def expect(shape, T, thr, value, ok):
    x = one("bf16", shape, T, thr)
    if value is None:
        assert x["value"] is None and not x["pass"], x
    else:
        assert abs(x["value"] - value) < 1e-4 and x["pass"] == ok, (x, value, ok)
expect("a", 64, 1.0, 1.4, True)
expect("a", 64, 1.5, 1.4, False)                  # the bf16 peer, not torch_scaled_grouped_mm's 9.0
expect("a", 512, 1.0, 1.1, True)                  # moefuse-auto stands for the default path
assert not [x for x in g if x["shape"] == "a" and x["T"] == 512 and x["threshold"] == 1.5], "1.5x only at T <= 64"
expect("b", 8, 1.5, 1.6, True)
expect("b", 4096, 1.0, 2.9 / 3.0, False)
expect("b", 16384, 1.0, None, False)              # no moefuse row: missing
n = one("bf16", "a", 64, 1.5)["needs"]            # 1.4 / 1.5 ms needed; floor 4 GB / 4 TB/s = 1.0 ms
assert abs(n["ms"] - 1.4 / 1.5) < 1e-5 and abs(n["floor_ms"] - 1.0) < 1e-5 and abs(n["floor_over_needed"] - 1.5 / 1.4) < 1e-3, n
assert one("bf16", "b", 8, 1.5)["needs"]["floor_over_needed"] == round(0.25 * 1.5 / 1.6, 3)
fp8 = [x for x in g if x["dtype"] == "fp8"]
assert len(fp8) == 1 and fp8[0]["value"] is None and not fp8[0]["pass"], fp8   # the absent file
assert len(g) == 8, len(g)
PY
rc=$?
[ $rc -eq 0 ] || { echo "FAIL: gate values"; exit 1; }
grep -q "4 of 8 gates pass" "$tmp/g.md" || { echo "FAIL: summary line"; cat "$tmp/g.md"; exit 1; }
grep -q "^1 of the misses would need .*: bf16 a T=64\.$" "$tmp/g.md" || { echo "FAIL: the past-the-floor line"; cat "$tmp/g.md"; exit 1; }
echo "PASS: issue3_gates.py on made-up inputs (8 gates, missing inputs reported)"
