# Device call J1 (session 8): the first run of lab/decode_swap_lab.cu (session 7, written without a GPU),
# then session 7's prepared deepseek tables probe.
# Prediction (written before the run): --check passes on all three shapes; at T <= 64 the swapped
# kernel streams the touched experts' weights at >= 85% of the read ceiling measured in the same
# process on gptoss and deepseek (NT=8 at T=1,8; NT=32 at T=64), lower on qwen3 T=1 (12.6 MB: launch
# and fill dominate). The shipped FP8 decode instantiation streams at 55-79% (docs/hopper_gemm.md).
set -u
t0=$SECONDS
nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -Iinclude -Isrc/core -Isrc/cuda -Isrc/cuda/hopper -Ilab \
  -o /tmp/dsl lab/decode_swap_lab.cu -lcuda > $O/build.log 2>&1; echo "build rc=$? at $((SECONDS-t0)) s" >> $O/call.log
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,clocks.max.sm,temperature.gpu,power.draw --format=csv > $O/smi.log 2>&1
timeout 120 /tmp/dsl --check --tokens 1,8,64 > $O/dsl_check.log 2>&1; echo "check rc=$? at $((SECONDS-t0)) s" >> $O/call.log
for nt in 8 16 32; do
  timeout 150 /tmp/dsl --nt $nt --tokens 1,8,64 > $O/dsl_nt$nt.log 2>&1; echo "nt $nt rc=$? at $((SECONDS-t0)) s" >> $O/call.log
done
mkdir -p $O/probe
O=$O/probe timeout 200 bash bench/results/next-session/deepseek_tables_probe.sh; echo "probe rc=$? at $((SECONDS-t0)) s" >> $O/call.log
