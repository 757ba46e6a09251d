# Device call Q6 (session 14): the gather rule as the default (moe__hopper_gather_select: GEMM1
# gathers its rows at <= 256 routed rows per expert or I <= 1024, from Q5's A/B).
# 1. build; test_gpu_forward --quick (the default now mixes both kinds of GEMM1), memcheck of
#    --quick --gemm hopper.
# 2. bench_gpu_forward bf16 --gemm hopper, default vs MOEFUSE_HOPPER_A=permute, 3 alternated rounds:
#    PERF.md's shapes at T = 512, 4096, 16384 and issue 4's untuned shapes (qwen3-235b-a22b,
#    glm-4.5-air, qwen3-next-80b-a3b, gpt-oss-20b) at T = 4096 and 16384.
# Prediction (before the run): tests pass. default/permute: where the rule keeps permute (mixtral
#   4096/16384, deepseek and gpt-oss 16384, gpt-oss-20b both, qwen3-235b and glm-4.5-air 16384),
#   1.00 +-0.03 (same code); where it gathers: T=4096 deepseek 0.92-0.97, gpt-oss 0.90-0.96, qwen3
#   0.90-0.96, qwen3 16384 0.91-0.97; T=512 (qwen3 32 rows, mixtral 128 rows a expert; deepseek
#   and gpt-oss run the swapped kernel there: 1.00) 0.93-1.01; untuned qwen3-235b and glm-4.5-air
#   at 4096 (256 rows) 0.92-0.99, qwen3-next (I = 512) 0.88-0.97 at both T.
set -u
export LD_LIBRARY_PATH=$PWD/.deps/cjson/lib
L=$O/suite; F=$O/fwd; mkdir -p $L $F
B=build-device; T=$B/test_gpu_forward
t0=$SECONDS
mark() { echo "$1: rc=$2 at $((SECONDS - t0)) s; $(tail -n 1 $3 2>/dev/null)" >> $O/call.log; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,power.limit --format=csv > $L/gpu.txt 2>&1
STAGES=build OUT=$L timeout 150 bash tests/gpu/run_on_device.sh > $L/build_stdout.log 2>&1; mark build $? $L/build_stdout.log
run() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $L/$n.log 2>&1; mark $n $? $L/$n.log; }
run test_quick 60 $T --quick
run memcheck 60 compute-sanitizer --error-exitcode 3 --tool memcheck $T --quick --gemm hopper
P="--shapes qwen3-30b-a3b,gpt-oss-120b,mixtral-8x7b,deepseek-v3 --tokens 512,4096,16384 --gemm hopper --dtype bf16"
U="--shapes qwen3-235b-a22b,glm-4.5-air,qwen3-next-80b-a3b,gpt-oss-20b --tokens 4096,16384 --gemm hopper --dtype bf16"
for i in 1 2 3; do
  timeout 45 $B/bench_gpu_forward $P > $F/default_$i.log 2>&1; timeout 45 $B/bench_gpu_forward $U >> $F/default_$i.log 2>&1
  mark "fwd default $i" $? /dev/null
  MOEFUSE_HOPPER_A=permute timeout 45 $B/bench_gpu_forward $P > $F/permute_$i.log 2>&1
  MOEFUSE_HOPPER_A=permute timeout 45 $B/bench_gpu_forward $U >> $F/permute_$i.log 2>&1
  mark "fwd permute $i" $? /dev/null
done
python3 tools/ab_summary.py $F default permute > $F/ab_fwd.md 2>&1
mark done 0 /dev/null
