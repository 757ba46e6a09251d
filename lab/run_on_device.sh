#!/usr/bin/env bash
# The GEMM kernel lab in one command, on a machine with an H100/H200 and nvcc (the lent H200):
#
#   bash lab/run_on_device.sh                 # build, SASS summary, every variant
#   VARIANTS="v1 v2" QUICK=1 bash lab/run_on_device.sh
#
# Builds lab/*.cu + src/cuda/hopper/gemm_dense.cu with nvcc (ptxas -v in build.log), then runs
# the driver once per variant (each in its own process with a time limit, so a hang or a
# faulting kernel loses only that variant; cuBLAS is timed in every process beside it), with
# one seed for all. Everything lands in $OUT (default ./lab-out): build.log, sass.log,
# lab_<variant>.log, lab.json (all rows). 7 files, under the device tool's 8.
set -u
cd "$(dirname "$0")/.."
# LAB=fp8: the FP8 block-scaled lab instead (lab/run_fp8_on_device.sh; same knobs).
[ "${LAB:-bf16}" = fp8 ] && exec bash lab/run_fp8_on_device.sh
OUT=${OUT:-$PWD/lab-out}
mkdir -p "$OUT"
BUILD=${LAB_BUILD:-/tmp/moefuse-lab-build}
mkdir -p "$BUILD"
VARIANTS=${VARIANTS:-"v1 v1b v2 engine"}
SEED=${LAB_SEED:-$(date +%s)}
COMMIT=${LAB_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
export LAB_SEED=$SEED LAB_COMMIT=$COMMIT
EXTRA=()
[ -n "${QUICK:-}" ] && EXTRA+=(--quick)
t_start=$SECONDS

{
    echo "commit $COMMIT, seed $SEED, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv
    nvcc --version | tail -n 2
} >"$OUT/build.log" 2>&1

# cuBLAS (the peer): beside nvcc normally; else the copy a pip wheel brought (PyTorch's).
CUBLAS_INC=()
CUBLAS_LINK=(-lcublas)
toolkit=$(dirname "$(dirname "$(command -v nvcc)")")
if ! ls "$toolkit"/include/cublas_v2.h "$toolkit"/targets/*/include/cublas_v2.h >/dev/null 2>&1; then
    sites=$(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null)
    hdr=$(find $sites -name cublas_v2.h -path '*nvidia*' 2>/dev/null | head -n 1)
    lib=$(find $sites -name 'libcublas.so*' -path '*nvidia*' 2>/dev/null | head -n 1)
    if [ -n "$hdr" ] && [ -n "$lib" ]; then
        CUBLAS_INC=(-I"$(dirname "$hdr")")
        CUBLAS_LINK=("$lib" "$(dirname "$lib")"/libcublasLt.so* -Xlinker -rpath="$(dirname "$lib")")
    fi
    echo "cuBLAS not beside nvcc; using: ${CUBLAS_INC[*]} ${CUBLAS_LINK[*]}" >>"$OUT/build.log"
fi

# Build: one nvcc per translation unit, in parallel.
FLAGS=(-std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -lineinfo -Xptxas -v -Iinclude -Isrc/cuda/hopper -Ilab
    "${CUBLAS_INC[@]}")
SOURCES=(lab/gemm_lab.cu lab/gemm_v1_ws_persistent.cu lab/gemm_v1b_bn128.cu lab/gemm_v2_cluster2_multicast.cu
    src/cuda/hopper/gemm_dense.cu)
pids=()
for src in "${SOURCES[@]}"; do
    obj="$BUILD/$(basename "$src" .cu).o"
    nvcc "${FLAGS[@]}" -c "$src" -o "$obj" >"$obj.log" 2>&1 &
    pids+=($!)
done
build_rc=0
for pid in "${pids[@]}"; do wait "$pid" || build_rc=1; done
for src in "${SOURCES[@]}"; do
    echo "== $src" >>"$OUT/build.log"
    cat "$BUILD/$(basename "$src" .cu).o.log" >>"$OUT/build.log"
done
if [ $build_rc -eq 0 ]; then
    nvcc -gencode=arch=compute_90a,code=sm_90a -o "$BUILD/gemm_lab" "$BUILD"/*.o "${CUBLAS_LINK[@]}" >>"$OUT/build.log" 2>&1 ||
        build_rc=1
fi
echo "build: rc=$build_rc in $((SECONDS - t_start)) s" | tee -a "$OUT/build.log"
if [ $build_rc -ne 0 ]; then
    tail -n 40 "$OUT/build.log"
    exit 1
fi

# What the kernels compiled to: the instructions that matter, per kernel.
{
    cuobjdump --dump-sass "$BUILD/gemm_lab" >"$BUILD/lab.sass" 2>&1
    awk '/Function :/ {name=$3} /HGMMA|UTMALDG|SYNCS|USETMAXREG|WARPGROUP|MEMBAR|LDL|STL|UCGABAR/ {
        for (i = 1; i <= NF; i++) if ($i ~ /^(HGMMA|UTMALDG|SYNCS|USETMAXREG|WARPGROUP|MEMBAR|LDL|STL|UCGABAR)/) {
            print name, $i; break } }' "$BUILD/lab.sass" | sort | uniq -c
} >"$OUT/sass.log" 2>&1

ROWS="$BUILD/rows.jsonl"
rm -f "$ROWS"
summary=()
for v in $VARIANTS; do
    t0=$SECONDS
    timeout "${LAB_LIMIT:-60}" "$BUILD/gemm_lab" --variants "$v" --json "$ROWS" "${EXTRA[@]}" >"$OUT/lab_$v.log" 2>&1
    rc=$?
    summary+=("$v: rc=$rc in $((SECONDS - t0)) s; $(tail -n 1 "$OUT/lab_$v.log")")
done

python3 - "$ROWS" "$OUT/lab.json" <<'EOF'
import json, sys, datetime
rows = [json.loads(l) for l in open(sys.argv[1])] if __import__("os").path.exists(sys.argv[1]) else []
head = rows[0] if rows else {}
doc = {"gpu": head.get("gpu", "?"), "date": datetime.date.today().isoformat(), "commit": head.get("commit", "?"),
       "seed": head.get("seed"), "what": "moefuse kernel lab: dense bf16 GEMM variants vs cuBLAS (lab/gemm_lab.cu)",
       "rows": rows}
json.dump(doc, open(sys.argv[2], "w"), indent=1)
EOF
printf '%s\n' "${summary[@]}"
echo "total: $((SECONDS - t_start)) s"
