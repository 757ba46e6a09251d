// Programmatic dependent launch (PDL, sm_90): a kernel launched with it may be scheduled while
// the kernel before it in the stream still runs, so that its launch and its CTAs' start-up
// overlap the tail of that kernel instead of following it. At decode sizes the forward is a
// chain of 5-9 short kernels (qwen3-30b-a3b T=1: 45 us against an 18 us memory floor), where
// those gaps are a visible share.
//
// The contract, which makes the overlap invisible to every result:
//   - Every kernel of the backend calls pdl_wait() before its first access to global memory
//     (reads and writes; tests/test_pdl_contract.sh checks that each __global__ function calls it).
//     pdl_wait returns once the previous kernel has completed and its writes are visible (at
//     once when the kernel was not launched with PDL), so a kernel sees exactly what stream
//     order gives it. Only shared-memory set-up (barriers, tensor-map prefetch) may come first.
//   - The forward's kernels call pdl_launch_dependents() right after their wait: the next kernel
//     may then be scheduled (it parks in its own pdl_wait until this one completes). Waiting before
//     signalling keeps the chain one kernel deep: when kernel n+1 starts, kernel n-1 is done.
//     Kernels that exit early still wait first, so a grid can never complete before the one
//     before it.
//   - The host asks for it per launch (launch_kernel, pdl_add_attribute) only when MOEFUSE_PDL=1
//     (read once per process). A kernel not launched with it loses nothing: both calls are no-ops.
//     Every cudaLaunchKernelEx's status goes through launched(), which clears the runtime's last
//     error on failure as cudaGetLastError() after <<<>>> did.
// Inside a CUDA graph capture the attribute becomes a programmatic edge between two kernel nodes,
// the only nodes such an edge may join (driver_types.h); what capture does with it after a memset
// is not documented, so the forward zeroes its words with a kernel (zero_words_launch) and is a
// chain of kernels only. The GPU suite with MOEFUSE_PDL=1 (every case also captured) checks it.
#ifndef MOEFUSE_CUDA_PDL_CUH
#define MOEFUSE_CUDA_PDL_CUH

#include <cuda_runtime.h>
#include <stdlib.h>
#include <string.h>

__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;\n" ::: "memory"); // no load or store moves above it
#endif
}

__device__ __forceinline__ void pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;\n" ::); // scheduling only: no memory order
#endif
}

// Whether launches ask for PDL: MOEFUSE_PDL=1 (anything else, or unset: no). Off by default until
// measured on the H200 (bench/results/next-session/session26_pdl.sh).
inline bool pdl_env() {
    const char *env = getenv("MOEFUSE_PDL");
    return env != NULL && strcmp(env, "1") == 0;
}
inline bool pdl_requested() {
    static const bool on = pdl_env();
    return on;
}

// Appends the PDL attribute to cfg when pdl_requested(); attrs is cfg's attribute storage (cfg->attrs
// points into it or is NULL) with room for one more.
inline void pdl_add_attribute(cudaLaunchConfig_t *cfg, cudaLaunchAttribute *attrs) {
    if (!pdl_requested()) return;
    attrs[cfg->numAttrs].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attrs[cfg->numAttrs].val.programmaticStreamSerializationAllowed = 1;
    cfg->attrs = attrs;
    cfg->numAttrs += 1;
}

// A launch's status as cudaLaunchKernelEx returns it, with the runtime's last error cleared when it
// failed (as `kernel<<<>>>; return cudaGetLastError();` did), so that the failure is reported once,
// here, and not again by the next cudaGetLastError() of someone else's call.
inline cudaError_t launched(cudaError_t err) {
    if (err != cudaSuccess) (void)cudaGetLastError();
    return err;
}

// kernel<<<grid, block, smem, stream>>>(args...) as cudaLaunchKernelEx, with PDL when requested and
// its status through launched(). A forwarder of the arguments, as cudaLaunchKernelEx itself is; the
// persistent kernels' launches (persistent_launch_config: clusters) call cudaLaunchKernelEx directly.
template <typename... Params, typename... Args>
cudaError_t launch_kernel(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                          Args... args) {
    cudaLaunchConfig_t cfg = cudaLaunchConfig_t{};
    cudaLaunchAttribute attr[1];
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = stream;
    pdl_add_attribute(&cfg, attr);
    return launched(cudaLaunchKernelEx(&cfg, kernel, args...));
}

#endif
