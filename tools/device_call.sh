# Sourced (from the repo root) by the device-call scripts under bench/results/: the prologue they
# all share. Sets R (the repo root), O (the outputs: $O, else $OUT), the carried cJSON on
# LD_LIBRARY_PATH, T and B (the GPU test and the forward bench in build-device); defines
#   mark NAME RC LOG   one line into $O/call.log: the step, its exit status, the seconds since the
#                      start and LOG's last line;
#   build_device       the GPU suite's build stage (tests/gpu/run_on_device.sh), logs in $O/build;
#   build_device_and_glab  the same, and the grouped lab (/tmp/glab) compiled beside it.
R=$PWD
O=${O:-$OUT}
mkdir -p "$O"
export LD_LIBRARY_PATH=$R/.deps/cjson/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
T=build-device/test_gpu_forward
B=build-device/bench_gpu_forward
call_t0=$SECONDS
mark() { echo "$1: rc=$2 at $((SECONDS - call_t0)) s; $(tail -n 1 "$3" 2>/dev/null)" >>"$O/call.log"; }
build_device() {
    STAGES=build OUT=$O/build timeout 150 bash tests/gpu/run_on_device.sh >"$O/build_stdout.log" 2>&1
    mark build $? "$O/build_stdout.log"
}
# build_device_and_glab: build_device, with lab/grouped_lab.cu compiled into /tmp/glab beside it.
build_device_and_glab() {
    nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -lineinfo -Iinclude -Isrc/core -Isrc/cuda \
        -Isrc/cuda/hopper -Ilab -o /tmp/glab lab/grouped_lab.cu >"$O/build_glab.log" 2>&1 &
    local glab_pid=$!
    build_device
    wait $glab_pid
    mark "grouped lab build" $? "$O/build_glab.log"
}
# glab_prebuilt_or_build: /tmp/glab from build-device/glab (built and stripped on the CPU machine, carried)
# with PREBUILT=1, else compiled here (logs in $O/build_glab.log).
glab_prebuilt_or_build() {
    if [ "${PREBUILT:-0}" = 1 ] && [ -x build-device/glab ]; then
        cp build-device/glab /tmp/glab
        mark "lab prebuilt, carried" $? /dev/null
    else
        nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -lineinfo -Iinclude -Isrc/core -Isrc/cuda \
            -Isrc/cuda/hopper -Ilab -o /tmp/glab lab/grouped_lab.cu >"$O/build_glab.log" 2>&1
        mark "grouped lab build" $? "$O/build_glab.log"
    fi
}
# A/B calls (the change committed as PATCH beside the call script; the base is this tree without it):
#   base_tree PATCH    /tmp/base = this tree (no build-device, no bench/results) with PATCH reversed;
#   build_base_bench   cmake build of the base's bench_gpu_forward into /tmp/base/build-base (BB),
#                      run it in the background beside build_device and `wait` for both.
base_tree() {
    rm -rf /tmp/base && mkdir -p /tmp/base &&
        tar --exclude=./build-device --exclude=./bench/results -cf - . | tar -xf - -C /tmp/base
    (cd /tmp/base && patch -R -p1 <"$R/$1") >"$O/base_patch.log" 2>&1
    mark "base tree" $? "$O/base_patch.log"
}
BB=/tmp/base/build-base/bench_gpu_forward
build_base_bench() {
    (cd /tmp/base && cmake -S . -B build-base -DCMAKE_BUILD_TYPE=Release -DMOEFUSE_CUDA=ON \
        -DCJSON_INCLUDE_DIR="$R/.deps/cjson/include" -DCJSON_LIBRARY="$R/.deps/cjson/lib/libcjson.so" &&
        cmake --build build-base -j 6 --target bench_gpu_forward) >"$O/build_base.log" 2>&1
}
# forward_arms DIR PREFIX ROUNDS SHAPES TOKENS ARM...: bench_gpu_forward ($B --gemm hopper) once per arm
# per round, each round's order rotated by one (the first arm leads no more often than the others);
# ARM is NAME, or NAME:VAR=VALUE[ VAR=VALUE...], the environment that arm alone runs under. Logs
# DIR/PREFIX<NAME>_<round>.log with a mark each, then tools/ab_summary.py --rounds over the arms -> DIR/ab.md
# (medians, then the first arm over each other arm round by round).
forward_arms() {
    local dir=$1 prefix=$2 rounds=$3 shapes=$4 tokens=$5
    shift 5
    local arms=("$@") n=$# i j spec name log
    mkdir -p "$dir"
    for ((i = 1; i <= rounds; i++)); do
        for ((j = 0; j < n; j++)); do
            spec=${arms[$(((i + j) % n))]}
            name=${spec%%:*}
            local vars=()
            [ "$spec" != "$name" ] && read -r -a vars <<<"${spec#*:}"
            log=$dir/$prefix${name}_$i.log
            env "${vars[@]}" timeout 45 $B --shapes "$shapes" --tokens "$tokens" --gemm hopper >"$log" 2>&1
            mark "forward $name $i" $? "$log"
        done
    done
    local names=("${arms[@]%%:*}")
    python3 tools/ab_summary.py --rounds "$dir" "${names[@]/#/$prefix}" >"$dir/ab.md" 2>&1
    mark "forward summary" $? "$dir/ab.md"
}
