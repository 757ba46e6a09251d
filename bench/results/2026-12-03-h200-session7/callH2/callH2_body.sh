# Device call H2 (session 7). H1 showed the engine's TMA ring alone streams gpt-oss's GEMM2 weights
# at 4.27 TB/s (0.53 ms), yet the real launch takes 0.717 ms. This call separates the consumer side:
# 1. stream_lab with the consumer spinning per stage (the MMA's time: a 128 x 256 x 64 step at the
#    grouped kernel's ~600 TFLOP/s is ~1900 cycles at 1.98 GHz) and per tile (an epilogue);
# 2. the real grouped kernel (grouped_lab) on gpt-oss / deepseek at T = 4096: shipped epilogue and
#    no-store variants, timed;
# 3. ncu of the real GEMM2 launch (gpt-oss T=4096) with the clocks as they run (--clock-control
#    none): SM clock, DRAM bytes and busy %, tensor pipe busy %.
# Prediction: the spin rows stay near 0.53 ms up to ~1900 cycles (the ring hides a consumer slower
# than the stream until it is the slower side), so the pipeline shape alone does not make 0.717 ms;
# ncu shows the SM clock below the 1.98 GHz boost while the tensor pipe and DRAM are both busy.
set -u
t0=$SECONDS
mark() { echo "$1: rc=$2 at $((SECONDS - t0)) s" >> $O/call.log; }
NV="nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -Iinclude -Isrc/core -Isrc/cuda -Isrc/cuda/hopper -Ilab"
$NV -o /tmp/stream_lab lab/stream_lab.cu -lcuda > $O/build_stream.log 2>&1; mark build_stream $?
$NV -o /tmp/grouped_lab lab/grouped_lab.cu -lcuda > $O/build_grouped.log 2>&1; mark build_grouped $?
S=/tmp/stream_lab
for ts in 0 8000; do
  timeout 60 $S --shape gptoss_down --spins 0,900,1400,1900,2400,3000 --tile-spin $ts >> $O/stream_spin.log 2>&1
  mark "stream spins tile-spin $ts" $?
done
timeout 60 $S --shape deepseek_up --spins 0,1900 --tile-spin 8000 >> $O/stream_spin.log 2>&1; mark "stream deepseek" $?
G=/tmp/grouped_lab
for sh in gptoss deepseek; do
  timeout 120 $G --shapes $sh --tokens 4096 --variants up_staged,up_none,down_staged,down_none > $O/grouped_$sh.log 2>&1
  mark "grouped $sh" $?
done
M="gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,gpc__cycles_elapsed.max,dram__bytes_read.sum,dram__bytes_write.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed,sm__inst_executed_pipe_tensor_op_hmma.sum,lts__t_sector_hit_rate.pct,sm__throughput.avg.pct_of_peak_sustained_elapsed"
for v in down_staged down_none; do
  timeout 120 ncu --clock-control none --kernel-name regex:grouped_gemm_kernel --launch-count 1 --metrics $M \
    $G --shapes gptoss --tokens 4096 --variants $v --check-only > $O/ncu_gptoss_$v.log 2>&1; mark "ncu $v" $?
done
timeout 120 ncu --kernel-name regex:grouped_gemm_kernel --launch-count 1 --metrics $M \
  $G --shapes gptoss --tokens 4096 --variants down_staged --check-only > $O/ncu_gptoss_down_staged_lockedclock.log 2>&1
mark "ncu locked" $?
