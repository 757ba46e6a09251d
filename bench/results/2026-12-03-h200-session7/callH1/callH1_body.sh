# Device call H1 (session 7): the weight-streaming lab (lab/stream_lab.cu) on two shapes.
# Prediction (written before the run): the engine-like ring (box 256 x 4 stages + A box) streams at
# ~3.2 TB/s as the grouped launches do; if the box shape (256 rows x 128 bytes) is the cap, the
# linear variants (same ring, contiguous bytes) reach >= 3.8 TB/s and "pair" lands between; if the
# bytes in flight are the cap, x6 > x4 > x2 in both the box and linear rows.
set -u
t0=$SECONDS
nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -Iinclude -Isrc/core -Isrc/cuda -Isrc/cuda/hopper -Ilab \
  -o /tmp/stream_lab lab/stream_lab.cu -lcuda > $O/build.log 2>&1; echo "build rc=$? at $((SECONDS-t0)) s" >> $O/call.log
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,clocks.max.sm,temperature.gpu,power.draw --format=csv > $O/smi.log 2>&1
for s in gptoss_down deepseek_up gptoss_down; do
  timeout 120 /tmp/stream_lab --shape $s --reps 7 >> $O/stream_$s.log 2>&1; echo "$s rc=$? at $((SECONDS-t0)) s" >> $O/call.log
done
