#!/usr/bin/env bash
# The PDL contract (src/cuda/pdl.cuh) on the CUDA backend's sources, by tools/pdl_check.py: every
# kernel calls pdl_wait(), every launch but measure.cu's goes through cudaLaunchKernelEx (so
# MOEFUSE_PDL=1 reaches the whole forward), each inside launched(). First the checker itself on
# planted sources: a kernel without the wait, a <<<>>> launch and an unwrapped cudaLaunchKernelEx
# must each be reported.
#   ctest runs: bash tests/test_pdl_contract.sh <build>/moefuse   (MOEFUSE_SOURCE_DIR = the source tree)
# Exit 77 (SKIP) when python3 is missing.
. "$(dirname "$0")/python_tool_env.sh"
fails=0
check() { # name, expected exit status, checker arguments...
  local name=$1 want=$2
  shift 2
  "$python" "$src/tools/pdl_check.py" "$@" >"$tmp/out" 2>&1
  local got=$?
  if [ "$got" -eq "$want" ]; then echo "ok   $name"; else
    echo "FAIL $name: exit $got, expected $want"; cat "$tmp/out"; fails=$((fails + 1)); fi
}
expect_line() { # name, text the last run must have printed
  if grep -qF "$2" "$tmp/out"; then echo "ok   $1"; else echo "FAIL $1: no '$2' in"; cat "$tmp/out"; fails=$((fails + 1)); fi
}

cat >"$tmp/good.cu" <<'K'
// a comment naming __global__ void fake(int) { } is not a kernel
__global__ void declared_only(int n);
template <int N> __global__ void __launch_bounds__(128, 1) waits(const int *p, int n) {
    extern __shared__ int s[];
    pdl_wait();
    pdl_launch_dependents();
    if (threadIdx.x < n) s[threadIdx.x] = p[threadIdx.x] + N;
}
K
check "a kernel that waits, a declaration, a comment" 0 "$tmp/good.cu"
expect_line "counts one kernel" "1 kernels, 0 violations"

cat >"$tmp/nowait.cu" <<'K'
__global__ void waits(int *p) { pdl_wait(); p[0] = 1; }
__global__ void forgets(int *p) {
    /* pdl_wait(); in a comment does not count */
    const char *s = "pdl_wait()"; // nor in a string
    p[0] = 2;
}
K
check "a kernel without the wait" 1 "$tmp/nowait.cu"
expect_line "names it" "kernel forgets does not call pdl_wait()"

cat >"$tmp/chevrons.cu" <<'K'
__global__ void k(int *p) { pdl_wait(); p[0] = 1; }
void launch(int *p) { k<<<1, 32>>>(p); }
K
check "a <<<>>> launch" 1 "$tmp/chevrons.cu"
expect_line "names its line" "chevrons.cu:2: <<<...>>> launch"
check "a <<<>>> launch in an allowed file" 0 --allow-chevrons chevrons.cu "$tmp/chevrons.cu"

cat >"$tmp/unwrapped.cu" <<'K'
__global__ void k(int *p) { pdl_wait(); p[0] = 1; }
cudaError_t good(const cudaLaunchConfig_t *c, int *p) { return launched(cudaLaunchKernelEx(c, k, p)); }
cudaError_t bad(const cudaLaunchConfig_t *c, int *p) {
    return cudaLaunchKernelEx(c, k, p);
}
K
check "a cudaLaunchKernelEx outside launched()" 1 "$tmp/unwrapped.cu"
expect_line "names its line" "unwrapped.cu:4: cudaLaunchKernelEx outside launched()"
expect_line "and only that one" "1 kernels, 1 violations"

check "src/cuda" 0 --allow-chevrons measure.cu "$src/src/cuda"
cat "$tmp/out"

[ "$fails" -eq 0 ] && echo "test_pdl_contract: all passed" || echo "test_pdl_contract: $fails failed"
[ "$fails" -eq 0 ]
