# Shared steps of the lab's device scripts (sourced by lab/run_on_device.sh and
# lab/run_fp8_on_device.sh): set-up, finding cuBLAS, the parallel build, the SASS summary, one
# process per variant, and the JSON of all rows. The sourcing script sets BUILD_DEFAULT,
# VARIANTS_DEFAULT and LIMIT_DEFAULT first.
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/lab-out}
mkdir -p "$OUT"
BUILD=${LAB_BUILD:-$BUILD_DEFAULT}
mkdir -p "$BUILD"
VARIANTS=${VARIANTS:-$VARIANTS_DEFAULT}
SEED=${LAB_SEED:-$(date +%s)}
COMMIT=${LAB_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
export LAB_SEED=$SEED LAB_COMMIT=$COMMIT
EXTRA=()
[ -n "${QUICK:-}" ] && EXTRA+=(--quick)
t_start=$SECONDS
summary=()

# lab_header TITLE: the first lines of build.log (what ran, on what).
lab_header() {
    {
        echo "$1commit $COMMIT, seed $SEED, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
        nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv
        nvcc --version | tail -n 2
    } >"$OUT/build.log" 2>&1
}

# lab_find_cublas NAME HEADER LIB: sets CUBLAS_INC and CUBLAS_LINK for the peer library: beside
# nvcc normally (-l<LIB>); else the copy a pip wheel brought (PyTorch's), found by HEADER and
# lib<LIB>.so*. Extra link arguments for the wheel case may follow (e.g. a companion library).
lab_find_cublas() {
    local name=$1 header=$2 lib=$3
    shift 3
    CUBLAS_INC=()
    CUBLAS_LINK=(-l"$lib")
    local toolkit
    toolkit=$(dirname "$(dirname "$(command -v nvcc)")")
    if ! ls "$toolkit"/include/"$header" "$toolkit"/targets/*/include/"$header" >/dev/null 2>&1; then
        local sites hdr so
        sites=$(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null)
        hdr=$(find $sites -name "$header" -path '*nvidia*' 2>/dev/null | head -n 1)
        so=$(find $sites -name "lib$lib.so*" -path '*nvidia*' 2>/dev/null | head -n 1)
        if [ -n "$hdr" ] && [ -n "$so" ]; then
            CUBLAS_INC=(-I"$(dirname "$hdr")")
            local extra=()
            for e in "$@"; do extra+=("$(dirname "$so")"/$e); done
            CUBLAS_LINK=("$so" "${extra[@]}" -Xlinker -rpath="$(dirname "$so")")
        fi
        echo "$name not beside nvcc; using: ${CUBLAS_INC[*]} ${CUBLAS_LINK[*]}" >>"$OUT/build.log"
    fi
}

# lab_build BINARY "CUDA SOURCES" ["C SOURCES"]: one compiler per translation unit, in
# parallel (ptxas -v into build.log), then the link; exits 1 with the log's tail on failure.
lab_build() {
    local binary=$1 cu_sources=$2 c_sources=${3:-}
    local flags=(-std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -lineinfo -Xptxas -v -Iinclude
        -Isrc/cuda/hopper -Ilab "${CUBLAS_INC[@]}")
    local cflags=(-std=c11 -O2 -D_POSIX_C_SOURCE=200809L -Iinclude -Isrc/core)
    rm -f "$BUILD"/*.o "$BUILD"/*.o.log
    local pids=() src obj
    for src in $cu_sources; do
        obj="$BUILD/$(basename "$src" .cu).o"
        nvcc "${flags[@]}" -c "$src" -o "$obj" >"$obj.log" 2>&1 &
        pids+=($!)
    done
    for src in $c_sources; do
        obj="$BUILD/$(basename "$src" .c).o"
        cc "${cflags[@]}" -c "$src" -o "$obj" >"$obj.log" 2>&1 &
        pids+=($!)
    done
    local build_rc=0 pid log
    for pid in "${pids[@]}"; do wait "$pid" || build_rc=1; done
    for log in "$BUILD"/*.o.log; do
        echo "== $(basename "$log" .o.log)" >>"$OUT/build.log"
        cat "$log" >>"$OUT/build.log"
    done
    if [ $build_rc -eq 0 ]; then
        nvcc -gencode=arch=compute_90a,code=sm_90a -o "$BUILD/$binary" "$BUILD"/*.o "${CUBLAS_LINK[@]}" \
            >>"$OUT/build.log" 2>&1 || build_rc=1
    fi
    echo "build: rc=$build_rc in $((SECONDS - t_start)) s" | tee -a "$OUT/build.log"
    if [ $build_rc -ne 0 ]; then
        tail -n 40 "$OUT/build.log"
        exit 1
    fi
}

# lab_sass BINARY PATTERN: per kernel, how many of each instruction matching PATTERN (an awk
# alternation of SASS opcodes) the binary holds, into sass.log.
lab_sass() {
    {
        cuobjdump --dump-sass "$BUILD/$1" >"$BUILD/lab.sass" 2>&1
        awk -v pat="^($2)" '/Function :/ {name=$3} {
            for (i = 1; i <= NF; i++) if ($i ~ pat) { print name, $i; break } }' "$BUILD/lab.sass" | sort | uniq -c
    } >"$OUT/sass.log" 2>&1
}

# lab_run_variants BINARY: the driver once per word of VARIANTS, each in its own process with a
# time limit (LAB_LIMIT, else LIMIT_DEFAULT s), rows appended to one JSONL file. A word may list
# several variants with commas: one process times them together, interleaved with the peers
# (its log is lab_<the names joined by '-'>.log).
lab_run_variants() {
    ROWS="$BUILD/rows.jsonl"
    rm -f "$ROWS"
    local v t0 rc
    for v in $VARIANTS; do
        t0=$SECONDS
        timeout "${LAB_LIMIT:-$LIMIT_DEFAULT}" "$BUILD/$1" --variants "$v" --json "$ROWS" "${EXTRA[@]}" \
            >"$OUT/lab_${v//,/-}.log" 2>&1
        rc=$?
        summary+=("$v: rc=$rc in $((SECONDS - t0)) s; $(tail -n 1 "$OUT/lab_${v//,/-}.log")")
    done
}

# lab_finish JSON WHAT: every row in one results file, then the summary.
lab_finish() {
    python3 - "$ROWS" "$OUT/$1" "$2" <<'PYEOF'
import json, sys, os, datetime
rows = [json.loads(l) for l in open(sys.argv[1])] if os.path.exists(sys.argv[1]) else []
head = rows[0] if rows else {}
doc = {"gpu": head.get("gpu", "?"), "date": datetime.date.today().isoformat(), "commit": head.get("commit", "?"),
       "seed": head.get("seed"), "what": sys.argv[3], "rows": rows}
json.dump(doc, open(sys.argv[2], "w"), indent=1)
PYEOF
    printf '%s\n' "${summary[@]}"
    echo "total: $((SECONDS - t_start)) s"
}
