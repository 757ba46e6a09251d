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
# LAB=fp8: the FP8 block-scaled lab instead (lab/run_fp8_on_device.sh; same knobs).
[ "${LAB:-bf16}" = fp8 ] && exec bash "$(dirname "$0")/run_fp8_on_device.sh"
BUILD_DEFAULT=/tmp/moefuse-lab-build
VARIANTS_DEFAULT="v1 v1b v2 engine"
LIMIT_DEFAULT=60
# shellcheck source=lab/lab_lib.sh
source "$(dirname "$0")/lab_lib.sh"

lab_header ""
lab_find_cublas cuBLAS cublas_v2.h cublas 'libcublasLt.so*'
lab_build gemm_lab "lab/gemm_lab.cu lab/gemm_v1_ws_persistent.cu lab/gemm_v1b_bn128.cu lab/gemm_v2_cluster2_multicast.cu lab/gemm_v3_bn192.cu
    src/cuda/hopper/gemm_dense.cu"
# What the kernels compiled to: the instructions that matter, per kernel.
lab_sass gemm_lab 'HGMMA|UTMALDG|SYNCS|USETMAXREG|WARPGROUP|MEMBAR|LDL|STL|UCGABAR'
lab_run_variants gemm_lab
lab_finish lab.json "moefuse kernel lab: dense bf16 GEMM variants vs cuBLAS (lab/gemm_lab.cu)"
