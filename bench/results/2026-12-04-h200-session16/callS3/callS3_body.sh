#!/usr/bin/env bash
# Prepared in session 15 (not yet run): issue 4's gates again after the bf16 path rule changed
# (Hopper tiles above 16 rows per expert, commit 8be31c8; the gates of call R3 ran
# before it). From the repo root:   O=$OUT bash bench/results/next-session/session15_gates_after_rule.sh
# (carry .deps; ~5 min).
# Prediction (before the run): the "T=4096 vs v1" gate of qwen3-next-80b-a3b passes (R3: 1.000;
# R2/R4 measured Hopper 2.0x faster there); every other gate as in R3 within run-to-run spread
# (dense-equivalent ratios moved by up to 0.13 between R1 and R3), so 12-14 of 29 pass.
set -u
O=${O:-$PWD/probe-out}; mkdir -p $O
OUT=$O/gates timeout 580 bash bench/issue4_gates.sh > $O/gates_driver.log 2>&1
echo "issue4_gates rc=$?" >> $O/gates_driver.log
