#!/usr/bin/env bash
# The grouped GEMM lab in one command, on the lent H200 (nvcc and cuobjdump on PATH):
#
#   OUT=$OUT bash lab/run_grouped_on_device.sh
#   SHAPES=qwen3,mixtral VARIANTS=up_none,up_staged,up_regs SUITE=0 bash lab/run_grouped_on_device.sh
#   OUT=$OUT LAB=fp8 SUITE=0 bash lab/run_grouped_on_device.sh     # the FP8 grouped kernel instead
#
# 1. builds lab/grouped_lab.cu (the library's grouped kernel template, every epilogue variant)
#    with ptxas -v into build.log;
# 2. sass.log: per kernel, code bytes and counts of the instructions that matter (HGMMA,
#    WARPGROUP, BAR, MUFU, BRX, CALL, STG, STS, LDS, LDG, LDL, STL, ...), lab/sass_summary.py;
# 3. grouped.log / grouped.jsonl: the lab (correctness shapes with every activation, then the
#    PERF.md shapes at T=16384: every variant checked, then all timed interleaved); with LAB=fp8,
#    grouped_fp8.log / grouped_fp8.jsonl: `grouped_lab --fp8`, the FP8 grouped kernel's shipped
#    epilogue and no-store variants (fp8_up_*, fp8_down_*) on the same shapes;
# 4. unless SUITE=0: the GPU suite with the library as built from this tree
#    (tests/gpu/run_on_device.sh, STAGES="build test": test_gpu_forward --quick and --perf on
#    both GEMM paths vs the CPU oracle) into $OUT/suite/ (3 files; carry .deps for cJSON).
# 5. for each setting in A_MODES (e.g. "permute gather": MOEFUSE_HOPPER_A, how GEMM1 gets its A
#    rows), the bench (bench_gpu_forward --tokens $A_TOKENS --gemm hopper) and, for settings other
#    than permute (the suite above ran the default), test_gpu_forward --quick and $TEST_ARGS
#    again, into $OUT/a_<setting>.log; then test_gpu_forward --quick with MOEFUSE_PLAN=multi (the
#    multi-block plan at every size; the suite above runs it from 8192 routed rows on) into
#    $OUT/plan_multi.log.
# 7 files (+1 per A_MODES setting, +1) in all. Knobs: SHAPES, VARIANTS (comma lists, default
# all), TOKENS (16384), LAB_SEED, LAB_COMMIT, LAB_LIMIT (seconds for the lab run, default 300),
# A_MODES, A_TOKENS (4096,16384).
set -u
cd "$(dirname "$0")/.."
case "${LAB:-bf16}" in
bf16) NAME=grouped LAB_ARGS=() ;;
fp8) NAME=grouped_fp8 LAB_ARGS=(--fp8) ;;
*) echo "LAB: got '$LAB', expected bf16 or fp8" >&2; exit 2 ;;
esac
OUT=${OUT:-$PWD/lab-out}
mkdir -p "$OUT"
BUILD=${LAB_BUILD:-/tmp/moefuse-grouped-lab}
mkdir -p "$BUILD"
SEED=${LAB_SEED:-$(date +%s)}
COMMIT=${LAB_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
export LAB_SEED=$SEED LAB_COMMIT=$COMMIT
t_start=$SECONDS
{
    echo "grouped lab: commit $COMMIT, seed $SEED, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv
    nvcc --version | tail -n 2
} >"$OUT/build.log" 2>&1

nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -lineinfo -Xptxas -v -Iinclude -Isrc/core -Isrc/cuda \
    -Isrc/cuda/hopper -Ilab -o "$BUILD/grouped_lab" lab/grouped_lab.cu >>"$OUT/build.log" 2>&1
rc=$?
echo "build: rc=$rc in $((SECONDS - t_start)) s" | tee -a "$OUT/build.log"
if [ $rc -ne 0 ]; then
    tail -n 40 "$OUT/build.log"
    exit 1
fi

cuobjdump --dump-sass "$BUILD/grouped_lab" 2>&1 | python3 lab/sass_summary.py >"$OUT/sass.log" 2>&1
cat "$OUT/sass.log"

args=(${LAB_ARGS[@]+"${LAB_ARGS[@]}"} --json "$OUT/$NAME.jsonl")
[ -n "${SHAPES:-}" ] && args+=(--shapes "$SHAPES")
[ -n "${VARIANTS:-}" ] && args+=(--variants "$VARIANTS")
[ -n "${TOKENS:-}" ] && args+=(--tokens "$TOKENS")
rm -f "$OUT/$NAME.jsonl"
t0=$SECONDS
timeout "${LAB_LIMIT:-300}" "$BUILD/grouped_lab" "${args[@]}" >"$OUT/$NAME.log" 2>&1
lab_rc=$?
echo "lab: rc=$lab_rc in $((SECONDS - t0)) s; $(tail -n 1 "$OUT/$NAME.log")"
grep -E '^(==|variant|up_|down_|fp8_)|FAIL|not finite|differs' "$OUT/$NAME.log" | head -n 120

suite_rc=0
if [ "${SUITE:-1}" != 0 ]; then
    OUT="$OUT/suite" STAGES="build test" bash tests/gpu/run_on_device.sh
    suite_rc=$?
    # That script reports per stage and exits 0 after a failed test: read the verdicts.
    for log in test_quick test_gpu_forward; do
        last=$(tail -n 1 "$OUT/suite/$log.log" 2>/dev/null)
        echo "suite $log: $last"
        [[ "$last" =~ ^[0-9]+\ passed,\ 0\ failed ]] || suite_rc=1
    done
fi
a_rc=0
if [ -n "${A_MODES:-}" ] && [ "${SUITE:-1}" != 0 ]; then
    B=build-device # tests/gpu/run_on_device.sh's build (this script's BUILD is the lab's)
    [ -e .deps/cjson/lib ] && export LD_LIBRARY_PATH="$PWD/.deps/cjson/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    verdict() { # log file: 0 when its last "N passed, M failed" line has M = 0
        grep -E '^[0-9]+ passed, [0-9]+ failed' "$1" | tail -n 1 | grep -qE ' 0 failed$'
    }
    for a in $A_MODES; do
        log="$OUT/a_$a.log"
        : >"$log"
        if [ "$a" != permute ]; then
            for targs in "--quick" "${TEST_ARGS:---perf 8,512,4096}"; do
                echo "== MOEFUSE_HOPPER_A=$a test_gpu_forward $targs" >>"$log"
                MOEFUSE_HOPPER_A=$a timeout 120 "$B/test_gpu_forward" $targs >"$log.tmp" 2>&1
                echo "rc=$?" >>"$log.tmp"
                verdict "$log.tmp" || a_rc=1
                cat "$log.tmp" >>"$log"
                echo "suite A=$a $targs: $(grep -E '^[0-9]+ passed' "$log.tmp" | tail -n 1)"
            done
            rm -f "$log.tmp"
        fi
        echo "== MOEFUSE_HOPPER_A=$a bench_gpu_forward --tokens ${A_TOKENS:-4096,16384} --gemm hopper" >>"$log"
        MOEFUSE_HOPPER_A=$a timeout 90 "$B/bench_gpu_forward" --tokens "${A_TOKENS:-4096,16384}" --gemm hopper >>"$log" 2>&1
        echo "bench A=$a: rc=$?"
    done
    MOEFUSE_PLAN=multi timeout 60 "$B/test_gpu_forward" --quick >"$OUT/plan_multi.log" 2>&1
    echo "plan multi quick: rc=$?; $(tail -n 1 "$OUT/plan_multi.log")"
    verdict "$OUT/plan_multi.log" || a_rc=1
fi
echo "total: $((SECONDS - t_start)) s; lab rc=$lab_rc, suite rc=$suite_rc, A/plan rc=$a_rc"
[ $lab_rc -eq 0 ] && [ $suite_rc -eq 0 ] && [ $a_rc -eq 0 ]
