# Device call G1 (session 6): the landing code of session 5 (35365d0) on the H200:
# 1. suite --selftest and --quick (0e4a224's tiny-scale encoder fix was never run on a GPU);
# 2. roofline --measure run 5 (measure + bench stages): the first on code with the faster GLU;
# 3. the grouped lab's epilogue split (no-store vs shipped) at T=4096, bf16 and FP8, on the
#    four PERF shapes: the cost per tile of the staged epilogue at the shapes that miss;
# 4. ncu (full set) of the bf16 grouped GEMM1 at deepseek T=4096 and GEMM2 at gpt-oss T=4096, and
#    of the FP8 grouped GEMM1 at qwen3 T=16384 (its staged epilogue cost 41% there in session 4).
set -u
export LD_LIBRARY_PATH=$PWD/.deps/cjson/lib
B=build-device; T=$B/test_gpu_forward; L=$O/suite
mkdir -p $L $O/glab $O/glab_fp8 $O/ncu
t0=$SECONDS
mark() { echo "$1: rc=$2 at $((SECONDS - t0)) s; $(tail -n 1 $3 2>/dev/null)" >> $O/call.log; }
run() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $L/$n.log 2>&1; mark $n $? $L/$n.log; }
STAGES=build OUT=$L timeout 150 bash tests/gpu/run_on_device.sh > /dev/null 2>&1; mark build $? /dev/null
run selftest 30 $T --selftest
run test_quick 60 $T --quick
OUT=$O/measure STAGES="build measure bench" DEADLINE=230 timeout 240 bash tests/gpu/measure_on_device.sh \
    > $O/measure/stdout.log 2>&1; mark measure $? $O/measure/stdout.log
SH=deepseek,gptoss,qwen3,mixtral
OUT=$O/glab SHAPES=$SH TOKENS=4096 VARIANTS=up_none,up_staged,down_none,down_staged SUITE=0 LAB_LIMIT=60 \
    timeout 100 bash lab/run_grouped_on_device.sh > $O/glab/run.log 2>&1; mark glab $? $O/glab/run.log
OUT=$O/glab_fp8 LAB=fp8 SHAPES=$SH TOKENS=4096 SUITE=0 LAB_LIMIT=60 LAB_BUILD=/tmp/glab8 \
    timeout 100 bash lab/run_grouped_on_device.sh > $O/glab_fp8/run.log 2>&1; mark glab_fp8 $? $O/glab_fp8/run.log
NCU="ncu --clock-control none --set full --import-source no"
G=/tmp/moefuse-grouped-lab/grouped_lab
run ncu_up 90 $NCU -k regex:grouped_gemm_kernel --launch-count 1 -o $O/ncu/bf16_up_deepseek_4096 \
    $G --shapes deepseek --tokens 4096 --variants up_staged
run ncu_down 90 $NCU -k regex:grouped_gemm_kernel --launch-count 1 -o $O/ncu/bf16_down_gptoss_4096 \
    $G --shapes gptoss --tokens 4096 --variants down_staged
run ncu_fp8_up 90 $NCU -k regex:grouped_fp8 --launch-count 1 -o $O/ncu/fp8_up_qwen3_16384 \
    /tmp/glab8/grouped_lab --fp8 --shapes qwen3 --tokens 16384 --variants fp8_up_staged
for r in $O/ncu/*.ncu-rep; do
    ncu -i $r --page source --csv --print-source sass > ${r%.ncu-rep}.sass.csv 2>&1
    ncu -i $r --page details --print-units base > ${r%.ncu-rep}.details.txt 2>&1
    ncu -i $r --page raw --csv > ${r%.ncu-rep}.raw.csv 2>&1
done
mark done 0 /dev/null
