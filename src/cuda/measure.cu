// moe_analysis_measure_gemm: times one plain GEMM on the context's GPU with cuBLAS, for
// `moefuse roofline --measure` (predicted vs measured). BF16 through cublasGemmEx with fp32
// compute; FP8 e4m3 through cublasLtMatmul with per-tensor scales, cuBLASLt's default
// (promoting) accumulation and bf16 output, the conventions of the FP8 lab's cuBLASLt peer
// (lab/gemm_fp8_lab.cu, which ran on the H200). Both compute y[M,N] = x[M,K] · W[N,K]^T, a
// linear layer, in cuBLAS's column-major view: y^T [n,m] = op(W) · x^T where W is the
// k x n column-major matrix (ld k) taken transposed and x^T the k x m one (ld k) taken as is,
// the "TN" layout, the only one cuBLASLt offers FP8 in on Hopper.
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
const size_t kWorkspace = 32u << 20; // cuBLAS's and cuBLASLt's recommended workspace on Hopper
const int64_t kAlign = 256;          // every pointer cuBLAS sees starts here, as cudaMalloc's do
const int kLtCandidates = 8;         // heuristic results tried in order if the first declines

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
    cublasLtMatrixLayout_t w_layout = nullptr, x_layout = nullptr, y_layout = nullptr;
    cublasLtMatmulHeuristicResult_t candidates[kLtCandidates];
    int num_candidates = 0;
    const cublasLtMatmulAlgo_t *algo = nullptr; // the candidate that ran (FP8)
    void *arena = nullptr, *workspace = nullptr;
    char *scales = nullptr; // FP8: the x and W scales, each on its own kAlign boundary
    std::vector<cudaEvent_t> events;

    ~measure_state() {
        if (stream) cudaStreamSynchronize(stream);
        for (cudaEvent_t e : events) cudaEventDestroy(e);
        if (op) cublasLtMatmulDescDestroy(op);
        if (w_layout) cublasLtMatrixLayoutDestroy(w_layout);
        if (x_layout) cublasLtMatrixLayoutDestroy(x_layout);
        if (y_layout) cublasLtMatrixLayoutDestroy(y_layout);
        if (lt) cublasLtDestroy(lt);
        if (blas) cublasDestroy(blas);
        cudaFree(arena);
        cudaFree(workspace);
        cudaFree(scales);
        if (stream) cudaStreamDestroy(stream);
    }
};

