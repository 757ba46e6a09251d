#!/usr/bin/env bash
# Device call S1 (session 17): session 16's prepared follow-up, unchanged
# (bench/results/next-session/session16_followup.sh, removed after this run: see git history; its
# header holds the prediction, committed in session 16 before any run). Carry .deps.
set -u
O=$OUT bash bench/results/next-session/session16_followup.sh
