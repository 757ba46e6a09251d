#!/usr/bin/env bash
# Prepared in session 25 (not yet run; ~4 min with the build). From the repo root, carry .deps:
#   O=$OUT timeout 400 bash bench/results/next-session/session25_lab_order.sh; then tar $OUT.
# Question: is the dense FP8 engine's 1-5% gap to the lab variant that launches the same kernel
# (session 25, Z2) the position it ran in? Until session 25 the lab ran its table's order, so the
# engine always ran last; the lab now runs the --variants order. Four rounds, the order rotated:
# engine first, then last, twice. Shapes where the engine runs a lab variant's exact kernel:
# 4096^3 (fp8v8_128), 8192^3 and the x16 shapes (fp8v8), the one-expert shapes (fp8v4u_128),
# q_a_proj (fp8v6).
# Prediction (before the run): with the order rotated, the engine's median within +-1.5% of its
# twin's on every such shape; within a round, whichever of the pair runs later is the slower by
# 1-5% on most shapes (a position effect, e.g. clocks falling as the card warms).
set -u
. tools/device_call.sh
OUT=$O/lab VARIANTS="fp8engine" LAB_LIMIT=90 timeout 200 bash lab/run_fp8_on_device.sh > $O/lab_stdout.log 2>&1
mark "fp8 lab build + fp8engine" $? $O/lab_stdout.log
L=/tmp/moefuse-fp8lab-build/gemm_fp8_lab
A=fp8engine,fp8v8,fp8v8_128,fp8v4u_128,fp8v6
Z=fp8v6,fp8v4u_128,fp8v8_128,fp8v8,fp8engine
i=0
for order in $A $Z $A $Z; do
  i=$((i + 1))
  timeout 100 $L --variants $order > $O/round$i.log 2>&1; mark "round $i ($order)" $? $O/round$i.log
done
python3 tools/lab_medians.py cublaslt,lt-block,fp8v6,fp8v4u_128,fp8v8,fp8v8_128,fp8engine $O/round1.log $O/round3.log > $O/medians_engine_first.md
python3 tools/lab_medians.py cublaslt,lt-block,fp8v6,fp8v4u_128,fp8v8,fp8v8_128,fp8engine $O/round2.log $O/round4.log > $O/medians_engine_last.md
mark done 0 /dev/null
