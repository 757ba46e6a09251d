// Device helpers shared by the CUDA backend's kernels: element types, conversions, and the
// PTX wrappers (cp.async, ldmatrix, mma.sync) the grouped GEMM is built from. C-like on
// purpose: free functions, plain structs, templates only over the element type.
#ifndef MOEFUSE_CUDA_COMMON_CUH
#define MOEFUSE_CUDA_COMMON_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

extern "C" {
#include "internal.h"
}

#include "cuda_backend.h"
#include "pdl.cuh"

// --- element conversions (the activation/weight dtype is bf16 or f16) ------------------
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(float v) { return v; }

template <typename T> __device__ __forceinline__ T from_float(float v);
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
template <> __device__ __forceinline__ __half from_float<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ float from_float<float>(float v) { return v; }

// Reads element `i` of a float-family array whose dtype is only known at run time.
__device__ __forceinline__ float load_as_float(const void *p, int64_t i, int dtype) {
    switch (dtype) {
    case MOE_DTYPE_BF16: return __bfloat162float(((const __nv_bfloat16 *)p)[i]);
    case MOE_DTYPE_F16: return __half2float(((const __half *)p)[i]);
    default: return ((const float *)p)[i];
    }
}

__device__ __forceinline__ void store_from_float(void *p, int64_t i, int dtype, float v) {
    switch (dtype) {
    case MOE_DTYPE_BF16: ((__nv_bfloat16 *)p)[i] = __float2bfloat16_rn(v); break;
    case MOE_DTYPE_F16: ((__half *)p)[i] = __float2half_rn(v); break;
    default: ((float *)p)[i] = v; break;
    }
}

// --- activations ------------------------------------------------------------------------
// NaN-preserving clamps, as the CPU oracle writes them.
__device__ __forceinline__ float clamp_above(float v, float hi) { return v > hi ? hi : v; }
__device__ __forceinline__ float clamp_both(float v, float lim) { return v > lim ? lim : v < -lim ? -lim : v; }
__device__ __forceinline__ float relu(float v) { return v < 0.0f ? 0.0f : v; }

// SiLU-type gate g * sigmoid(a g) with the hardware's exponential and reciprocal (ex2.approx,
// rcp.approx: __expf is within 2 + 1.17 |a g| ulp, ~1e-5 relative at worst for the arguments
// that matter, far below what bf16 or e4m3 A2 keep) instead of expf and an
// IEEE division, which cost ~25 instructions and a slow-path branch per value in GEMM1's
// epilogue. Large negative a g: the exponential is inf, the quotient -0 (as the IEEE form).
// The exponential is __expf's own (ex2.approx of x log2 e) in its .ftz form: only 1 + e^x is used,
// so a result below 2^-126, flushed to 0, gives the same sum, and the three instructions a value
// that __expf spends keeping such results exact go (session 23).
__device__ __forceinline__ float exp_ftz(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x * 1.44269504088896341f));
    return y;
}
__device__ __forceinline__ float silu_scaled(float g, float a) { return __fdividef(g, 1.0f + exp_ftz(-a * g)); }

// moe__activate (src/cpu/activation.c) in fp32: the one device copy, used by the epilogues of
// both GEMM1 paths (gemm.cu, gemm_hopper.cu).
__device__ __forceinline__ float glu_activate(int act, float alpha, float limit, float g, float u) {
    switch (act) {
    case MOE_ACT_SWIGLU:
        if (limit > 0.0f) {
            g = clamp_above(g, limit);
            u = clamp_both(u, limit);
        }
        return silu_scaled(g, 1.0f) * u;
    case MOE_ACT_GEGLU: return 0.5f * g * (1.0f + erff(g * 0.70710678118654752f)) * u;
    case MOE_ACT_GEGLU_TANH:
        return 0.5f * g * (1.0f + tanhf(0.79788456080286536f * (g + 0.044715f * g * g * g))) * u;
    case MOE_ACT_REGLU: return relu(g) * u;
    case MOE_ACT_RELU2: {
        float r = relu(g);
        return r * r;
    }
    case MOE_ACT_SWIGLU_OAI:
        g = clamp_above(g, limit);
        u = clamp_both(u, limit);
        return silu_scaled(g, alpha) * (u + 1.0f);
    }
    return __int_as_float(0x7fc00000);
}

// --- PTX wrappers -----------------------------------------------------------------------
__device__ __forceinline__ uint32_t smem_address(const void *p) {
    return (uint32_t)__cvta_generic_to_shared(p);
}

// 16-byte asynchronous copy global -> shared; with `valid` false the 16 bytes are zero-filled
// and nothing is read (src-size 0), so padding rows and K/N tails need no branch.
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void *src, bool valid) {
    int bytes = valid ? 16 : 0;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t addr, uint32_t &r0, uint32_t &r1, uint32_t &r2, uint32_t &r3) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(addr));
}

// D += A * B for one m16n8k16 tile, fp32 accumulate. A row-major fragment (4 regs), B
// "col" fragment (2 regs: B stored [n][k]).
template <typename T> __device__ __forceinline__ void mma_16816(float *d, const uint32_t *a, const uint32_t *b);
template <> __device__ __forceinline__ void mma_16816<__nv_bfloat16>(float *d, const uint32_t *a, const uint32_t *b) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                 "{%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
template <> __device__ __forceinline__ void mma_16816<__half>(float *d, const uint32_t *a, const uint32_t *b) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                 "{%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// --- host side ----------------------------------------------------------------------------
// Turns a CUDA runtime error into a moe_status with the call named in the message.
static inline moe_status cuda_status(moe_context_t *ctx, cudaError_t err, const char *what) {
    if (err == cudaSuccess) return MOE_STATUS_OK;
    moe_status st = err == cudaErrorMemoryAllocation ? MOE_STATUS_OUT_OF_MEMORY : MOE_STATUS_DEVICE_ERROR;
    return moe__error(ctx, st, "CUDA backend: %s failed: %s (%s)", what, cudaGetErrorString(err),
                      cudaGetErrorName(err));
}

static inline int64_t ceil_div64(int64_t a, int64_t b) { return (a + b - 1) / b; }

#endif
