#!/usr/bin/env bash
# Prepared in session 8 for a later call (not yet run): the swapped decode kernel in bf16
# (lab/decode_swap_lab.cu --bf16: wgmma m64nNTk16 bf16, 64 elements per 128-byte k-block, no scales),
# for issue 3's bf16 decode cells (qwen3 T=8/64, gpt-oss T=64 under 1.5x torch._grouped_mm; they run
# on v1's mma.sync decode kernel at 69-90% of the memory floor, session 6's G3 bench).
# Prediction (before any run): --check passes on all three shapes; at T = 64 the bf16 weight stream
# reaches >= 90% of the same-process read ceiling on gpt-oss and deepseek (twice the bytes per unit of
# the FP8 run, which reached 87% / 95% in J1) and >= 80% on qwen3. ~40 s. From the repo root:
#   O=$OUT bash bench/results/next-session/decode_swap_bf16_probe.sh
set -u
O=${O:-$PWD/probe-out}; mkdir -p $O
nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -Iinclude -Isrc/core -Isrc/cuda -Isrc/cuda/hopper -Ilab \
  -o /tmp/dsl lab/decode_swap_lab.cu -lcuda > $O/build.log 2>&1 || exit 1
timeout 120 /tmp/dsl --bf16 --check --tokens 1,8,64 > $O/bf16_check.log 2>&1
for nt in 8 32; do timeout 120 /tmp/dsl --bf16 --nt $nt --tokens 1,8,64 > $O/bf16_nt$nt.log 2>&1; done
timeout 120 /tmp/dsl --nt 32 --tokens 1,8,64 > $O/fp8_nt32.log 2>&1 # the same run's FP8, for the ratio
