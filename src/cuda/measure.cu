// `moefuse roofline --measure` (predicted vs measured) on the context's GPU:
//   moe_analysis_measure_gemm     one plain GEMM with cuBLAS. BF16 through cublasGemmEx with fp32
//                                 compute; FP8 e4m3 through cublasLtMatmul with per-tensor scales,
//                                 cuBLASLt's default (promoting) accumulation and bf16 output, the
//                                 conventions of the FP8 lab's cuBLASLt peer (lab/gemm_fp8_lab.cu).
//   moe_analysis_measure_dense    the same GEMM on moefuse's Hopper dense engine (hopper/gemm_dense.h,
//                                 hopper/gemm_fp8.h: row128 x scales, block128 W scales).
//   moe_analysis_measure_grouped  one grouped expert GEMM launch (GEMM1 or GEMM2) as moe_forward runs
//                                 it, over a dispatch plan built on the host, on the path
//                                 moe__cuda_gemm_select picks (v1 or Hopper; bf16 or FP8).
// The plain GEMMs compute y[M,N] = x[M,K] · W[N,K]^T, a linear layer; for cuBLAS in its
// column-major view: y^T [n,m] = op(W) · x^T where W is the k x n column-major matrix (ld k)
// taken transposed and x^T the k x m one (ld k) taken as is, the "TN" layout, the only one
// cuBLASLt offers FP8 in on Hopper.
//
// Protocol (all three): inputs are fresh random values (a hash of a per-call seed, never zeros,
// which some GPUs multiply faster); when one set of operands fits in twice the L2, several sets
// are allocated and the launches rotate through them so that each launch reads from HBM as it
// would in a model; warm-up launches first; then `reps` launches queued behind a spin kernel (so
// the GPU never waits on the CPU's enqueue), each between its own pair of events; the median is
// returned.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <new>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <vector>

#include "gemm_fp8_v1.cuh" // gemm_args, fp8_gemm_args and the grouped launchers (v1 and Hopper)
#include "hopper/gemm_dense.h"
#include "hopper/gemm_fp8.h"
#include "hopper/grouped_api.h"

extern "C" {
#include "internal.h"
#include "moefuse_analysis.h"
}

namespace {

const int kRepsMax = 10000;
const int64_t kSetsMax = 4096;
const size_t kWorkspace = 32u << 20; // cuBLAS's and cuBLASLt's recommended workspace on Hopper
const int64_t kAlign = 256;          // every array starts here, as cudaMalloc's do (TMA needs 16)
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
    pdl_wait(); // (pdl.cuh: every kernel of the backend waits first)
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        p[i] = __float2bfloat16_rn(hash_uniform(seed, (uint64_t)i));
}

// Codes of values in [-4, 4): a spread of exponents, never NaN.
__global__ void fill_e4m3(__nv_fp8_e4m3 *p, int64_t n, uint64_t seed) {
    pdl_wait(); // (pdl.cuh: every kernel of the backend waits first)
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        p[i] = __nv_fp8_e4m3(4.0f * hash_uniform(seed, (uint64_t)i));
}

// fp32 values uniform in [lo, hi): scales, routing weights, biases.
__global__ void fill_f32(float *p, int64_t n, uint64_t seed, float lo, float hi) {
    pdl_wait(); // (pdl.cuh: every kernel of the backend waits first)
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        p[i] = lo + (hi - lo) * 0.5f * (hash_uniform(seed, (uint64_t)i) + 1.0f);
}

