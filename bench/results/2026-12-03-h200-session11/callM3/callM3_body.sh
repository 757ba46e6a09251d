# Device call M3 (session 11): M2's lab probes again, now running (M2's were refused by the lab's
# own staged-epilogue check, which needs an output buffer: fixed, the probes now write into the
# shipped variant's buffer and are not value-checked), and ncu SpeedOfLight of deepseek GEMM1
# (T=16384) none vs staged: M2 measured its staged epilogue at 23 us per tile against ~5 on the
# other shapes; is that the epilogue, or a lower SM clock over the whole 93 us mainloop?
# Prediction (before the run): as M2's: nostore recovers most of GEMM2's excess and about half of
# GEMM1's; notable 1-2 us per tile. deepseek GEMM1: the staged variant runs at a lower SM clock
# than none (the ~20% of the excess).
set -u
LB=$O/lab; mkdir -p $LB
t0=$SECONDS
mark() { echo "$1: rc=$2 at $((SECONDS - t0)) s; $(tail -n 1 $3 2>/dev/null)" >> $O/call.log; }
nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -lineinfo -Xptxas -v -Iinclude -Isrc/core -Isrc/cuda \
  -Isrc/cuda/hopper -Ilab -o /tmp/grouped_lab lab/grouped_lab.cu > $LB/build.log 2>&1; mark build_lab $? /dev/null
V=up_none,up_staged,up_staged_nostore,up_staged_notable,down_none,down_staged,down_staged_nostore,down_staged_notable
for i in 1 2; do for t in 4096 16384; do
  LAB_SEED=$((1000 + i)) timeout 60 /tmp/grouped_lab --shapes qwen3,gptoss,mixtral,deepseek --tokens $t --variants $V \
    --json $LB/lab_${t}_$i.jsonl > $LB/lab_${t}_$i.log 2>&1
  mark "lab T=$t seed $i" $? $LB/lab_${t}_$i.log
done; done
for v in up_none up_staged up_staged_nostore; do
  LAB_SEED=1001 timeout 60 ncu --clock-control none --cache-control none --section SpeedOfLight --csv \
    --kernel-name regex:grouped_gemm_kernel --launch-skip 2 --launch-count 2 \
    /tmp/grouped_lab --shapes deepseek --tokens 16384 --variants $v > $LB/ncu_deepseek_$v.csv 2>&1
  mark "ncu $v" $? /dev/null
done
mark done 0 /dev/null
