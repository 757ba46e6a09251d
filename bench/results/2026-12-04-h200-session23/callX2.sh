#!/usr/bin/env bash
# Session 23, call X2: the staged epilogue without a branch around each row, and SiLU's exponential
# in its .ftz form (callX2/base.patch is the change; the base tree is this one with it reversed).
# From the repo root, carry .deps: O=$OUT timeout 560 bash bench/results/2026-12-04-h200-session23/callX2.sh
# Why: X1's stall samples of fp8_up_192 (the staged 192-wide FP8 GEMM1, qwen3 T = 16384) put 27k of
#   111k samples in the epilogue against 0 in its mainloop-alone twin; the k-loops' samples are the
#   same (58.3k / 56.6k). The SASS shows each of a lane's 4 rows a chunk as its own branch region
#   (`if (off < 0) continue`): LDS -> FFMA -> MUFU.EX2 -> MUFU.RCP -> STG one row after the other.
# Prediction: lab (base / new time) fp8_up_192 qwen3 1.08-1.15, gptoss 1.05-1.12 (SwiGLU-OAI, K 2880),
#   mixtral 1.02-1.06 (K 4096), fp8_up_192_dyn_exp deepseek 1.02-1.05 (K 7168); fp8_down_192_b16
#   (staged GEMM2, no activation) 1.00-1.03; the _none controls 0.99-1.01. bf16 lab down_dyn_b16
#   (the staged bf16 GEMM2 that ships where K > 2048) 1.00-1.03. Every check passes, the suite too.
set -u
. tools/device_call.sh
D=bench/results/2026-12-04-h200-session23/callX2
rm -rf /tmp/base && mkdir -p /tmp/base && cp -r src lab include /tmp/base/ && (cd /tmp/base && patch -R -p1 < "$R/$D/base.patch") > $O/base_patch.log 2>&1
mark "base tree" $? $O/base_patch.log
F=(-std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -lineinfo -Xptxas -v -Iinclude -Isrc/core -Isrc/cuda -Isrc/cuda/hopper -Ilab)
(cd /tmp/base && nvcc "${F[@]}" -o /tmp/lab_base lab/grouped_lab.cu) > $O/build_lab_base.log 2>&1 &
nvcc "${F[@]}" -o /tmp/lab_new lab/grouped_lab.cu > $O/build_lab_new.log 2>&1 &
build_device
wait
mark "lab builds" 0 $O/build_lab_new.log
CHK=chk-swiglu-limit,chk-geglu,chk-geglu-tanh,chk-reglu,chk-relu2,chk-oai
V8=fp8_up_192,fp8_up_192_dyn_exp,fp8_down_192_b16,fp8_up_192_none,fp8_down_192_none
V16=down_dyn_b16,down_none
for r in 1 2; do
  for a in base new; do
    timeout 100 /tmp/lab_$a --fp8 --shapes qwen3,gptoss,mixtral,deepseek,$CHK --variants $V8 > $O/fp8_${a}_$r.log 2>&1
    mark "fp8 lab $a $r" $? $O/fp8_${a}_$r.log
  done
done
for a in base new; do
  timeout 60 /tmp/lab_$a --shapes gptoss,mixtral,$CHK --variants $V16 > $O/bf16_${a}.log 2>&1
  mark "bf16 lab $a" $? $O/bf16_${a}.log
done
timeout 70 $T --quick > $O/test_quick.log 2>&1; mark "suite --quick" $? $O/test_quick.log
timeout 120 compute-sanitizer --tool memcheck --leak-check no --error-exitcode 3 $T --quick --filter fp8 > $O/memcheck_fp8.log 2>&1
mark "memcheck --quick fp8" $? $O/memcheck_fp8.log
mark done 0 /dev/null
