// moe_analysis_measure_gemm: times one plain GEMM on the context's GPU with cuBLAS, for
// `moefuse roofline --measure` (predicted vs measured). BF16 through cublasGemmEx with fp32
// compute; FP8 e4m3 through cublasLtMatmul with per-tensor scales and bf16 output. Both in
// the "TN" layout of a linear layer: y[M,N] = x[M,K] · W[N,K]^T, the only layout cuBLASLt
// offers FP8 in on Hopper.
//
// Protocol: inputs are fresh random values (a hash of a per-call seed, never zeros, which
// some GPUs multiply faster); when one set of operands fits in twice the L2, several sets
// are allocated and the launches rotate through them so that each launch reads from HBM as
// it would in a model; warm-up launches first; then `reps` launches queued behind a spin
// kernel (so the GPU never waits on the CPU's enqueue), each between its own pair of events;
// the median is returned.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <vector>

extern "C" {
#include "internal.h"
#include "moefuse_analysis.h"
}

namespace {

const int kRepsMax = 10000;
const int64_t kSetsMax = 4096;
const size_t kLtWorkspace = 32u << 20; // cuBLASLt's recommended size on Hopper

// A per-element hash to uniform [-1, 1): splitmix64 of (seed, index).
__device__ __forceinline__ float hash_uniform(uint64_t seed, uint64_t i) {
    uint64_t z = seed + (i + 1) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (float)(z >> 40) * (2.0f / 16777216.0f) - 1.0f;
}

__global__ void fill_bf16(__nv_bfloat16 *p, int64_t n, uint64_t seed) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        p[i] = __float2bfloat16_rn(hash_uniform(seed, (uint64_t)i));
}

// Codes of values in [-4, 4): a spread of exponents, never NaN.
__global__ void fill_e4m3(__nv_fp8_e4m3 *p, int64_t n, uint64_t seed) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        p[i] = __nv_fp8_e4m3(4.0f * hash_uniform(seed, (uint64_t)i));
}

// Keeps the GPU busy for `cycles` SM clocks while the host queues the timed launches.
__global__ void spin(int64_t cycles) {
    int64_t start = clock64();
    while (clock64() - start < cycles) {
    }
}

// Everything one measurement allocates, released in one place whatever failed.
struct measure_state {
    cudaStream_t stream = nullptr;
    cublasHandle_t blas = nullptr;
    cublasLtHandle_t lt = nullptr;
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t a_layout = nullptr, b_layout = nullptr, d_layout = nullptr;
    void *arena = nullptr, *lt_workspace = nullptr;
    float *scales = nullptr;
    std::vector<cudaEvent_t> events;

    ~measure_state() {
        if (stream) cudaStreamSynchronize(stream);
        for (cudaEvent_t e : events) cudaEventDestroy(e);
        if (op) cublasLtMatmulDescDestroy(op);
        if (a_layout) cublasLtMatrixLayoutDestroy(a_layout);
        if (b_layout) cublasLtMatrixLayoutDestroy(b_layout);
        if (d_layout) cublasLtMatrixLayoutDestroy(d_layout);
        if (lt) cublasLtDestroy(lt);
        if (blas) cublasDestroy(blas);
        cudaFree(arena);
        cudaFree(lt_workspace);
        cudaFree(scales);
        if (stream) cudaStreamDestroy(stream);
    }
};

moe_status cuda_fail(moe_context_t *ctx, cudaError_t e, const char *what) {
    if (e == cudaErrorMemoryAllocation)
        return moe__error(ctx, MOE_STATUS_OUT_OF_MEMORY, "measure_gemm: %s: %s", what, cudaGetErrorString(e));
    return moe__error(ctx, MOE_STATUS_DEVICE_ERROR, "measure_gemm: %s: %s", what, cudaGetErrorString(e));
}

moe_status blas_fail(moe_context_t *ctx, cublasStatus_t s, const char *what) {
    return moe__error(ctx, MOE_STATUS_DEVICE_ERROR, "measure_gemm: %s: %s", what, cublasGetStatusString(s));
}

int64_t round_up(int64_t v, int64_t to) { return (v + to - 1) / to * to; }

uint64_t fresh_seed(void) {
    static uint64_t calls = 0; // distinct seeds for calls within one clock tick
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ((uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec) ^ (++calls * 0xD1B54A32D192ED03ull);
}

} // namespace

