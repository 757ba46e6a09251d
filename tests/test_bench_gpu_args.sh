#!/usr/bin/env bash
# bench_gpu_forward's command line: every bad argument is exit 2 with a line naming the argument and
# what it takes, before any device call (so CI checks it without a GPU); a good line reaches the
# device check (exit 77 without a device, 0 with one: then it times one small forward).
#   ctest runs: bash tests/test_bench_gpu_args.sh <build>/moefuse
# Exit 77 (SKIP) when the bench was not built (no CUDA backend).
bench=$(dirname "$1")/bench_gpu_forward
[ -x "$bench" ] || { echo "SKIP: $bench not built (no CUDA backend)"; exit 77; }
fails=0
expect() { # name, expected exit status, text the output must hold, bench arguments...
  local name=$1 want=$2 text=$3
  shift 3
  local out got
  out=$("$bench" "$@" 2>&1)
  got=$?
  if [ "$got" -eq "$want" ] && grep -qF -- "$text" <<<"$out"; then echo "ok   $name"; else
    echo "FAIL $name: exit $got (expected $want), output:"; echo "$out" | head -5; fails=$((fails + 1)); fi
}
expect "unknown flag" 2 "unknown argument '--foo'" --foo 1
expect "flag without its value" 2 "--tokens needs a value" --shapes deepseek-v3 --tokens
expect "path misspelt" 2 "--gemm: got 'hoper'" --gemm hoper
expect "path list with an unknown item" 2 "--gemm: got 'v1,cutlass'" --gemm v1,cutlass
expect "shape prefix is not a shape" 2 "--shapes: 'qwen3' names a shape" --shapes qwen3
expect "shape list with a typo" 2 "--shapes: 'glm-4.5' names a shape" --shapes qwen3-30b-a3b,glm-4.5
expect "the shapes listed on a bad one" 2 "the shapes are: qwen3-30b-a3b" --shapes nope
expect "zero tokens" 2 "--tokens: got '0'" --tokens 0
expect "token count not a number" 2 "--tokens: got '64,x'" --tokens 64,x
expect "empty item" 2 "--tokens: got '64,,8'" --tokens 64,,8
expect "too many token counts" 2 "more than 16 counts" --tokens 1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17
expect "dtype unknown" 2 "--dtype: got 'fp4'" --dtype fp4
"$bench" --shapes qwen3-30b-a3b --tokens 1 --gemm v1 --dtype bf16 >"${TMPDIR:-/tmp}/bench_args_$$.txt" 2>&1
got=$?
if [ "$got" -eq 77 ] || [ "$got" -eq 0 ]; then echo "ok   a good line reaches the device check (exit $got)"; else
  echo "FAIL a good line: exit $got"; head -5 "${TMPDIR:-/tmp}/bench_args_$$.txt"; fails=$((fails + 1)); fi
rm -f "${TMPDIR:-/tmp}/bench_args_$$.txt"
[ "$fails" -eq 0 ] && echo "PASS: bench_gpu_forward's arguments" || { echo "FAIL: $fails"; exit 1; }