// Where one operand set lies in the arena (byte offsets, each a multiple of kAlign).
struct operand_set_layout {
    int64_t x_elems, w_elems, x_off, w_off, y_off, bytes;
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

// x [m,k] and W [n,k] of `elem` bytes each, y [m,n] bf16; false on int64 overflow (each part
// kept under a quarter of INT64_MAX so that the rounded-up sum cannot overflow either).
bool plan_operands(int64_t m, int64_t k, int64_t n, int64_t elem, operand_set_layout *o) {
    int64_t y_elems, x_bytes, w_bytes, y_bytes;
    if (!moe__mul64(m, k, &o->x_elems) || !moe__mul64(n, k, &o->w_elems) || !moe__mul64(m, n, &y_elems) ||
        !moe__mul64(o->x_elems, elem, &x_bytes) || !moe__mul64(o->w_elems, elem, &w_bytes) ||
        !moe__mul64(y_elems, 2, &y_bytes) || x_bytes > INT64_MAX / 4 || w_bytes > INT64_MAX / 4 ||
        y_bytes > INT64_MAX / 4)
        return false;
    o->x_off = 0;
    o->w_off = round_up(x_bytes, kAlign);
    o->y_off = o->w_off + round_up(w_bytes, kAlign);
    o->bytes = o->y_off + round_up(y_bytes, kAlign);
    return true;
}

// The FP8 matmul: descriptor, layouts and up to kLtCandidates algorithms from the heuristic
// (given the workspace it may use). The leading dimensions must be multiples of 16 bytes.
moe_status plan_fp8(moe_context_t *ctx, measure_state &s, int64_t m, int64_t k, int64_t n) {
    cudaError_t e;
    cublasStatus_t bs;
    if ((bs = cublasLtCreate(&s.lt)) != CUBLAS_STATUS_SUCCESS) return blas_fail(ctx, bs, "cublasLtCreate");
    // Per-tensor dequantisation scales as a recipe would give them (amax 4 -> 448).
    if ((e = cudaMalloc((void **)&s.scales, 2 * kAlign)) != cudaSuccess) return cuda_fail(ctx, e, "scales");
    const float scale = 4.0f / 448.0f;
    float *x_scale = (float *)s.scales, *w_scale = (float *)(s.scales + kAlign);
    // On the GEMMs' stream, so that they see the values (pageable sources are staged before return).
    if ((e = cudaMemcpyAsync(x_scale, &scale, sizeof scale, cudaMemcpyHostToDevice, s.stream)) != cudaSuccess ||
        (e = cudaMemcpyAsync(w_scale, &scale, sizeof scale, cudaMemcpyHostToDevice, s.stream)) != cudaSuccess)
        return cuda_fail(ctx, e, "scales");

    const cublasOperation_t transpose = CUBLAS_OP_T, keep = CUBLAS_OP_N;
    if ((bs = cublasLtMatmulDescCreate(&s.op, CUBLAS_COMPUTE_32F, CUDA_R_32F)) != CUBLAS_STATUS_SUCCESS ||
        (bs = cublasLtMatmulDescSetAttribute(s.op, CUBLASLT_MATMUL_DESC_TRANSA, &transpose, sizeof transpose)) !=
            CUBLAS_STATUS_SUCCESS ||
        (bs = cublasLtMatmulDescSetAttribute(s.op, CUBLASLT_MATMUL_DESC_TRANSB, &keep, sizeof keep)) !=
            CUBLAS_STATUS_SUCCESS ||
        (bs = cublasLtMatmulDescSetAttribute(s.op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &w_scale, sizeof w_scale)) !=
            CUBLAS_STATUS_SUCCESS ||
        (bs = cublasLtMatmulDescSetAttribute(s.op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &x_scale, sizeof x_scale)) !=
            CUBLAS_STATUS_SUCCESS)
        return blas_fail(ctx, bs, "FP8 matmul descriptor");
    if ((bs = cublasLtMatrixLayoutCreate(&s.w_layout, CUDA_R_8F_E4M3, (uint64_t)k, (uint64_t)n, k)) !=
            CUBLAS_STATUS_SUCCESS ||
        (bs = cublasLtMatrixLayoutCreate(&s.x_layout, CUDA_R_8F_E4M3, (uint64_t)k, (uint64_t)m, k)) !=
            CUBLAS_STATUS_SUCCESS ||
        (bs = cublasLtMatrixLayoutCreate(&s.y_layout, CUDA_R_16BF, (uint64_t)n, (uint64_t)m, n)) !=
            CUBLAS_STATUS_SUCCESS)
        return blas_fail(ctx, bs, "FP8 matrix layouts");

    cublasLtMatmulPreference_t pref = nullptr;
    size_t workspace = kWorkspace;
    bs = cublasLtMatmulPreferenceCreate(&pref);
    if (bs == CUBLAS_STATUS_SUCCESS)
        bs = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
                                                  sizeof workspace);
    if (bs == CUBLAS_STATUS_SUCCESS)
        bs = cublasLtMatmulAlgoGetHeuristic(s.lt, s.op, s.w_layout, s.x_layout, s.y_layout, s.y_layout, pref,
                                            kLtCandidates, s.candidates, &s.num_candidates);
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (bs != CUBLAS_STATUS_SUCCESS || s.num_candidates < 1)
        return moe__error(ctx, MOE_STATUS_UNSUPPORTED,
                          "m x k x n: cuBLASLt has no FP8 algorithm for %lld x %lld x %lld (%s)", (long long)m,
                          (long long)k, (long long)n,
                          bs != CUBLAS_STATUS_SUCCESS ? cublasGetStatusString(bs) : "no heuristic result");
    return MOE_STATUS_OK;
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
    const bool fp8 = dtype == MOE_DTYPE_E4M3;
    // cuBLASLt FP8: leading dimensions of 16 bytes' multiples: k e4m3 codes for x and W, n bf16 for y.
    if (fp8 && (k % 16 != 0 || n % 8 != 0))
        return moe__error(ctx, MOE_STATUS_UNSUPPORTED,
                          "m x k x n: %lld x %lld x %lld: cuBLASLt FP8 needs k a multiple of 16 and n of 8 (leading "
                          "dimensions of 16-byte multiples)",
                          (long long)m, (long long)k, (long long)n);
    operand_set_layout set;
    if (!plan_operands(m, k, n, fp8 ? 1 : 2, &set))
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
    if (set.bytes < 2 * (int64_t)l2) sets = std::min<int64_t>(kSetsMax, 2 * (int64_t)l2 / set.bytes + 1);
    int64_t arena_bytes;
    if (!moe__mul64(sets, set.bytes, &arena_bytes) || arena_bytes > (int64_t)(free_bytes / 10 * 9))
        return moe__error(ctx, MOE_STATUS_OUT_OF_MEMORY,
                          "m x k x n: %lld x %lld x %lld needs %lld bytes of operands, the GPU has %zu free",
                          (long long)m, (long long)k, (long long)n, (long long)arena_bytes, free_bytes);

