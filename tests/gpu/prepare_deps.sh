#!/usr/bin/env bash
# Run HERE (not on the device) before a device call: copies this machine's libcjson (headers and
# shared library) into .deps/cjson, which the device scripts use when the device image lacks
# cJSON. .deps is ignored by git; name it in the run's `carry`.
set -euo pipefail
cd "$(dirname "$0")/../.."
grep -qx '/.deps/' .git/info/exclude 2>/dev/null || echo '/.deps/' >>.git/info/exclude
mkdir -p .deps/cjson/include/cjson .deps/cjson/lib
cp /usr/include/cjson/cJSON.h .deps/cjson/include/cjson/
rm -f .deps/cjson/lib/libcjson.so*
# Plain files, not links: links may not survive the transfer to the device.
for f in /usr/lib/x86_64-linux-gnu/libcjson.so*; do cp -L "$f" .deps/cjson/lib/; done
ls .deps/cjson/lib