// Keeps the GPU busy for `cycles` SM clocks while the host queues the timed launches.
__global__ void spin(int64_t cycles) {
    pdl_wait(); // (pdl.cuh: every kernel of the backend waits first)
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
    char *scales = nullptr; // cuBLASLt FP8: the x and W scales; grouped: the arrays every set shares
    std::vector<cudaEvent_t> events;

    ~measure_state() {
        if (stream) cudaStreamSynchronize(stream);
        for (cudaEvent_t e : events)
            if (e) cudaEventDestroy(e);
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

moe_status cuda_fail(moe_context_t *ctx, cudaError_t e, const char *what) {
    if (e == cudaErrorMemoryAllocation)
        return moe__error(ctx, MOE_STATUS_OUT_OF_MEMORY, "measure: %s: %s", what, cudaGetErrorString(e));
    return moe__error(ctx, MOE_STATUS_DEVICE_ERROR, "measure: %s: %s", what, cudaGetErrorString(e));
}

moe_status blas_fail(moe_context_t *ctx, cublasStatus_t s, const char *what) {
    return moe__error(ctx, MOE_STATUS_DEVICE_ERROR, "measure_gemm: %s: %s", what, cublasGetStatusString(s));
}

int64_t round_up(int64_t v, int64_t to) { return (v + to - 1) / to * to; }
int64_t ceil_div(int64_t v, int64_t by) { return (v + by - 1) / by; }
// a * b for counts (>= 0), or -1 when either is -1 or the product overflows (region::add refuses it).
int64_t product(int64_t a, int64_t b) {
    int64_t p;
    return a < 0 || b < 0 || !moe__mul64(a, b, &p) ? -1 : p;
}

uint64_t fresh_seed(void) {
    static uint64_t calls = 0; // distinct seeds for calls within one clock tick
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ((uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec) ^ (++calls * 0xD1B54A32D192ED03ull);
}

// Arrays laid out one after another, each on a kAlign boundary; ok turns false on overflow
// (every part and the running total are kept under a quarter of INT64_MAX).
struct region {
    int64_t bytes = 0;
    bool ok = true;
    int64_t add(int64_t count, int64_t elem) {
        int64_t b = 0;
        if (!ok || count < 0 || !moe__mul64(count, elem, &b) || b > INT64_MAX / 4 || bytes > INT64_MAX / 4) {
            ok = false;
            return 0;
        }
        const int64_t at = bytes;
        bytes += round_up(b, kAlign);
        return at;
    }
};

// Where one plain-GEMM operand set lies in the arena: x [m,k] and W [n,k] of `elem` bytes each,
// y [m,n] bf16.
struct operand_set_layout {
    int64_t x_elems, w_elems, x_off, w_off, y_off, bytes;
};

bool plan_operands(int64_t m, int64_t k, int64_t n, int64_t elem, operand_set_layout *o) {
    int64_t y_elems;
    if (!moe__mul64(m, k, &o->x_elems) || !moe__mul64(n, k, &o->w_elems) || !moe__mul64(m, n, &y_elems)) return false;
    region r;
    o->x_off = r.add(o->x_elems, elem);
    o->w_off = r.add(o->w_elems, elem);
    o->y_off = r.add(y_elems, 2);
    o->bytes = r.bytes;
    return r.ok;
}

// What the protocol needs of the device: L2 size, SM clock, free memory.
struct device_info {
    int l2 = 0, clock_khz = 0;
    size_t free_bytes = 0;
};

moe_status query_device(moe_context_t *ctx, device_info *d) {
    cudaError_t e = cudaSetDevice(ctx->device);
    if (e != cudaSuccess) return cuda_fail(ctx, e, "cudaSetDevice");
    cudaDeviceGetAttribute(&d->l2, cudaDevAttrL2CacheSize, ctx->device);
    cudaDeviceGetAttribute(&d->clock_khz, cudaDevAttrClockRate, ctx->device);
    size_t total = 0;
    if ((e = cudaMemGetInfo(&d->free_bytes, &total)) != cudaSuccess) return cuda_fail(ctx, e, "cudaMemGetInfo");
    return MOE_STATUS_OK;
}

// Operand sets to cover twice the L2, so that a set is evicted before it comes round again;
// false when they (with `extra` bytes more) do not fit in 90% of the free memory.
bool choose_sets(const device_info &d, int64_t set_bytes, int64_t extra, int64_t *sets, int64_t *arena_bytes) {
    *sets = 1;
    if (set_bytes < 2 * (int64_t)d.l2) *sets = std::min<int64_t>(kSetsMax, 2 * (int64_t)d.l2 / set_bytes + 1);
    int64_t all;
    return moe__mul64(*sets, set_bytes, arena_bytes) && moe__add64(*arena_bytes, extra, &all) &&
           all <= (int64_t)(d.free_bytes / 10 * 9);
}

// The common checks of the three entry points.
moe_status check_common(moe_context_t *ctx, const char *fn, moe_dtype dtype, int32_t reps) {
    if (dtype != MOE_DTYPE_BF16 && dtype != MOE_DTYPE_E4M3)
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "%s: dtype: got %s, expected bf16 or e4m3", fn,
                          moe_dtype_name(dtype));
    if (reps < 1 || reps > kRepsMax)
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "%s: reps: got %d, expected 1..%d", fn, reps, kRepsMax);
    return MOE_STATUS_OK;
}

moe_status check_cuda_context(moe_context_t *ctx, const char *fn) {
    if (moe_context_backend(ctx) != MOE_BACKEND_CUDA)
        return moe__error(ctx, MOE_STATUS_UNSUPPORTED, "%s: ctx: got a %s context, expected a cuda one (GEMMs are "
                          "timed on the GPU)", fn, moe_backend_name(moe_context_backend(ctx)));
    return MOE_STATUS_OK;
}

// The timing itself: launch(i) for i < warm (warm-up), a sync, then `reps` launches
// warm, warm+1, ... queued behind a spin kernel, each between its own pair of events; *ms =
// their median. launch returns a moe_status with its message already set.
template <class Launch>
moe_status time_launches(moe_context_t *ctx, measure_state &s, int64_t warm, int32_t reps, int clock_khz,
                         Launch launch, double *ms) {
    moe_status st;
    for (int64_t i = 0; i < warm; i++)
        if ((st = launch(i)) != MOE_STATUS_OK) return st;
    cudaError_t e = cudaStreamSynchronize(s.stream);
    if (e != cudaSuccess) return cuda_fail(ctx, e, "warm-up");

    s.events.resize(2 * (size_t)reps, nullptr);
    for (auto &ev : s.events)
        if ((e = cudaEventCreate(&ev)) != cudaSuccess) {
            ev = nullptr;
            return cuda_fail(ctx, e, "cudaEventCreate");
        }
    // The spin covers the host's enqueue of the timed launches (about 20 us each at most).
    int64_t spin_cycles = (int64_t)(clock_khz > 0 ? clock_khz : 2000000) * (1 + reps / 20) * 2; // 2 ms per 20
    spin<<<1, 1, 0, s.stream>>>(spin_cycles);
    if ((e = cudaGetLastError()) != cudaSuccess) return cuda_fail(ctx, e, "spin kernel");
    for (int32_t r = 0; r < reps; r++) {
        if ((e = cudaEventRecord(s.events[2 * r], s.stream)) != cudaSuccess) return cuda_fail(ctx, e, "cudaEventRecord");
        if ((st = launch(warm + r)) != MOE_STATUS_OK) return st;
        if ((e = cudaEventRecord(s.events[2 * r + 1], s.stream)) != cudaSuccess)
            return cuda_fail(ctx, e, "cudaEventRecord");
    }
    if ((e = cudaStreamSynchronize(s.stream)) != cudaSuccess) return cuda_fail(ctx, e, "timed launches");
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

void launch_fill(void *p, int64_t n, moe_dtype dtype, uint64_t seed, cudaStream_t stream) {
    if (n <= 0) return;
    if (dtype == MOE_DTYPE_E4M3) fill_e4m3<<<1024, 256, 0, stream>>>((__nv_fp8_e4m3 *)p, n, seed);
    else fill_bf16<<<1024, 256, 0, stream>>>((__nv_bfloat16 *)p, n, seed);
}

void launch_fill_f32(void *p, int64_t n, uint64_t seed, float lo, float hi, cudaStream_t stream) {
    if (n > 0) fill_f32<<<1024, 256, 0, stream>>>((float *)p, n, seed, lo, hi);
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

// Who runs a plain GEMM.
enum plain_engine { ENGINE_CUBLAS = 0, ENGINE_MOEFUSE_DENSE = 1 };

// moe_analysis_measure_gemm and moe_analysis_measure_dense: one plain GEMM m x k x n.
moe_status measure_plain(moe_context_t *ctx, const char *fn, plain_engine engine, int64_t m, int64_t k, int64_t n,
                         moe_dtype dtype, int32_t reps, double *ms) {
    moe__clear_error(ctx);
    if (!ms) return moe__error(ctx, MOE_STATUS_NULL_POINTER, "%s: ms is NULL", fn);
    *ms = 0.0;
    if (!ctx) return moe__error(ctx, MOE_STATUS_NULL_POINTER, "%s: ctx is NULL", fn);
    // cuBLAS takes int dimensions and leading dimensions.
    const struct { const char *name; int64_t v; } dims[] = {{"m", m}, {"k", k}, {"n", n}};
    for (const auto &d : dims)
        if (d.v < 1 || d.v > INT32_MAX)
            return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "%s: %s: got %lld, expected 1..%d", fn, d.name,
                              (long long)d.v, INT32_MAX);
    moe_status st = check_common(ctx, fn, dtype, reps);
    if (st != MOE_STATUS_OK) return st;
    const bool fp8 = dtype == MOE_DTYPE_E4M3, blas = engine == ENGINE_CUBLAS;
    // cuBLASLt FP8: leading dimensions of 16-byte multiples: k e4m3 codes for x and W, n bf16 for y.
    if (blas && fp8 && (k % 16 != 0 || n % 8 != 0))
        return moe__error(ctx, MOE_STATUS_UNSUPPORTED,
                          "m x k x n: %lld x %lld x %lld: cuBLASLt FP8 needs k a multiple of 16 and n of 8 (leading "
                          "dimensions of 16-byte multiples)",
                          (long long)m, (long long)k, (long long)n);
    // The Hopper engine loads x and W rows with TMA: 16-byte row strides.
    if (!blas && k % (fp8 ? 16 : 8) != 0)
        return moe__error(ctx, MOE_STATUS_UNSUPPORTED,
                          "m x k x n: %lld x %lld x %lld: moefuse's dense %s engine needs k a multiple of %d (TMA "
                          "rows of 16-byte multiples)",
                          (long long)m, (long long)k, (long long)n, fp8 ? "FP8" : "BF16", fp8 ? 16 : 8);
    operand_set_layout set;
    if (!plan_operands(m, k, n, fp8 ? 1 : 2, &set))
        return moe__error(ctx, MOE_STATUS_OVERFLOW, "m x k x n: %lld x %lld x %lld: operand sizes overflow int64",
                          (long long)m, (long long)k, (long long)n);
    if ((st = check_cuda_context(ctx, fn)) != MOE_STATUS_OK) return st;

    device_info dev;
    if ((st = query_device(ctx, &dev)) != MOE_STATUS_OK) return st;
    // The dense FP8 engine's block scales: x [m, ceil(k/128)] (row128), W [ceil(n/128), ceil(k/128)].
    const int64_t kb = ceil_div(k, 128);
    region shared;
    const int64_t xs_off = shared.add(!blas && fp8 ? m * kb : 0, 4);
    const int64_t ws_off = shared.add(!blas && fp8 ? ceil_div(n, 128) * kb : 0, 4);
    int64_t sets, arena_bytes;
    if (!shared.ok || !choose_sets(dev, set.bytes, shared.bytes + (blas ? (int64_t)kWorkspace : 0), &sets, &arena_bytes))
        return moe__error(ctx, MOE_STATUS_OUT_OF_MEMORY,
                          "m x k x n: %lld x %lld x %lld needs more than 90%% of the GPU's %zu free bytes for its "
                          "operands", (long long)m, (long long)k, (long long)n, dev.free_bytes);

    measure_state s;
    cudaError_t e;
    if ((e = cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking)) != cudaSuccess)
        return cuda_fail(ctx, e, "cudaStreamCreate");
    if ((e = cudaMalloc(&s.arena, (size_t)arena_bytes)) != cudaSuccess) return cuda_fail(ctx, e, "operands");
    if (blas && (e = cudaMalloc(&s.workspace, kWorkspace)) != cudaSuccess) return cuda_fail(ctx, e, "cuBLAS workspace");
    if (!blas && fp8 && (e = cudaMalloc((void **)&s.scales, (size_t)shared.bytes)) != cudaSuccess)
        return cuda_fail(ctx, e, "block scales");
    uint64_t seed = fresh_seed();
    for (int64_t i = 0; i < sets; i++) {
        char *base = (char *)s.arena + i * set.bytes;
        uint64_t set_seed = seed + (uint64_t)i * 0x632BE59BD9B4E019ull;
        launch_fill(base + set.x_off, set.x_elems, dtype, set_seed, s.stream);
        launch_fill(base + set.w_off, set.w_elems, dtype, ~set_seed, s.stream);
    }
    float *x_scales = nullptr, *w_scales = nullptr;
    if (!blas && fp8) { // scales as a recipe gives them for values of amax ~4: about 4/448
        x_scales = (float *)(s.scales + xs_off);
        w_scales = (float *)(s.scales + ws_off);
        launch_fill_f32(x_scales, m * kb, seed ^ 0x5851F42D4C957F2Dull, 1.0f / 224, 1.0f / 56, s.stream);
        launch_fill_f32(w_scales, ceil_div(n, 128) * kb, seed ^ 0x14057B7EF767814Full, 1.0f / 224, 1.0f / 56,
                        s.stream);
    }
    if ((e = cudaGetLastError()) != cudaSuccess) return cuda_fail(ctx, e, "filling the inputs");

    cublasStatus_t bs;
    if (blas && fp8) {
        if ((st = plan_fp8(ctx, s, m, k, n)) != MOE_STATUS_OK) return st;
    } else if (blas) {
        if ((bs = cublasCreate(&s.blas)) != CUBLAS_STATUS_SUCCESS) return blas_fail(ctx, bs, "cublasCreate");
        if ((bs = cublasSetStream(s.blas, s.stream)) != CUBLAS_STATUS_SUCCESS ||
            (bs = cublasSetWorkspace(s.blas, s.workspace, kWorkspace)) != CUBLAS_STATUS_SUCCESS)
            return blas_fail(ctx, bs, "cuBLAS stream and workspace");
    }

    const float alpha = 1.0f, beta = 0.0f;
    auto blas_launch = [&](int64_t i, const cublasLtMatmulAlgo_t *algo) -> cublasStatus_t {
        char *base = (char *)s.arena + (i % sets) * set.bytes;
        void *x = base + set.x_off, *w = base + set.w_off, *y = base + set.y_off;
        if (!fp8)
            return cublasGemmEx(s.blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)n, (int)m, (int)k, &alpha, w, CUDA_R_16BF,
                                (int)k, x, CUDA_R_16BF, (int)k, &beta, y, CUDA_R_16BF, (int)n, CUBLAS_COMPUTE_32F,
                                CUBLAS_GEMM_DEFAULT);
        return cublasLtMatmul(s.lt, s.op, &alpha, w, s.w_layout, x, s.x_layout, &beta, y, s.y_layout, y, s.y_layout,
                              algo, s.workspace, kWorkspace, s.stream);
    };
    // moefuse's dense engine: bf16 out [m, n] (ldc n), x and W K-major (ld k).
    auto engine_launch = [&](int64_t i) -> moe_status {
        char *base = (char *)s.arena + (i % sets) * set.bytes;
        char why[256] = "";
        moe_status r;
        if (!fp8) {
            moe__hopper_gemm_args a;
            memset(&a, 0, sizeof a);
            a.a = base + set.x_off;
            a.lda = k;
            a.b = base + set.w_off;
            a.ldb = k;
            a.c = base + set.y_off;
            a.ldc = n;
            a.c_dtype = MOE_DTYPE_BF16;
            a.m = m;
            a.n = n;
            a.k = k;
            a.block_n = 0; // the engine's own heuristic
            r = moe__hopper_gemm_dense(&a, s.stream, why, sizeof why);
        } else {
            moe__hopper_gemm_fp8_args a;
            memset(&a, 0, sizeof a);
            a.a = base + set.x_off;
            a.lda = k;
            a.a_scales = x_scales;
            a.lds_a = kb;
            a.b = base + set.w_off;
            a.ldb = k;
            a.b_scales = w_scales;
            a.lds_b = kb;
            a.c = base + set.y_off;
            a.ldc = n;
            a.m = m;
            a.n = n;
            a.k = k;
            r = moe__hopper_gemm_fp8(&a, s.stream, why, sizeof why);
        }
        if (r != MOE_STATUS_OK) return moe__error(ctx, r, "moefuse dense %s engine: %s", fp8 ? "FP8" : "BF16", why);
        return MOE_STATUS_OK;
    };

    // FP8: the heuristic's first algorithm that runs (a candidate may still decline the call).
    if (blas && fp8) {
        cublasStatus_t first = CUBLAS_STATUS_SUCCESS;
        for (int c = 0; c < s.num_candidates && !s.algo; c++) {
            bs = blas_launch(0, &s.candidates[c].algo);
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
    // Warm-up: every set once (at least 3 launches), which also loads the kernels.
    const int64_t warm = std::max<int64_t>(3, sets);
    auto launch = [&](int64_t i) -> moe_status {
        if (!blas) return engine_launch(i);
        cublasStatus_t b = blas_launch(i, s.algo);
        return b == CUBLAS_STATUS_SUCCESS ? MOE_STATUS_OK : blas_fail(ctx, b, i < warm ? "warm-up GEMM" : "timed GEMM");
    };
    return time_launches(ctx, s, warm, reps, dev.clock_khz, launch, ms);
}

// GEMM2's rows in bf16, as the forward writes them for bf16 y, where gemm_args has the field
// (out_bf16; the kernels of an older tree write fp32 rows only). Returns whether it was set.
template <class A> auto set_rows_bf16(A &a, int) -> decltype(a.out_bf16 = 1, bool()) {
    a.out_bf16 = 1;
    return true;
}
template <class A> bool set_rows_bf16(A &, long) { return false; }

// One grouped launch: see moe_grouped_measure in moefuse_analysis.h.
moe_status measure_grouped(moe_context_t *ctx, moe_dtype dtype, int32_t reps, moe_grouped_measure *g) {
    static const char fn[] = "moe_analysis_measure_grouped";
    moe__clear_error(ctx);
    if (!g) return moe__error(ctx, MOE_STATUS_NULL_POINTER, "%s: g is NULL", fn);
    g->ms = 0.0;
    g->path = -1;
    g->path_name[0] = '\0';
    g->block = g->plan_rows = 0;
    g->rows_bf16 = 0;
    if (!ctx) return moe__error(ctx, MOE_STATUS_NULL_POINTER, "%s: ctx is NULL", fn);
    moe_status st = check_common(ctx, fn, dtype, reps);
    if (st != MOE_STATUS_OK) return st;
    const int64_t H = g->hidden, I = g->intermediate, E = g->experts, T = g->tokens, K = g->top_k;
    if (g->down != 0 && g->down != 1)
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "%s: down: got %d, expected 0 (GEMM1) or 1 (GEMM2)", fn,
                          g->down);
    if (H < 1 || H > INT32_MAX || I < 1 || I > INT32_MAX)
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "%s: hidden, intermediate: got %lld, %lld, expected "
                          "1..%d", fn, (long long)H, (long long)I, INT32_MAX);
    const int64_t max_experts = (int64_t)1 << 20; // block owners are int32; far above any model's E
    if (g->num_experts < 1 || g->num_experts > max_experts || E < 1 || E > g->num_experts)
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "%s: num_experts, experts: got %lld, %lld, expected "
                          "1 <= experts <= num_experts <= %lld", fn, (long long)g->num_experts, (long long)E,
                          (long long)max_experts);
    int64_t routed;
    if (K < 1 || K > E || T < 1 || !moe__mul64(T, K, &routed) || routed > INT32_MAX)
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "%s: tokens, top_k: got %lld, %lld, expected tokens >= 1, "
                          "top_k in 1..experts (%lld), tokens*top_k < 2^31", fn, (long long)T, (long long)K,
                          (long long)E);
    if ((int)g->activation < (int)MOE_ACT_SWIGLU || (int)g->activation > (int)MOE_ACT_SWIGLU_OAI)
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "%s: activation: got %d, expected a moe_activation", fn,
                          (int)g->activation);
    const bool fp8 = dtype == MOE_DTYPE_E4M3;
    const int64_t multiple = fp8 ? 16 : 8; // as moe__cuda_weights_upload: 16-byte rows
    if (H % multiple != 0 || I % multiple != 0)
        return moe__error(ctx, MOE_STATUS_UNSUPPORTED, "%s: hidden = %lld, intermediate = %lld: the cuda backend needs "
                          "multiples of %lld for %s weights", fn, (long long)H, (long long)I, (long long)multiple,
                          fp8 ? "fp8" : "bf16");
    if ((st = check_cuda_context(ctx, fn)) != MOE_STATUS_OK) return st;

    // The path and plan block, as the forward picks them for these routed rows.
    // At decode the kernel with the operands swapped, on its plan of 32-row blocks: FP8 on the
    // Hopper path by hopper_fp8_swap_decode, bf16 where Hopper can run these shapes by
    // hopper_bf16_swap_decode (forward.cu's swap_path; the forward counts a fused shared expert
    // among E, a single launch here does not).
    const int selected = moe__cuda_gemm_select(routed, g->num_experts, H, I, dtype);
    const bool swap = fp8 ? selected == MOE__CUDA_GEMM_HOPPER && hopper_fp8_swap_decode(T, K, E)
                          : moe__cuda_gemm_select(INT64_MAX, g->num_experts, H, I, dtype) == MOE__CUDA_GEMM_HOPPER &&
                                hopper_bf16_swap_decode(T, K, E);
    const int path = swap ? MOE__CUDA_GEMM_HOPPER : selected;
    const bool hopper = path == MOE__CUDA_GEMM_HOPPER, down = g->down == 1;
    g->path = path;
    snprintf(g->path_name, sizeof g->path_name, "%s", swap ? "decode" : moe__cuda_gemm_name(path));
    const int64_t block = swap ? SWAP_BLOCK_ROWS : moe__gemm_block_rows(path);
    g->block = block;
    // GEMM1 on the Hopper bf16 tiles gathering its rows (hopper_a_gather) reads x itself (no
    // permuted copy).
    const bool gather = hopper && !fp8 && !down && !swap && hopper_a_gather(routed, E, I);

    // The plan on the host: row r = token*K + slot to expert r % E.
    const int64_t max_rows = routed + E * (block - 1), max_blocks = ceil_div(max_rows, block);
    std::vector<int32_t> ids((size_t)routed), sorted((size_t)max_rows), block_expert((size_t)max_blocks);
    std::vector<int64_t> counts((size_t)E), offsets((size_t)E + 1);
    for (int64_t r = 0; r < routed; r++) ids[(size_t)r] = (int32_t)(r % E);
    moe_dispatch_plan plan;
    memset(&plan, 0, sizeof plan);
    plan.expert_counts = counts.data();
    plan.expert_offsets = offsets.data();
    plan.sorted_ids = sorted.data();
    plan.block_expert = block_expert.data();
    if ((st = moe_dispatch_plan_build(ctx, ids.data(), T, K, E, block, &plan)) != MOE_STATUS_OK) return st;
    if (plan.max_rows != max_rows || plan.max_blocks != max_blocks)
        return moe__error(ctx, MOE_STATUS_INTERNAL, "%s: plan bounds %lld rows, %lld blocks, expected %lld, %lld", fn,
                          (long long)plan.max_rows, (long long)plan.max_blocks, (long long)max_rows,
                          (long long)max_blocks);
    g->plan_rows = offsets[(size_t)E];

    // Sizes. GEMM1: n = R13 (2I gated, I for RELU2), k = H, A2 out [max_rows, I]; GEMM2: n = H,
    // k = I, out rows [routed, H].
    const bool gated = moe_activation_is_gated(g->activation) != 0;
    const int64_t n = down ? H : (gated ? 2 * I : I), k = down ? I : H, kb = ceil_div(k, 128);
    const int64_t elem = fp8 ? 1 : 2;
    // A rows: x [T, H] gathered through the plan (v1, gather), else rows already in plan order.
    const int64_t a_rows = (!down && (!hopper || gather)) ? T : max_rows;
    // FP8 A scales: x's [T, kb] by token (v1 GEMM1); the Hopper GEMM1's permuted ones and A2's
    // (GEMM2, both paths) k-block-major [kb][scale_ld], as the forward lays them out.
    const bool kblock_major = hopper || down;
    const int64_t scale_ld = fp8_kblock_scale_rows(max_rows);
    // FP8 weight scales: 128x128 blocks; W13 of a gated activation on the paired grid.
    const bool paired = fp8 && !down && gated;
    const int64_t ws_rows = paired ? 2 * ceil_div(I, 128) : ceil_div(n, 128);

    // Arrays every set shares (plan, routing weights, biases, scales), then one set's operands.
    region common;
    const int64_t off_counts = common.add(E, 8), off_offsets = common.add(E + 1, 8);
    const int64_t off_sorted = common.add(max_rows, 4), off_block = common.add(max_blocks, 4);
    const int64_t off_weights = common.add(routed, 4);
    const int64_t off_bias = common.add(g->has_bias ? product(E, n) : 0, 4);
    const int64_t a_scales = fp8 ? product(kblock_major ? scale_ld : a_rows, kb) : 0;
    const int64_t off_a_scales = common.add(a_scales, 4);
    const int64_t off_w_scales = common.add(fp8 ? product(product(E, ws_rows), kb) : 0, 4);
    // The tiled launches' ticket counter, as the forward's workspace holds it; each launch leaves it
    // 0, and the launchers decide whether to use it.
    const bool tickets = hopper && !swap;
    const int64_t off_units = common.add(tickets ? 2 : 0, 4);
    region set;
    const int64_t off_a = set.add(product(a_rows, k), elem);
    const int64_t off_w = set.add(product(product(E, n), k), elem);
    // GEMM1 out: A2 bf16, fp32 (FP8), or e4m3 codes and column-major scales when the forward's
    // Hopper GEMM1 quantises A2 in its epilogue (a2_epilogue; GEMM2 then reads those scales).
    const bool a2_epilogue = fp8 && hopper && !swap && hopper_fp8_a2_in_epilogue(gated ? 2 * I : I, I, gated);
    const bool a2_codes = a2_epilogue && !down;
    const int64_t off_out =
        down ? set.add(product(routed, H), 4) : set.add(product(max_rows, I), a2_codes ? 1 : fp8 ? 4 : 2);
    const int64_t off_out_scales = set.add(a2_codes ? product(ceil_div(I, 128), scale_ld) : 0, 4);
    if (!common.ok || !set.ok)
        return moe__error(ctx, MOE_STATUS_OVERFLOW, "%s: operand sizes overflow int64 (experts %lld, H %lld, I %lld)",
                          fn, (long long)E, (long long)H, (long long)I);

    // The kernels' launch attributes (shared memory limits, the Hopper SM count), as the weight
    // upload sets them.
    if ((st = moe__cuda_init(ctx)) != MOE_STATUS_OK) return st;
    device_info dev;
    if ((st = query_device(ctx, &dev)) != MOE_STATUS_OK) return st;
    int64_t sets, arena_bytes;
    if (!choose_sets(dev, set.bytes, common.bytes, &sets, &arena_bytes))
        return moe__error(ctx, MOE_STATUS_OUT_OF_MEMORY, "%s: %lld + %lld bytes of operands: more than 90%% of the "
                          "GPU's %zu free bytes", fn, (long long)set.bytes, (long long)common.bytes, dev.free_bytes);

    measure_state s;
    cudaError_t e;
    if ((e = cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking)) != cudaSuccess)
        return cuda_fail(ctx, e, "cudaStreamCreate");
    if ((e = cudaMalloc(&s.arena, (size_t)arena_bytes)) != cudaSuccess) return cuda_fail(ctx, e, "operands");
    if ((e = cudaMalloc((void **)&s.scales, (size_t)common.bytes)) != cudaSuccess) return cuda_fail(ctx, e, "plan");
    char *c = s.scales;
    // The plan, uploaded once (synchronous copies from pageable memory).
    if ((e = cudaMemcpy(c + off_counts, counts.data(), (size_t)E * 8, cudaMemcpyHostToDevice)) != cudaSuccess ||
        (e = cudaMemcpy(c + off_offsets, offsets.data(), (size_t)(E + 1) * 8, cudaMemcpyHostToDevice)) !=
            cudaSuccess ||
        (e = cudaMemcpy(c + off_sorted, sorted.data(), (size_t)max_rows * 4, cudaMemcpyHostToDevice)) != cudaSuccess ||
        (e = cudaMemcpy(c + off_block, block_expert.data(), (size_t)max_blocks * 4, cudaMemcpyHostToDevice)) !=
            cudaSuccess ||
        (tickets && (e = cudaMemsetAsync(c + off_units, 0, 2 * sizeof(int), s.stream)) != cudaSuccess))
        return cuda_fail(ctx, e, "uploading the plan");
    const uint64_t seed = fresh_seed();
    launch_fill_f32(c + off_weights, routed, seed ^ 0x2545F4914F6CDD1Dull, 0.05f, 1.0f, s.stream);
    if (g->has_bias) launch_fill_f32(c + off_bias, E * n, seed ^ 0x9E6C63D0676A9A99ull, -0.1f, 0.1f, s.stream);
    if (fp8) { // about 4/448, as a recipe gives for values of amax ~4
        launch_fill_f32(c + off_a_scales, a_scales, seed ^ 0x5851F42D4C957F2Dull, 1.0f / 224, 1.0f / 56, s.stream);
        launch_fill_f32(c + off_w_scales, E * ws_rows * kb, seed ^ 0x14057B7EF767814Full, 1.0f / 224, 1.0f / 56,
                        s.stream);
    }
    for (int64_t i = 0; i < sets; i++) {
        char *base = (char *)s.arena + i * set.bytes;
        const uint64_t set_seed = seed + (uint64_t)i * 0x632BE59BD9B4E019ull;
        launch_fill(base + off_a, a_rows * k, dtype, set_seed, s.stream);
        launch_fill(base + off_w, E * n * k, dtype, ~set_seed, s.stream);
    }
    if ((e = cudaGetLastError()) != cudaSuccess) return cuda_fail(ctx, e, "filling the inputs");

    // The launch arguments as forward.cu fills them (its shared-expert fields left out).
    gemm_args a;
    memset(&a, 0, sizeof a);
    a.mode = down ? GEMM_DOWN : GEMM_UP;
    a.lda = k;
    a.experts = E;
    a.bias = g->has_bias ? (const float *)(c + off_bias) : NULL;
    a.n = n;
    a.k = k;
    a.sorted_ids = (const int32_t *)(c + off_sorted);
    a.block_expert = (const int32_t *)(c + off_block);
    a.live_rows = (const int64_t *)(c + off_offsets) + E;
    a.rows = max_rows;
    a.tokens = T;
    a.top_k = K;
    a.topk_weights = (const float *)(c + off_weights);
    a.shared_scale = NULL;
    a.weight_on_input = 0;
    a.ldo = down ? H : I;
    a.activation = g->activation;
    a.act_alpha = g->act_alpha;
    a.act_limit = g->act_limit;
    a.unit_counter = tickets ? (int *)(c + off_units) : NULL;
    if (down && (!fp8 || hopper)) g->rows_bf16 = set_rows_bf16(a, 0); // as the forward for bf16 y
    fp8_gemm_args f;
    memset(&f, 0, sizeof f);
    if (fp8) {
        f.a_scales = (const float *)(c + off_a_scales);
        f.a_scale_rs = kblock_major ? 1 : kb;
        f.a_scale_ks = kblock_major ? scale_ld : 1;
        f.w_scales = (const float *)(c + off_w_scales);
        f.w_scale_rows = ws_rows;
        f.w_scale_cols = kb;
        f.w_scale_kind = paired ? FP8W_BLOCK_PAIRED : FP8W_BLOCK;
        f.swap_decode = swap;
    }

    auto launch = [&](int64_t i) -> moe_status {
        char *base = (char *)s.arena + (i % sets) * set.bytes;
        gemm_args x = a;
        x.a = base + off_a;
        x.b = base + off_w;
        x.out = base + off_out;
        if (!fp8) {
            if (!hopper) return cuda_status(ctx, gemm_launch(MOE_DTYPE_BF16, &x, s.stream), "v1 grouped GEMM");
            if (swap) return hopper_swap_decode_launch(ctx, &x, s.stream);
            return gather ? hopper_gemm1_gather_launch(ctx, &x, s.stream) : hopper_gemm_launch(ctx, &x, s.stream);
        }
        fp8_gemm_args y = f;
        y.g = x;
        if (a2_codes) {
            y.out_scales = (float *)(base + off_out_scales);
            y.out_scale_ks = scale_ld;
        }
        if (hopper) return hopper_fp8_gemm_launch(ctx, &y, s.stream);
        return cuda_status(ctx, fp8_gemm_launch(&y, s.stream), "v1 fp8 grouped GEMM");
    };
    const int64_t warm = std::max<int64_t>(3, sets);
    return time_launches(ctx, s, warm, reps, dev.clock_khz, launch, &g->ms);
}

} // namespace