    measure_state s;
    if ((e = cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking)) != cudaSuccess)
        return cuda_fail(ctx, e, "cudaStreamCreate");
    if ((e = cudaMalloc(&s.arena, (size_t)arena_bytes)) != cudaSuccess) return cuda_fail(ctx, e, "operands");
    if ((e = cudaMalloc(&s.workspace, kWorkspace)) != cudaSuccess) return cuda_fail(ctx, e, "cuBLAS workspace");
    uint64_t seed = fresh_seed();
    for (int64_t i = 0; i < sets; i++) {
        char *base = (char *)s.arena + i * set.bytes;
        uint64_t set_seed = seed + (uint64_t)i * 0x632BE59BD9B4E019ull;
        if (fp8) {
            fill_e4m3<<<1024, 256, 0, s.stream>>>((__nv_fp8_e4m3 *)(base + set.x_off), set.x_elems, set_seed);
            fill_e4m3<<<1024, 256, 0, s.stream>>>((__nv_fp8_e4m3 *)(base + set.w_off), set.w_elems, ~set_seed);
        } else {
            fill_bf16<<<1024, 256, 0, s.stream>>>((__nv_bfloat16 *)(base + set.x_off), set.x_elems, set_seed);
            fill_bf16<<<1024, 256, 0, s.stream>>>((__nv_bfloat16 *)(base + set.w_off), set.w_elems, ~set_seed);
        }
    }
    if ((e = cudaGetLastError()) != cudaSuccess) return cuda_fail(ctx, e, "filling the inputs");

    cublasStatus_t bs;
    moe_status st;
    if (fp8) {
        if ((st = plan_fp8(ctx, s, m, k, n)) != MOE_STATUS_OK) return st;
    } else {
        if ((bs = cublasCreate(&s.blas)) != CUBLAS_STATUS_SUCCESS) return blas_fail(ctx, bs, "cublasCreate");
        if ((bs = cublasSetStream(s.blas, s.stream)) != CUBLAS_STATUS_SUCCESS ||
            (bs = cublasSetWorkspace(s.blas, s.workspace, kWorkspace)) != CUBLAS_STATUS_SUCCESS)
            return blas_fail(ctx, bs, "cuBLAS stream and workspace");
    }

    const float alpha = 1.0f, beta = 0.0f;
    auto launch = [&](int64_t i, const cublasLtMatmulAlgo_t *algo) -> cublasStatus_t {
        char *base = (char *)s.arena + (i % sets) * set.bytes;
        void *x = base + set.x_off, *w = base + set.w_off, *y = base + set.y_off;
        if (!fp8)
            return cublasGemmEx(s.blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)n, (int)m, (int)k, &alpha, w, CUDA_R_16BF,
                                (int)k, x, CUDA_R_16BF, (int)k, &beta, y, CUDA_R_16BF, (int)n, CUBLAS_COMPUTE_32F,
                                CUBLAS_GEMM_DEFAULT);
        return cublasLtMatmul(s.lt, s.op, &alpha, w, s.w_layout, x, s.x_layout, &beta, y, s.y_layout, y, s.y_layout,
                              algo, s.workspace, kWorkspace, s.stream);
    };

    // FP8: the heuristic's first algorithm that runs (a candidate may still decline the call).
    if (fp8) {
        cublasStatus_t first = CUBLAS_STATUS_SUCCESS;
        for (int c = 0; c < s.num_candidates && !s.algo; c++) {
            bs = launch(0, &s.candidates[c].algo);
            if (bs == CUBLAS_STATUS_SUCCESS) s.algo = &s.candidates[c].algo;
            else if (bs != CUBLAS_STATUS_NOT_SUPPORTED) return blas_fail(ctx, bs, "first FP8 GEMM");
            else if (c == 0) first = bs;
        }
        if (!s.algo)
            return moe__error(ctx, MOE_STATUS_UNSUPPORTED,
                              "m x k x n: cuBLASLt declined all %d FP8 algorithms its heuristic offered for %lld x %lld "
                              "x %lld (%s)",
                              s.num_candidates, (long long)m, (long long)k, (long long)n, cublasGetStatusString(first));
    }
    // Warm-up: every set once (at least 3 launches), which also loads cuBLAS's kernels.
    int64_t warm = std::max<int64_t>(3, sets);
    for (int64_t i = 0; i < warm; i++)
        if ((bs = launch(i, s.algo)) != CUBLAS_STATUS_SUCCESS) return blas_fail(ctx, bs, "warm-up GEMM");
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
        if ((bs = launch(warm + r, s.algo)) != CUBLAS_STATUS_SUCCESS) return blas_fail(ctx, bs, "timed GEMM");
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
