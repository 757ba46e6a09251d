# Device call Q3 (session 14): what lands, measured whole.
# 1. The bf16 bench with every peer (bench/run_on_device.sh: torch._grouped_mm, the torch loop,
#    dense-equivalent cuBLAS, the ceilings), four shapes x T = 1 .. 16384, on this commit: GEMM1's
#    act-first epilogue (session 13), GEMM2's idle-warpgroup skip and gpt-oss's 240-wide tiles
#    (Q2). The README's bf16 table is session 12's N1, from before all three.
# 2. test_gpu_forward --filter tma --gemm hopper without --quick (the T=700 runs fixed after Q2, the
#    bn240 case's both runs), then --perf 512,4096 --gemm hopper (the PERF.md shapes, bf16 and FP8).
# Prediction (before the run): all tests pass. bench bf16 speed-ups vs torch._grouped_mm within
#   +-3% of N1's at T <= 512 (decode and small-T paths unchanged); at T = 4096 and 16384 up to 3%
#   higher on deepseek and qwen3 (P6 act-first 0.99-1.0, Q2 skip 0.988 on deepseek), gpt-oss and
#   mixtral within +-3%.
set -u
mkdir -p $O/suite
export LD_LIBRARY_PATH=$PWD/.deps/cjson/lib
t0=$SECONDS
mark() { echo "$1: rc=$2 at $((SECONDS - t0)) s; $(tail -n 1 $3 2>/dev/null)" >> $O/call.log; }
TOTAL_S=210 OUT=$O/bf16 timeout 215 bash bench/run_on_device.sh --target-s 0.1 > $O/bf16_run.log 2>&1; mark bf16 $? $O/bf16_run.log
STAGES=build OUT=$O/suite timeout 150 bash tests/gpu/run_on_device.sh > $O/suite/build_stdout.log 2>&1; mark build $? $O/suite/build_stdout.log
T=build-device/test_gpu_forward
timeout 90 $T --filter tma --gemm hopper > $O/suite/tma_full.log 2>&1; mark tma_full $? $O/suite/tma_full.log
timeout 200 $T --perf 512,4096 --gemm hopper > $O/suite/perf.log 2>&1; mark perf $? $O/suite/perf.log
mark done 0 /dev/null
