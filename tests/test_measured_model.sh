#!/usr/bin/env bash
# The current roofline model against the committed H200 measurements (no GPU needed):
# tools/check_measured.py re-predicts every measured shape of tests/gpu/logs/*-measure-h200/json
# with `moefuse roofline --gemm` and fails when the must-show counts (issue 5) drop below the
# floors set when the model last changed (136 / 139 with launch_us 5.5 and the exposed store;
# 142 / 142 with stream-K, docs/roofline_model.md). The floors guard against regressions; they are
# calibration numbers (the H200 constants and the stream-K term were chosen on this same data), not
# a validation.
# Usage: bash tests/test_measured_model.sh path/to/moefuse
set -u
BIN=${1:?usage: test_measured_model.sh path/to/moefuse}
SRC=$(cd "$(dirname "$0")/.." && pwd)
# Second data set: the run after the launch_us / exposed-store calibration (session 3, call A),
# which the stream-K change was not chosen on; its floors are that model's counts on it. Third:
# the first run with stream-K in place (session 3, call C2), its counts as measured; it also timed
# moefuse's own grouped launches: mf_bf16 / mf_fp8 are their counts with the kernel families
# (tile, CTAs per SM, sustained rate from the lab and bench runs that came before it) and the launch
# predicted as timed (docs/roofline_model.md; 22 / 6 of 28 before); mf_dense_bf16 / mf_dense_fp8 are
# its Hopper dense engine's counts with that engine's own model (its tile, persistent waves, the same
# kernel-family rates; 85 / 0 of 120 against the cuBLAS prediction before). Fourth: the first run
# after those model changes (session 5, device call F3), used to set nothing: a validation run; its
# floors are its counts as measured. Sixth and seventh: the same, on session 6's code (device calls
# G2, G3). Twelfth: session 11's (device call M1), the first with the bf16 decode family and with
# deepseek-v3's training step; thirteenth: session 12's (N1), the first with the bf16 ticket schedule.
# Since session 12 the moefuse counts (mf_*) are those with the power bound (stream_power_share 0.5
# in the H200 entry), which was fitted on runs up to 13 (docs/roofline_model.md): calibration.
# Fourteenth: session 12's N3, the first run after that choice (a validation run).
LOGS="$SRC/tests/gpu/logs"
if ! command -v python3 >/dev/null; then echo "SKIP: no python3"; echo "0 passed, 0 failed"; exit 0; fi
passed=0 failed=0
check() { # folder floors
    if python3 "$SRC/tools/check_measured.py" "$BIN" "$LOGS/$1/json" --min "$2"; then
        echo "PASS measured model on $1"; passed=$((passed + 1))
    else
        echo "FAIL measured model on $1"; failed=$((failed + 1))
    fi
}
check 2026-12-02-measure-h200 bf16=142,fp8=142
check 2026-12-02-measure-h200-validation bf16=140,fp8=144
check 2026-12-02-measure-h200-moefuse bf16=144,fp8=143,mf_bf16=28,mf_fp8=28,mf_dense_bf16=112,mf_dense_fp8=114
check 2026-12-03-measure-h200-run4 bf16=144,fp8=144,mf_bf16=28,mf_fp8=28,mf_dense_bf16=113,mf_dense_fp8=113
check 2026-12-03-measure-h200-run6 bf16=143,fp8=144,mf_bf16=28,mf_fp8=28,mf_dense_bf16=113,mf_dense_fp8=114
check 2026-12-03-measure-h200-run7 bf16=143,fp8=143,mf_bf16=28,mf_fp8=28,mf_dense_bf16=113,mf_dense_fp8=113
check 2026-12-03-measure-h200-run12 bf16=144,fp8=142,mf_bf16=28,mf_fp8=28,mf_dense_bf16=113,mf_dense_fp8=113
check 2026-12-03-measure-h200-run13 bf16=144,fp8=142,mf_bf16=28,mf_fp8=28,mf_dense_bf16=112,mf_dense_fp8=114
check 2026-12-03-measure-h200-run14 bf16=143,fp8=144,mf_bf16=28,mf_fp8=28,mf_dense_bf16=113,mf_dense_fp8=114
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
