#!/usr/bin/env bash
# The Python binding's tests (python/tests, pytest) against the library this build made.
#   ctest runs: bash tests/test_python.sh <build>/moefuse   (MOEFUSE_SOURCE_DIR = the source tree)
# libmoefuse.so sits beside the CLI. Exit 77 (SKIP) when python3, numpy, pytest or ml_dtypes (the format tests' reference) is missing.
set -uo pipefail

cli="${1:?usage: test_python.sh path/to/moefuse}"
build_dir="$(cd "$(dirname "$cli")" && pwd)"
src="${MOEFUSE_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}"
python="${PYTHON:-python3}"

lib=""
for name in libmoefuse.so libmoefuse.dylib; do
  [ -f "$build_dir/$name" ] && lib="$build_dir/$name" && break
done
if [ -z "$lib" ]; then
  echo "FAIL: no libmoefuse.so in $build_dir (beside $cli)"
  exit 1
fi

if ! command -v "$python" >/dev/null 2>&1; then
  echo "SKIP: $python not found"
  exit 77
fi
if ! missing=$("$python" -c '
import importlib.util as u
print(" ".join(m for m in ("numpy", "pytest", "ml_dtypes") if u.find_spec(m) is None))' 2>&1); then
  echo "SKIP: $python could not be run: $missing"
  exit 77
fi
if [ -n "$missing" ]; then
  echo "SKIP: $python lacks $missing (pip install numpy pytest ml_dtypes)"
  exit 77
fi

# A sanitizer build's library needs its runtime loaded before anything else: preload it into
# the (uninstrumented) interpreter, and leave leak checking to the C tests (Python itself
# keeps memory until exit).
asan=$(ldd "$lib" 2>/dev/null | awk '/libasan/ {print $3; exit}')
if [ -n "$asan" ]; then
  export LD_PRELOAD="$asan${LD_PRELOAD:+:$LD_PRELOAD}"
  export ASAN_OPTIONS="detect_leaks=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
  echo "sanitizer build: preloading $asan"
fi

export MOEFUSE_LIB="$lib" MOEFUSE_SOURCE_DIR="$src"
export PYTHONPATH="$src/python${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONDONTWRITEBYTECODE=1
cd "$src" || exit 1
"$python" -m pytest -q -p no:cacheprovider -o addopts="" python/tests
status=$?
if [ "$status" -eq 5 ]; then
  echo "FAIL: pytest collected no tests"
  exit 1
fi
exit "$status"
