#!/usr/bin/env bash
# Session 18, call S1: session 17's prepared follow-up (prediction in its header), bounded so the
# archive always comes back. Run from the repo root with carry [".deps"].
O=$OUT timeout 540 bash bench/results/2026-12-04-h200-session18/session17_followup.sh
echo "followup rc=$?" >> $OUT/call.log
cd $OUT && rm -f all.tgz; tar czf /tmp/all.tgz . && mv /tmp/all.tgz .
