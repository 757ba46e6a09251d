# Device call R4 (session 15): the bf16 path rule between the swapped decode kernel (<= 16 routed
# rows per expert) and the Hopper tiles (moe__gemm_select: >= 128 rows per expert), where v1's
# mma.sync tiles run today. Call R3 found qwen3-next-80b-a3b at T=4096 (80 rows per expert) on v1
# by that rule, while call R2 measured the Hopper path 2.01x faster there (forced).
# bench_gpu_forward --gemm v1,hopper (both in one process per cell), 2 rounds, at 24-96 rows per
# expert on six shapes.
# Prediction (before the run): hopper/v1 time 0.45-0.9 at every cell (Hopper faster from 24 rows
# per expert on; smallest gain at 24 rows, where 81% of each 128-row block is padding).
set -u
export LD_LIBRARY_PATH=$PWD/.deps/cjson/lib
F=$O/fwd; mkdir -p $F
t0=$SECONDS
mark() { echo "$1: rc=$2 at $((SECONDS - t0)) s" >> $O/call.log; }
STAGES=build OUT=$O/build timeout 150 bash tests/gpu/run_on_device.sh > $O/build_stdout.log 2>&1; mark build $?
B=build-device/bench_gpu_forward
run() { timeout 60 $B --shapes $1 --tokens $2 --gemm v1,hopper --dtype bf16 >> $F/mid_$3.log 2>&1; mark "$1 $2 round $3" $?; }
for i in 1 2; do
  run qwen3-30b-a3b 384,512,1024,1536 $i
  run deepseek-v3 768,1024,2048,3072 $i
  run gpt-oss-120b 768,1024,2048,3072 $i
  run mixtral-8x7b 96,128,256,384 $i
  run qwen3-next-80b-a3b 1024,2048,4096 $i
  run glm-4.5-air 512,1024,2048 $i
done
python3 - $F > $F/hopper_vs_v1.md 2>&1 <<'PY'
import glob, statistics, sys
t = {}
for f in sorted(glob.glob(sys.argv[1] + "/mid_[0-9].log")):
    for line in open(f):
        p = line.split()
        if len(p) >= 4 and p[1].isdigit():
            t.setdefault((p[0], int(p[1])), {}).setdefault(p[2], []).append(float(p[3]))
print("| shape | T | v1 ms | hopper ms | hopper / v1 | runs |\n|---|---|---|---|---|---|")
for k in sorted(t):
    v1, hp = t[k].get("v1", []), t[k].get("hopper", [])
    if v1 and hp:
        a, b = statistics.median(v1), statistics.median(hp)
        print(f"| {k[0]} | {k[1]} | {a:.4f} | {b:.4f} | {b/a:.3f} | {len(v1)}/{len(hp)} |")
PY
mark done 0
