# Device call Q4 (session 14): is Q3's qwen3 T=16384 (2.836 ms in bench_moe, against 2.632 in
# session 12's N1 and 2.54-2.61 in Q2's bench_gpu_forward) a regression of this session's or
# session 13's changes, or the run's?
# bench_moe (the README's harness), moefuse and torch_grouped_mm only, qwen3 and gpt-oss at T = 4096
# and 16384, 3 alternated rounds of: new (this commit), base (q2.patch reversed: baa5080's src/,
# before GEMM2's skip and the 240-wide tiles), staged (new with MOEFUSE_HOPPER_EPI=staged: GEMM1's
# epilogue as before session 13).
# Prediction (before the run): new/base and staged/new within +-3% on both shapes (Q2, P6); Q3's
# qwen3 figure was the run's (drift), so qwen3 T=16384 new comes out at 2.55-2.70 ms.
set -u
mkdir -p $O/q
export LD_LIBRARY_PATH=$PWD/.deps/cjson/lib
CJ=(-DCJSON_INCLUDE_DIR=$PWD/.deps/cjson/include -DCJSON_LIBRARY=$PWD/.deps/cjson/lib/libcjson.so)
t0=$SECONDS
mark() { echo "$1: rc=$2 at $((SECONDS - t0)) s; $(tail -n 1 $3 2>/dev/null)" >> $O/call.log; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,power.limit --format=csv > $O/q/gpu.txt 2>&1
{ cmake -S . -B build-device -DCMAKE_BUILD_TYPE=Release -DMOEFUSE_CUDA=ON "${CJ[@]}" && cmake --build build-device -j 16 --target moefuse; } > $O/q/build.log 2>&1
mark build $? $O/q/build.log
{ patch -R -p1 < bench/results/2026-12-03-h200-session14/callQ2/q2.patch &&
  cmake -S . -B build-base -DCMAKE_BUILD_TYPE=Release -DMOEFUSE_CUDA=ON "${CJ[@]}" && cmake --build build-base -j 16 --target moefuse; } > $O/q/build_base.log 2>&1
mark build_base $? $O/q/build_base.log
for i in 1 2 3; do
  for arm in new base staged; do
    case $arm in base) LIB=$PWD/build-base/libmoefuse.so; EPI=;; staged) LIB=$PWD/build-device/libmoefuse.so; EPI=staged;; *) LIB=$PWD/build-device/libmoefuse.so; EPI=;; esac
    MOEFUSE_LIB=$LIB MOEFUSE_HOPPER_EPI=$EPI timeout 60 python3 bench/bench_moe.py --shapes qwen3-30b-a3b,gpt-oss-120b \
      --tokens 4096,16384 --impls moefuse,torch_grouped_mm --target-s 0.1 --seed $((1440 + i)) \
      --out $O/q/${arm}_$i.json > $O/q/${arm}_$i.log 2>&1
    mark "$arm $i" $? $O/q/${arm}_$i.log
  done
done
python3 $R/bench/results/2026-12-03-h200-session14/callQ4/bench_ab.py $O/q new base staged > $O/q/ab.md 2>&1
mark done 0 /dev/null
