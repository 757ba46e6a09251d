#!/usr/bin/env bash
# Device call S2 (session 16): issue 4's "GPU suite green and compute-sanitizer clean with the
# new engine in place". The suite without --quick (every case on both paths, v1 and hopper; never
# completed in one run before: R1's hopper-only run was cut at 150 s after 433 cases, 0 failed),
# and, beside it in a second process, compute-sanitizer memcheck on --quick with both paths.
# Prediction (before the run): the full suite completes in 250-400 s with 0 failed (~900-1000
# cases); memcheck 0 errors. Carry .deps.
set -u
R=$PWD; O=$OUT; L=$O/suite; mkdir -p $L
export LD_LIBRARY_PATH=$R/.deps/cjson/lib
t0=$SECONDS
mark() { echo "$1: rc=$2 at $((SECONDS - t0)) s; $(tail -n 1 $3 2>/dev/null)" >> $O/call.log; }
STAGES=build OUT=$L timeout 150 bash tests/gpu/run_on_device.sh > $L/build_stdout.log 2>&1; mark build $? $L/build_stdout.log
T=build-device/test_gpu_forward
( timeout 470 $T > $L/full.log 2>&1; mark full $? $L/full.log ) &
( timeout 470 compute-sanitizer --tool memcheck --leak-check no --error-exitcode 3 $T --quick > $L/memcheck_quick.log 2>&1; mark memcheck_quick $? $L/memcheck_quick.log ) &
wait
grep -c "^ok" $L/full.log >> $O/call.log; grep "^FAIL" $L/full.log | head -20 >> $O/call.log
cd $O && tar czf callS2.tgz suite call.log && rm -rf suite
