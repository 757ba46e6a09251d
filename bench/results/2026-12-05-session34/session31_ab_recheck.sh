#!/usr/bin/env bash
# Prepared in session 31 (no GPU that session; not yet run; ~6-8 min). From the repo root, carry
# .deps (move it into the session's results directory first):
#   O=/tmp/oN timeout 590 bash bench/results/2026-12-05-session34/session31_ab_recheck.sh
# Session 31 re-read every past A/B against its raw files (src/cuda/NOTES.md, "Session 31: an
# audit of the A/B readings"). Three shipped choices rest on evidence that the audit found weak;
# each is timed again here with both arms in one process, interleaved, where the tools allow it.
# 1. The dense FP8 engine's consumer order. 192 wide ships ACQUIRE_FIRST (fp8v6); session 24's Y4
#    took it over the uniform index alone (fp8v4u) by 0.98-1.05x while fp8v4u ran four places later
#    in each process (about 1-1.5% a place, session 30). 128 wide ships ISSUE_THEN_WAIT_U
#    (fp8v4u_128) over fp8v6_128. With them the clustered twins (fp8v8, fp8v8_128): the cluster rule's
#    4-wave threshold was set from rounds that always timed the cluster after its twin (session 25),
#    and session 28's rotated rounds had the one- and two-wave shapes level or faster in clusters. One
#    lab process times all six interleaved; two processes, the list in opposite orders.
# 2. bf16 GEMM2's bulk-copy epilogue where K <= 2048 (hopper_gemm2_bulk). Session 23's X3 lab had
#    the bulk epilogue 2-4% slower than the staged one on qwen3 and deepseek (each timed after the
#    staged variant in its process), and its forward A/B leaned staged in 7 of 10 cells by 0.982-1.040.
#    The grouped lab now interleaves the two; then the forward, 3 alternated processes each arm.
# 3. The bf16 swapped decode kernel at 16 rows per expert. Session 10's L1 and L4 had it 1-2% slower
#    than v1 on mixtral T = 64 (the L4 summary pooled rows and said 0.96x); at the other 16-row cells
#    (qwen3 T = 256, gpt-oss and deepseek T = 512) 0.87-0.90x. --gemm hopper runs the swapped kernel
#    there, --gemm v1 v1's; 3 alternated processes each.
# Predictions (before the run):
#  1. fp8v6 / fp8v4u time 0.97-1.01 on the x16 and square shapes (ACQUIRE_FIRST's own gain at most
#     3%); fp8v4u_128 / fp8v6_128 0.95-1.02; clusters / single on the one- and two-wave expert shapes
#     0.97-1.03 (no clear loss), on the many-wave shapes 0.94-0.98.
#  2. lab down_bulk / down_dyn_b16 time 0.97-1.03 on qwen3 and deepseek (no clear winner once
#     interleaved); forward default / staged 0.98-1.02 where bulk applies.
#  3. swap (hopper row) / v1 time: mixtral T = 64 1.00-1.03; qwen3 T = 256, gpt-oss and deepseek
#     T = 512 0.86-0.92.
set -u
. tools/device_call.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > $O/gpu.txt 2>&1
build_device_and_glab
# 1. The FP8 dense order (its own build inside the lab script).
VARIANTS="fp8v6,fp8v4u,fp8v8,fp8v6_128,fp8v4u_128,fp8v8_128 fp8v8_128,fp8v4u_128,fp8v6_128,fp8v8,fp8v4u,fp8v6" \
  LAB_LIMIT=150 OUT=$O/fp8order \
  timeout 330 bash lab/run_fp8_on_device.sh > $O/fp8order_stdout.log 2>&1; mark "fp8 dense order" $? $O/fp8order_stdout.log
python3 tools/lab_medians.py cublaslt,lt-block,fp8v6,fp8v4u,fp8v8,fp8v6_128,fp8v4u_128,fp8v8_128 $O/fp8order/lab_fp8v*.log \
  > $O/fp8order/medians.md 2>&1; mark "fp8 order medians" $? $O/fp8order/medians.md
# 2. bf16 GEMM2: lab, two processes in opposite orders; then the forward.
timeout 60 /tmp/glab --shapes qwen3,gptoss,mixtral,deepseek --variants down_dyn_b16,down_bulk > $O/glab_1.log 2>&1
mark "bf16 GEMM2 lab 1" $? $O/glab_1.log
timeout 60 /tmp/glab --shapes qwen3,gptoss,mixtral,deepseek --variants down_bulk,down_dyn_b16 > $O/glab_2.log 2>&1
mark "bf16 GEMM2 lab 2" $? $O/glab_2.log
D=$O/fwd; mkdir -p $D
S=qwen3-30b-a3b,deepseek-v3,qwen3-235b-a22b,glm-4.5-air,qwen3-next-80b-a3b
for i in 1 2 3; do
  for e in default staged; do
    MOEFUSE_HOPPER_EPI2=$e timeout 60 $B --shapes $S --tokens 4096,16384 --gemm hopper > $D/epi2$e\_$i.log 2>&1
    mark "bf16 epi2 $e $i" $? $D/epi2$e\_$i.log
  done
done
python3 tools/ab_summary.py $D epi2default epi2staged > $D/epi2.md 2>&1; mark "epi2 summary" $? $D/epi2.md
# 3. The swapped kernel against v1 at 16 rows per expert (and below, for context).
for i in 1 2 3; do
  for g in hopper v1; do
    timeout 60 $B --shapes qwen3-30b-a3b,gpt-oss-120b,mixtral-8x7b,deepseek-v3 --tokens 8,64,256,512 --gemm $g \
      > $D/dec$g\_$i.log 2>&1
    mark "decode --gemm $g $i" $? $D/dec$g\_$i.log
  done
done
python3 tools/ab_summary.py --across-paths $D dechopper decv1 > $D/decode_rows.md 2>&1; mark "decode summary" $? $D/decode_rows.md
mark done 0 /dev/null