// Host allocations (std::vector) throw on failure; the C callers get a status instead.
extern "C" moe_status moe_analysis_measure_gemm(moe_context_t *ctx, int64_t m, int64_t k, int64_t n, moe_dtype dtype,
                                                int32_t reps, double *ms) {
    try {
        return measure_plain(ctx, "moe_analysis_measure_gemm", ENGINE_CUBLAS, m, k, n, dtype, reps, ms);
    } catch (const std::bad_alloc &) {
        return moe__error(ctx, MOE_STATUS_OUT_OF_MEMORY, "moe_analysis_measure_gemm: out of host memory");
    }
}

extern "C" moe_status moe_analysis_measure_dense(moe_context_t *ctx, int64_t m, int64_t k, int64_t n, moe_dtype dtype,
                                                 int32_t reps, double *ms) {
    try {
        return measure_plain(ctx, "moe_analysis_measure_dense", ENGINE_MOEFUSE_DENSE, m, k, n, dtype, reps, ms);
    } catch (const std::bad_alloc &) {
        return moe__error(ctx, MOE_STATUS_OUT_OF_MEMORY, "moe_analysis_measure_dense: out of host memory");
    }
}

extern "C" moe_status moe_analysis_measure_grouped(moe_context_t *ctx, moe_dtype dtype, int32_t reps,
                                                   moe_grouped_measure *g) {
    try {
        return measure_grouped(ctx, dtype, reps, g);
    } catch (const std::bad_alloc &) {
        return moe__error(ctx, MOE_STATUS_OUT_OF_MEMORY, "moe_analysis_measure_grouped: out of host memory");
    }
}
