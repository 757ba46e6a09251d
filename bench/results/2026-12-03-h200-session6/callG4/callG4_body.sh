# Device call G4 (session 6): the landing code's full --perf suite (G3's was cut at 120 s), and for
# the next session an ncu of the bf16 grouped GEMM1 at deepseek-v3 T=4096 without the L2 prefetch
# (G1's report had it), to compare DRAM bytes per weight byte and the L2 hit rate.
set -u
export LD_LIBRARY_PATH=$PWD/.deps/cjson/lib
B=build-device; T=$B/test_gpu_forward; L=$O/suite
mkdir -p $L $O/ncu
t0=$SECONDS
mark() { echo "$1: rc=$2 at $((SECONDS - t0)) s; $(tail -n 1 $3 2>/dev/null)" >> $O/call.log; }
run() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $L/$n.log 2>&1; mark $n $? $L/$n.log; }
( nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -lineinfo -Iinclude -Isrc/core -Isrc/cuda \
    -Isrc/cuda/hopper -Ilab -o /tmp/grouped_lab lab/grouped_lab.cu -lcuda > /tmp/lab.log 2>&1; echo $? > /tmp/lab.rc ) &
STAGES=build OUT=$L timeout 150 bash tests/gpu/run_on_device.sh > /dev/null 2>&1; mark build $? /dev/null
wait; mark build_lab "$(cat /tmp/lab.rc)" /tmp/lab.log
run test_perf 240 $T --perf 1,8,64,512,4096
run ncu_up 90 ncu --clock-control none --set full --import-source no -k regex:grouped_gemm_kernel --launch-count 1 \
    -o $O/ncu/bf16_up_deepseek_4096_noprefetch /tmp/grouped_lab --shapes deepseek --tokens 4096 --variants up_staged
for r in $O/ncu/*.ncu-rep; do
    ncu -i $r --page details --print-units base > ${r%.ncu-rep}.details.txt 2>&1
    ncu -i $r --page raw --csv > ${r%.ncu-rep}.raw.csv 2>&1
done
mark done 0 /dev/null