extern "C" moe_status moe_analysis_measure_gemm(moe_context_t *ctx, int64_t m, int64_t k, int64_t n, moe_dtype dtype,
                                                int32_t reps, double *ms) {
    moe__clear_error(ctx);
    if (!ms) return moe__error(ctx, MOE_STATUS_NULL_POINTER, "moe_analysis_measure_gemm: ms is NULL");
    *ms = 0.0;
    if (!ctx) return moe__error(ctx, MOE_STATUS_NULL_POINTER, "moe_analysis_measure_gemm: ctx is NULL");
    // cuBLAS takes int dimensions and leading dimensions.
    const struct { const char *name; int64_t v; } dims[] = {{"m", m}, {"k", k}, {"n", n}};
    for (const auto &d : dims)
        if (d.v < 1 || d.v > INT32_MAX)
            return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "%s: got %lld, expected 1..%d", d.name, (long long)d.v,
                              INT32_MAX);
    if (dtype != MOE_DTYPE_BF16 && dtype != MOE_DTYPE_E4M3)
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "dtype: got %s, expected bf16 or e4m3",
                          moe_dtype_name(dtype));
    if (reps < 1 || reps > kRepsMax)
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "reps: got %d, expected 1..%d", reps, kRepsMax);
    // One operand set: x [m,k], W [n,k] (1 or 2 bytes each) and y [m,n] bf16, each 256-aligned.
    int64_t elem = dtype == MOE_DTYPE_E4M3 ? 1 : 2, x_elems, w_elems, y_elems, x_bytes, w_bytes, y_bytes, set_bytes;
    if (!moe__mul64(m, k, &x_elems) || !moe__mul64(n, k, &w_elems) || !moe__mul64(m, n, &y_elems) ||
        !moe__mul64(x_elems, elem, &x_bytes) || !moe__mul64(w_elems, elem, &w_bytes) ||
        !moe__mul64(y_elems, 2, &y_bytes) || !moe__add64(round_up(x_bytes, 256), round_up(w_bytes, 256), &set_bytes) ||
        !moe__add64(set_bytes, round_up(y_bytes, 256), &set_bytes))
        return moe__error(ctx, MOE_STATUS_OVERFLOW, "m x k x n: %lld x %lld x %lld: operand sizes overflow int64",
                          (long long)m, (long long)k, (long long)n);
    if (moe_context_backend(ctx) != MOE_BACKEND_CUDA)
        return moe__error(ctx, MOE_STATUS_UNSUPPORTED, "ctx: got a %s context, expected a cuda one (GEMMs are timed on "
                          "the GPU)", moe_backend_name(moe_context_backend(ctx)));

    cudaError_t e = cudaSetDevice(ctx->device);
    if (e != cudaSuccess) return cuda_fail(ctx, e, "cudaSetDevice");
    int l2 = 0, clock_khz = 0;
    cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, ctx->device);
    cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, ctx->device);
    size_t free_bytes = 0, total_bytes = 0;
    if ((e = cudaMemGetInfo(&free_bytes, &total_bytes)) != cudaSuccess) return cuda_fail(ctx, e, "cudaMemGetInfo");
    // Enough sets to cover twice the L2, so that a set is evicted before it comes round again.
    int64_t sets = 1;
    if (set_bytes < 2 * (int64_t)l2) sets = std::min<int64_t>(kSetsMax, 2 * (int64_t)l2 / set_bytes + 1);
    int64_t arena_bytes;
    if (!moe__mul64(sets, set_bytes, &arena_bytes) || arena_bytes > (int64_t)(free_bytes / 10 * 9))
        return moe__error(ctx, MOE_STATUS_OUT_OF_MEMORY,
                          "m x k x n: %lld x %lld x %lld needs %lld bytes of operands, the GPU has %zu free",
                          (long long)m, (long long)k, (long long)n, (long long)arena_bytes, free_bytes);

    measure_state s;
    if ((e = cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking)) != cudaSuccess)
        return cuda_fail(ctx, e, "cudaStreamCreate");
    if ((e = cudaMalloc(&s.arena, (size_t)arena_bytes)) != cudaSuccess) return cuda_fail(ctx, e, "operands");
    uint64_t seed = fresh_seed();
    const int64_t x_off = 0, w_off = round_up(x_bytes, 256), y_off = w_off + round_up(w_bytes, 256);
    for (int64_t i = 0; i < sets; i++) {
        char *base = (char *)s.arena + i * set_bytes;
        uint64_t set_seed = seed + (uint64_t)i * 0x632BE59BD9B4E019ull;
        if (dtype == MOE_DTYPE_BF16) {
            fill_bf16<<<1024, 256, 0, s.stream>>>((__nv_bfloat16 *)(base + x_off), x_elems, set_seed);
            fill_bf16<<<1024, 256, 0, s.stream>>>((__nv_bfloat16 *)(base + w_off), w_elems, ~set_seed);
        } else {
            fill_e4m3<<<1024, 256, 0, s.stream>>>((__nv_fp8_e4m3 *)(base + x_off), x_elems, set_seed);
            fill_e4m3<<<1024, 256, 0, s.stream>>>((__nv_fp8_e4m3 *)(base + w_off), w_elems, ~set_seed);
        }
    }
    if ((e = cudaGetLastError()) != cudaSuccess) return cuda_fail(ctx, e, "filling the inputs");

    // cuBLAS is column-major: y^T [n,m] = W [n,k] (stored k x n, transposed) · x^T (stored k x m).
    const float alpha = 1.0f, beta = 0.0f;
    cublasLtMatmulAlgo_t algo;
    memset(&algo, 0, sizeof algo);
    cublasStatus_t bs;
    if (dtype == MOE_DTYPE_BF16) {
        if ((bs = cublasCreate(&s.blas)) != CUBLAS_STATUS_SUCCESS) return blas_fail(ctx, bs, "cublasCreate");
        if ((bs = cublasSetStream(s.blas, s.stream)) != CUBLAS_STATUS_SUCCESS) return blas_fail(ctx, bs, "cublasSetStream");
    } else {
        if ((bs = cublasLtCreate(&s.lt)) != CUBLAS_STATUS_SUCCESS) return blas_fail(ctx, bs, "cublasLtCreate");
        if ((e = cudaMalloc(&s.lt_workspace, kLtWorkspace)) != cudaSuccess) return cuda_fail(ctx, e, "cuBLASLt workspace");
        if ((e = cudaMalloc((void **)&s.scales, 2 * sizeof(float))) != cudaSuccess) return cuda_fail(ctx, e, "scales");
        // Per-tensor dequantisation scales as a recipe would give them (amax 4 -> 448).
        const float host_scales[2] = {4.0f / 448.0f, 4.0f / 448.0f};
        if ((e = cudaMemcpy(s.scales, host_scales, sizeof host_scales, cudaMemcpyHostToDevice)) != cudaSuccess)
            return cuda_fail(ctx, e, "scales");
        cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
        const float *a_scale = s.scales, *b_scale = s.scales + 1;
        int8_t fast_accum = 1; // what training recipes use for the forward GEMMs
        if ((bs = cublasLtMatmulDescCreate(&s.op, CUBLAS_COMPUTE_32F, CUDA_R_32F)) != CUBLAS_STATUS_SUCCESS ||
            (bs = cublasLtMatmulDescSetAttribute(s.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta)) != CUBLAS_STATUS_SUCCESS ||
            (bs = cublasLtMatmulDescSetAttribute(s.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb)) != CUBLAS_STATUS_SUCCESS ||
            (bs = cublasLtMatmulDescSetAttribute(s.op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &a_scale, sizeof a_scale)) !=
                CUBLAS_STATUS_SUCCESS ||
            (bs = cublasLtMatmulDescSetAttribute(s.op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &b_scale, sizeof b_scale)) !=
                CUBLAS_STATUS_SUCCESS ||
            (bs = cublasLtMatmulDescSetAttribute(s.op, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast_accum, sizeof fast_accum)) !=
                CUBLAS_STATUS_SUCCESS)
            return blas_fail(ctx, bs, "FP8 matmul descriptor");
        if ((bs = cublasLtMatrixLayoutCreate(&s.a_layout, CUDA_R_8F_E4M3, (uint64_t)k, (uint64_t)n, k)) !=
                CUBLAS_STATUS_SUCCESS ||
            (bs = cublasLtMatrixLayoutCreate(&s.b_layout, CUDA_R_8F_E4M3, (uint64_t)k, (uint64_t)m, k)) !=
                CUBLAS_STATUS_SUCCESS ||
            (bs = cublasLtMatrixLayoutCreate(&s.d_layout, CUDA_R_16BF, (uint64_t)n, (uint64_t)m, n)) !=
                CUBLAS_STATUS_SUCCESS)
            return blas_fail(ctx, bs, "FP8 matrix layouts");
        cublasLtMatmulPreference_t pref = nullptr;
        size_t ws = kLtWorkspace;
        cublasLtMatmulHeuristicResult_t result;
        int found = 0;
        bs = cublasLtMatmulPreferenceCreate(&pref);
        if (bs == CUBLAS_STATUS_SUCCESS)
            bs = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
        if (bs == CUBLAS_STATUS_SUCCESS)
            bs = cublasLtMatmulAlgoGetHeuristic(s.lt, s.op, s.a_layout, s.b_layout, s.d_layout, s.d_layout, pref, 1,
                                                &result, &found);
        if (pref) cublasLtMatmulPreferenceDestroy(pref);
        if (bs != CUBLAS_STATUS_SUCCESS || found < 1)
            return moe__error(ctx, MOE_STATUS_UNSUPPORTED,
                              "m x k x n: cuBLASLt has no FP8 algorithm for %lld x %lld x %lld (%s; cuBLASLt FP8 needs aligned leading "
                              "dimensions, e.g. k a multiple of 16)",
                              (long long)m, (long long)k, (long long)n,
                              bs != CUBLAS_STATUS_SUCCESS ? cublasGetStatusString(bs) : "no heuristic result");
        algo = result.algo;
    }

    auto launch = [&](int64_t set) -> cublasStatus_t {
        char *base = (char *)s.arena + (set % sets) * set_bytes;
        if (dtype == MOE_DTYPE_BF16)
            return cublasGemmEx(s.blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)n, (int)m, (int)k, &alpha, base + w_off,
                                CUDA_R_16BF, (int)k, base + x_off, CUDA_R_16BF, (int)k, &beta, base + y_off,
                                CUDA_R_16BF, (int)n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
        return cublasLtMatmul(s.lt, s.op, &alpha, base + w_off, s.a_layout, base + x_off, s.b_layout, &beta,
                              base + y_off, s.d_layout, base + y_off, s.d_layout, &algo, s.lt_workspace, kLtWorkspace,
                              s.stream);
    };

    // Warm-up: every set once (at least 3 launches), which also loads cuBLAS's kernels.
    int64_t warm = std::max<int64_t>(3, sets);
    for (int64_t i = 0; i < warm; i++)
        if ((bs = launch(i)) != CUBLAS_STATUS_SUCCESS) return blas_fail(ctx, bs, "warm-up GEMM");
    if ((e = cudaStreamSynchronize(s.stream)) != cudaSuccess) return cuda_fail(ctx, e, "warm-up");

    s.events.resize(2 * (size_t)reps, nullptr);
    for (auto &ev : s.events)
        if ((e = cudaEventCreate(&ev)) != cudaSuccess) {
            ev = nullptr;
            return cuda_fail(ctx, e, "cudaEventCreate");
        }
    // The spin covers the host's enqueue of the timed launches (about 20 us each at most).
    int64_t spin_cycles = (int64_t)(clock_khz > 0 ? clock_khz : 2000000) * (1 + reps / 20) * 2; // 2 ms per 20
    spin<<<1, 1, 0, s.stream>>>(spin_cycles);
    for (int32_t r = 0; r < reps; r++) {
        cudaEventRecord(s.events[2 * r], s.stream);
        if ((bs = launch(warm + r)) != CUBLAS_STATUS_SUCCESS) return blas_fail(ctx, bs, "timed GEMM");
        cudaEventRecord(s.events[2 * r + 1], s.stream);
    }
    if ((e = cudaStreamSynchronize(s.stream)) != cudaSuccess) return cuda_fail(ctx, e, "timed GEMMs");
    std::vector<double> times((size_t)reps);
    for (int32_t r = 0; r < reps; r++) {
        float t = 0.0f;
        if ((e = cudaEventElapsedTime(&t, s.events[2 * r], s.events[2 * r + 1])) != cudaSuccess)
            return cuda_fail(ctx, e, "cudaEventElapsedTime");
        times[(size_t)r] = t;
    }
    std::sort(times.begin(), times.end());
    size_t mid = times.size() / 2;
    *ms = times.size() % 2 ? times[mid] : 0.5 * (times[mid - 1] + times[mid]);
    return MOE_STATUS_OK;
}
