#!/usr/bin/env bash
# Prepared in session 25 (not yet run; ~5 min). From the repo root, carry .deps:
#   O=$OUT timeout 560 bash bench/results/2026-12-05-h200-session29/session25_grouped_fp8_clusters.sh; then tar $OUT.
# The grouped FP8 kernel's 192-wide static-stride path in clusters of 2 (grouped_fp8_kernel's CM = 2,
# pair_unit_tiles; lab variants fp8_*_192_*_c2, written without a GPU in session 25): a cluster takes
# plan blocks 2j, 2j + 1 with one n unit; where both are one expert's, each CTA loads half the B tile
# and multicasts it; where the pair straddles two experts, each loads its own; an odd live block
# count leaves a ghost CTA that stores nothing. docs/hopper_gemm.md ("Clusters of 2 in the grouped FP8
# kernel") has the reasoning.
# 1. Correctness: the grouped lab's checks (sampled fp64 reference, every output written, equal to
#    the shipped variant) on the activation check shapes and PERF.md's four shapes, then memcheck and
#    racecheck of the c2 variants on two check shapes.
# 2. Two rounds, the order rotated, c2 against its single-CTA twin, T = 16384.
# Likeliest first-run failures: a hang (the two rings out of step: a branch where one CTA skips a
# k-block or a release), or wrong tiles on pairs that straddle experts (the non-multicast branch).
# Prediction (before the run): correct everywhere; mainloop-alone (fp8_*_192_none_c2) 3-8% faster
# than fp8_*_192_none on qwen3 and deepseek, the full variants 2-5% faster; fp8_up_192_c2 (12 bytes
# of spills in its producer) no slower than its twin by more than 1%.
set -u
. tools/device_call.sh
F=(-std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -lineinfo -Xptxas -v -Iinclude -Isrc/core -Isrc/cuda -Isrc/cuda/hopper -Ilab)
nvcc "${F[@]}" -o /tmp/glab lab/grouped_lab.cu > $O/build_glab.log 2>&1; mark "grouped lab build" $? $O/build_glab.log
CHK=chk-swiglu-limit,chk-geglu,chk-geglu-tanh,chk-reglu,chk-relu2,chk-oai
A=fp8_up_192_none,fp8_up_192_none_c2,fp8_up_192_bulk,fp8_up_192_bulk_c2,fp8_up_192,fp8_up_192_c2,fp8_down_192_none,fp8_down_192_none_c2,fp8_down_192_b16,fp8_down_192_b16_c2,fp8_down_192_bulk,fp8_down_192_bulk_c2
Z=fp8_up_192_none_c2,fp8_up_192_none,fp8_up_192_bulk_c2,fp8_up_192_bulk,fp8_up_192_c2,fp8_up_192,fp8_down_192_none_c2,fp8_down_192_none,fp8_down_192_b16_c2,fp8_down_192_b16,fp8_down_192_bulk_c2,fp8_down_192_bulk
timeout 120 /tmp/glab --fp8 --shapes $CHK,qwen3,deepseek,mixtral,gptoss --variants $A > $O/round1.log 2>&1; mark "round 1 (+ checks)" $? $O/round1.log
timeout 100 /tmp/glab --fp8 --shapes qwen3,deepseek,mixtral,gptoss --variants $Z > $O/round2.log 2>&1; mark "round 2" $? $O/round2.log
C2=fp8_up_192_c2,fp8_up_192_bulk_c2,fp8_down_192_b16_c2,fp8_down_192_bulk_c2
timeout 90 compute-sanitizer --tool memcheck --error-exitcode 3 /tmp/glab --fp8 --shapes chk-geglu,chk-relu2 --variants $C2 \
  --check-only > $O/memcheck.log 2>&1; mark memcheck $? $O/memcheck.log
timeout 120 compute-sanitizer --tool racecheck --error-exitcode 3 /tmp/glab --fp8 --shapes chk-geglu --variants $C2 \
  --check-only > $O/racecheck.log 2>&1; mark racecheck $? $O/racecheck.log
mark done 0 /dev/null
