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
BUILD_DEFAULT=/tmp/moefuse-fp8lab-build
VARIANTS_DEFAULT="fp8v1 fp8v2 fp8v3 fp8v3_160 fp8v3_144 fp8engine"
LIMIT_DEFAULT=240
# shellcheck source=lab/lab_lib.sh
source "$(dirname "$0")/lab_lib.sh"

lab_header "FP8 lab: "
lab_find_cublas cuBLASLt cublasLt.h cublasLt
lab_build gemm_fp8_lab "lab/gemm_fp8_lab.cu lab/gemm_fp8_v1_promote.cu lab/gemm_fp8_v2_overlap.cu lab/gemm_fp8_v3_bn192.cu lab/gemm_fp8_v4_tma_scales.cu lab/gemm_fp8_v6_acquire.cu lab/gemm_fp8_v8_cluster.cu lab/gemm_fp8_v9_tensor.cu src/cuda/hopper/gemm_fp8.cu" \
    "src/core/formats.c lab/fp8_quant_shim.c"
# What the kernels compiled to (QGMMA = FP8 wgmma; LDGSTS + ARRIVES = the scale copies).
lab_sass gemm_fp8_lab 'QGMMA|HGMMA|UTMALDG|SYNCS|USETMAXREG|WARPGROUP|MEMBAR|LDL|STL|LDGSTS|ARRIVES'

"$BUILD/gemm_fp8_lab" --selftest >"$OUT/lab_fp8_selftest.log" 2>&1
summary+=("selftest: rc=$?; $(tail -n 1 "$OUT/lab_fp8_selftest.log")")
lab_run_variants gemm_fp8_lab
lab_finish lab_fp8.json "moefuse kernel lab: dense FP8 block-scaled GEMM (1x128 / 128x128 scales) vs cuBLASLt FP8 per-tensor (lab/gemm_fp8_lab.cu)"
