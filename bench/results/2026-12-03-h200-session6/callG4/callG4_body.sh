# Device call G4 (session 6): the landing code's full --perf suite (G3's was cut at 120 s). (An ncu of
# the bf16 grouped GEMM1 without the L2 prefetch was dropped: two refused starts left too little
# device budget.)
set -u
export LD_LIBRARY_PATH=$PWD/.deps/cjson/lib
B=build-device; T=$B/test_gpu_forward; L=$O/suite
mkdir -p $L
t0=$SECONDS
mark() { echo "$1: rc=$2 at $((SECONDS - t0)) s; $(tail -n 1 $3 2>/dev/null)" >> $O/call.log; }
run() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > $L/$n.log 2>&1; mark $n $? $L/$n.log; }
STAGES=build OUT=$L timeout 150 bash tests/gpu/run_on_device.sh > /dev/null 2>&1; mark build $? /dev/null
run test_perf 170 $T --perf 1,8,64,512,4096
mark done 0 /dev/null
