#!/usr/bin/env bash
# The FP8 block-scaled GEMM lab in one command, on a machine with an H100/H200 and nvcc:
#
#   bash lab/run_fp8_on_device.sh             # (or: LAB=fp8 bash lab/run_on_device.sh)
#   VARIANTS="fp8v1" QUICK=1 bash lab/run_fp8_on_device.sh
#
# Builds lab/gemm_fp8_lab.cu, the variants, src/cuda/hopper/gemm_fp8.cu (nvcc, ptxas -v in
# build.log) and the library's quantiser src/core/formats.c (cc, with lab/fp8_quant_shim.c),
# runs the host-only quantiser self-test, then the driver once per variant (own process, own
# time limit; cuBLASLt FP8 timed beside it in each), one seed for all. Into $OUT (default
# ./lab-out): build.log, sass.log, lab_fp8_selftest.log, lab_<variant>.log, lab_fp8.json:
# 7 files with the default variants, under the device tool's 8.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/lab-out}
mkdir -p "$OUT"
BUILD=${LAB_BUILD:-/tmp/moefuse-fp8lab-build}
mkdir -p "$BUILD"
VARIANTS=${VARIANTS:-"fp8v1 fp8v2 fp8engine"}
SEED=${LAB_SEED:-$(date +%s)}
COMMIT=${LAB_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
export LAB_SEED=$SEED LAB_COMMIT=$COMMIT
EXTRA=()
[ -n "${QUICK:-}" ] && EXTRA+=(--quick)
t_start=$SECONDS

{
    echo "FP8 lab: commit $COMMIT, seed $SEED, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv
    nvcc --version | tail -n 2
} >"$OUT/build.log" 2>&1

# cuBLASLt (the peer): beside nvcc normally; else the copy a pip wheel brought (PyTorch's).
CUBLAS_INC=()
CUBLAS_LINK=(-lcublasLt)
toolkit=$(dirname "$(dirname "$(command -v nvcc)")")
if ! ls "$toolkit"/include/cublasLt.h "$toolkit"/targets/*/include/cublasLt.h >/dev/null 2>&1; then
    sites=$(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null)
    hdr=$(find $sites -name cublasLt.h -path '*nvidia*' 2>/dev/null | head -n 1)
    lib=$(find $sites -name 'libcublasLt.so*' -path '*nvidia*' 2>/dev/null | head -n 1)
    if [ -n "$hdr" ] && [ -n "$lib" ]; then
        CUBLAS_INC=(-I"$(dirname "$hdr")")
        CUBLAS_LINK=("$lib" -Xlinker -rpath="$(dirname "$lib")")
    fi
    echo "cuBLASLt not beside nvcc; using: ${CUBLAS_INC[*]} ${CUBLAS_LINK[*]}" >>"$OUT/build.log"
fi

FLAGS=(-std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -lineinfo -Xptxas -v -Iinclude -Isrc/cuda/hopper -Ilab
    "${CUBLAS_INC[@]}")
SOURCES=(lab/gemm_fp8_lab.cu lab/gemm_fp8_v1_promote.cu lab/gemm_fp8_v2_overlap.cu src/cuda/hopper/gemm_fp8.cu)
CFLAGS=(-std=c11 -O2 -D_POSIX_C_SOURCE=200809L -Iinclude -Isrc/core)
rm -f "$BUILD"/*.o
pids=()
for src in "${SOURCES[@]}"; do
    obj="$BUILD/$(basename "$src" .cu).o"
    nvcc "${FLAGS[@]}" -c "$src" -o "$obj" >"$obj.log" 2>&1 &
    pids+=($!)
done
for src in src/core/formats.c lab/fp8_quant_shim.c; do
    obj="$BUILD/$(basename "$src" .c).o"
    cc "${CFLAGS[@]}" -c "$src" -o "$obj" >"$obj.log" 2>&1 &
    pids+=($!)
done
build_rc=0
for pid in "${pids[@]}"; do wait "$pid" || build_rc=1; done
for log in "$BUILD"/*.o.log; do
    echo "== $(basename "$log" .o.log)" >>"$OUT/build.log"
    cat "$log" >>"$OUT/build.log"
done
if [ $build_rc -eq 0 ]; then
    nvcc -gencode=arch=compute_90a,code=sm_90a -o "$BUILD/gemm_fp8_lab" "$BUILD"/*.o "${CUBLAS_LINK[@]}" \
        >>"$OUT/build.log" 2>&1 || build_rc=1
fi
echo "build: rc=$build_rc in $((SECONDS - t_start)) s" | tee -a "$OUT/build.log"
if [ $build_rc -ne 0 ]; then
    tail -n 40 "$OUT/build.log"
    exit 1
fi

# What the kernels compiled to (QGMMA = FP8 wgmma; LDGSTS + ARRIVES = the scale copies).
{
    cuobjdump --dump-sass "$BUILD/gemm_fp8_lab" >"$BUILD/lab.sass" 2>&1
    pat='QGMMA|HGMMA|UTMALDG|SYNCS|USETMAXREG|WARPGROUP|MEMBAR|LDL|STL|LDGSTS|ARRIVES'
    awk -v pat="^($pat)" '/Function :/ {name=$3} {
        for (i = 1; i <= NF; i++) if ($i ~ pat) { print name, $i; break } }' "$BUILD/lab.sass" | sort | uniq -c
} >"$OUT/sass.log" 2>&1

"$BUILD/gemm_fp8_lab" --selftest >"$OUT/lab_fp8_selftest.log" 2>&1
summary=("selftest: rc=$?; $(tail -n 1 "$OUT/lab_fp8_selftest.log")")

ROWS="$BUILD/rows.jsonl"
rm -f "$ROWS"
for v in $VARIANTS; do
    t0=$SECONDS
    timeout "${LAB_LIMIT:-240}" "$BUILD/gemm_fp8_lab" --variants "$v" --json "$ROWS" "${EXTRA[@]}" >"$OUT/lab_$v.log" 2>&1
    rc=$?
    summary+=("$v: rc=$rc in $((SECONDS - t0)) s; $(tail -n 1 "$OUT/lab_$v.log")")
done

python3 - "$ROWS" "$OUT/lab_fp8.json" <<'PYEOF'
import json, sys, os, datetime
rows = [json.loads(l) for l in open(sys.argv[1])] if os.path.exists(sys.argv[1]) else []
head = rows[0] if rows else {}
doc = {"gpu": head.get("gpu", "?"), "date": datetime.date.today().isoformat(), "commit": head.get("commit", "?"),
       "seed": head.get("seed"),
       "what": "moefuse kernel lab: dense FP8 block-scaled GEMM (1x128 / 128x128 scales) vs cuBLASLt FP8 per-tensor (lab/gemm_fp8_lab.cu)",
       "rows": rows}
json.dump(doc, open(sys.argv[2], "w"), indent=1)
PYEOF
printf '%s\n' "${summary[@]}"
echo "total: $((SECONDS - t_start)) s"
