#!/usr/bin/env bash
# tools/protocol_ab.py on made-up bench JSONs: speed-ups per peer and run, medians per protocol,
# B's median over A's; a failed row (ms null) left out of its cell; a moefuse variant name found;
# a missing file is exit 2.
#   ctest runs: bash tests/test_protocol_ab.sh <build>/moefuse   (MOEFUSE_SOURCE_DIR = the source tree)
# Exit 77 (SKIP) when python3 is missing.
. "$(dirname "$0")/python_tool_env.sh"
row() { echo "{\"shape\": \"q\", \"T\": $1, \"impl\": \"$2\", \"ms\": $3}"; }
mk() { # file, then moefuse ms, grouped ms, dense ms at T=16384, and the moefuse impl name
    echo "{\"rows\": [$(row 16384 "$5" "$2"), $(row 16384 torch_grouped_mm "$3"), $(row 16384 dense_equiv_cublas "$4")]}" >"$1"
}
mk "$tmp/a1.json" 1.0 2.0 0.9 moefuse
mk "$tmp/a2.json" 1.0 2.2 0.9 moefuse
mk "$tmp/b1.json" 1.1 2.2 1.0 moefuse-hopper
mk "$tmp/b2.json" 1.0 2.0 null moefuse-hopper
out=$("$python" "$src/tools/protocol_ab.py" "$tmp/a1.json,$tmp/a2.json" "$tmp/b1.json,$tmp/b2.json" --names old,new) ||
    { echo "FAIL: exit $?"; exit 1; }
# grouped: old 2.0, 2.2 (median 2.1); new 2.0, 2.0 (2.0): 2.0 / 2.1 = 0.952
grep -q "| q | 16384 | torch_grouped_mm | 2.000, 2.200 | 2.000, 2.000 | 2.100 | 2.000 | 0.952 |" <<<"$out" ||
    { echo "FAIL: grouped row"; echo "$out"; exit 1; }
# dense: old 0.9, 0.9; new 1.0/1.1 = 0.909 only (b2's dense row failed): 0.909 / 0.9 = 1.010
grep -q "| q | 16384 | dense_equiv_cublas | 0.900, 0.900 | 0.909 | 0.900 | 0.909 | 1.010 |" <<<"$out" ||
    { echo "FAIL: dense row"; echo "$out"; exit 1; }
"$python" "$src/tools/protocol_ab.py" "$tmp/none.json" "$tmp/b1.json" >/dev/null 2>&1
[ $? -eq 2 ] || { echo "FAIL: a missing file is not exit 2"; exit 1; }
echo "PASS: protocol_ab.py on made-up inputs"
