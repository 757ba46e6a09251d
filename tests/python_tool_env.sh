# Sourced by the tests of the Python tools (tests/test_*.sh that run tools/*.py on made-up inputs):
# strict mode; src = the source tree (MOEFUSE_SOURCE_DIR, else the parent of tests/); python =
# $PYTHON or python3, exit 77 (ctest's SKIP) when it is missing; tmp = a scratch directory removed
# on exit.
set -uo pipefail
src="${MOEFUSE_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}"
python="${PYTHON:-python3}"
command -v "$python" >/dev/null 2>&1 || { echo "SKIP: $python not found"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
