#!/usr/bin/env bash
# tools/ab_summary.py on made-up bench_gpu_forward logs: medians per (shape, T, GEMM path), never
# pooled across paths (a log run without --gemm has a v1 row and a hopper row per (shape, T));
# --across-paths compares an arm that ran one path with one that ran another, and refuses an arm
# whose logs hold two paths for one (shape, T); an arm with no rows is exit 2.
#   ctest runs: bash tests/test_ab_summary.sh <build>/moefuse   (MOEFUSE_SOURCE_DIR = the source tree)
# Exit 77 (SKIP) when python3 is missing.
. "$(dirname "$0")/python_tool_env.sh"
log() { # file, then v1 ms and hopper ms of mixtral T=64
    printf 'device: test\nshape               T gemm            ms    TFLOP/s   GB/s(w)    y vs v1 y\n' >"$1"
    printf 'mixtral-8x7b       64 v1          %s       66.2      4141          nan\n' "$2" >>"$1"
    printf 'mixtral-8x7b       64 hopper      %s       64.9      4058     1.03e-03\n' "$3" >>"$1"
}
log "$tmp/new_1.log" 0.6804 0.6948
log "$tmp/new_2.log" 0.6809 0.6917
log "$tmp/base_1.log" 0.6795 0.7457
log "$tmp/base_2.log" 0.6806 0.7522
out=$("$python" "$src/tools/ab_summary.py" "$tmp" new base) || { echo "FAIL: exit $?"; exit 1; }
# per path: v1 0.68065 / 0.68005 = 1.001; hopper 0.69325 / 0.74895 = 0.926 (pooled it was 0.962)
grep -q "| mixtral-8x7b | 64 | v1 | 0.6806 (2) | 0.6801 (2) | 1.001 |" <<<"$out" ||
    { echo "FAIL: v1 row"; echo "$out"; exit 1; }
grep -q "| mixtral-8x7b | 64 | hopper | 0.6932 (2) | 0.7490 (2) | 0.926 |" <<<"$out" ||
    { echo "FAIL: hopper row"; echo "$out"; exit 1; }
[ "$(echo "$out" | grep -c '| mixtral-8x7b |')" -eq 2 ] || { echo "FAIL: expected two rows"; echo "$out"; exit 1; }
"$python" "$src/tools/ab_summary.py" "$tmp" new none >/dev/null 2>&1
[ $? -eq 2 ] || { echo "FAIL: an arm without logs is not exit 2"; exit 1; }
# --across-paths: the hopper rows of "sw" against the v1 rows of "v" (0.6932 / 0.6801 = 1.019)
grep -v ' v1 ' "$tmp/new_1.log" >"$tmp/sw_1.log"
grep -v ' v1 ' "$tmp/new_2.log" >"$tmp/sw_2.log"
grep -v ' hopper ' "$tmp/base_1.log" >"$tmp/v_1.log"
grep -v ' hopper ' "$tmp/base_2.log" >"$tmp/v_2.log"
out=$("$python" "$src/tools/ab_summary.py" --across-paths "$tmp" sw v) || { echo "FAIL: across exit $?"; exit 1; }
grep -q "| mixtral-8x7b | 64 | hopper/v1 | 0.6932 (2) | 0.6801 (2) | 1.019 |" <<<"$out" ||
    { echo "FAIL: across-paths row"; echo "$out"; exit 1; }
"$python" "$src/tools/ab_summary.py" --across-paths "$tmp" new base >/dev/null 2>&1
[ $? -eq 2 ] || { echo "FAIL: --across-paths on logs with two paths is not exit 2"; exit 1; }
# --rounds: new / base per round, paired by round (v1 0.6804 / 0.6795, 0.6809 / 0.6806; hopper
# 0.6948 / 0.7457, 0.6917 / 0.7522)
out=$("$python" "$src/tools/ab_summary.py" --rounds "$tmp" new base) || { echo "FAIL: --rounds exit $?"; exit 1; }
grep -q "| mixtral-8x7b | 64 | v1 | 1.001, 1.000 |" <<<"$out" || { echo "FAIL: v1 rounds row"; echo "$out"; exit 1; }
grep -q "| mixtral-8x7b | 64 | hopper | 0.932, 0.920 |" <<<"$out" ||
    { echo "FAIL: hopper rounds row"; echo "$out"; exit 1; }
# An arm whose name extends another's ("new_x") is not read as "new"'s; a round one arm lacks is "-".
log "$tmp/new_x_1.log" 9.0 9.0
log "$tmp/base_3.log" 0.6800 0.7500
out=$("$python" "$src/tools/ab_summary.py" --rounds "$tmp" new base) || { echo "FAIL: prefix exit $?"; exit 1; }
grep -q "| mixtral-8x7b | 64 | hopper | 0.6932 (2) | 0.7500 (3) | 0.924 |" <<<"$out" ||
    { echo "FAIL: another arm's logs read as this arm's"; echo "$out"; exit 1; }
grep -q "| mixtral-8x7b | 64 | hopper | 0.932, 0.920, - |" <<<"$out" ||
    { echo "FAIL: missing round not marked"; echo "$out"; exit 1; }
echo "PASS: ab_summary.py on made-up logs"
