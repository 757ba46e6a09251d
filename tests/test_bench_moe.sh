#!/usr/bin/env bash
# bench/bench_moe.py --selftest: the bench's parts that need no GPU. Without torch (CI): argument
# parsing, the floor formulas against PERF.md, the input checks (routing, torch._grouped_mm's
# offsets and operands), rows, JSON and markdown. With this build's library loadable, also every
# SHAPES entry (PERF.md's four and the four untuned ones) against moefuse's preset of that name
# and what the bench leaves out of each. With torch importable, also its CPU checks: the
# peers, the FP8 quantisers, the fp64 reference, run() end to end on a CPU stand-in, and moefuse's
# CPU backend through the binding (this build's library).
#   ctest runs: bash tests/test_bench_moe.sh <build>/moefuse   (MOEFUSE_SOURCE_DIR = the source tree)
# Exit 77 (SKIP) when python3 is missing.
set -uo pipefail

cli="${1:?usage: test_bench_moe.sh path/to/moefuse}"
build_dir="$(cd "$(dirname "$cli")" && pwd)"
src="${MOEFUSE_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}"
python="${PYTHON:-python3}"

if ! command -v "$python" >/dev/null 2>&1; then
  echo "SKIP: $python not found"
  exit 77
fi

# The library of this build, unless it is a sanitizer build: that one cannot be loaded into
# an uninstrumented interpreter without preloading its runtime, so the moefuse checks are
# skipped there (a path that does not exist makes the binding say so).
lib="$build_dir/libmoefuse.so"
# ldd's whole output first: `ldd | grep -q` under pipefail fails when grep's early exit makes
# ldd die of SIGPIPE, which sent the ASan library into python now and then (CI, 2026-12-02).
deps=$([ -f "$lib" ] && ldd "$lib" 2>/dev/null)
if [ -f "$lib" ] && [[ "$deps" != *libasan* ]]; then
  export MOEFUSE_LIB="$lib"
else
  export MOEFUSE_LIB="$build_dir/no-uninstrumented-libmoefuse.so"
fi

cd "$src" || exit 1
PYTHONDONTWRITEBYTECODE=1 "$python" bench/bench_moe.py --selftest
