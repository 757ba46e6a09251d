// FP8 kernel lab driver: the block-scaled FP8 variants (lab_fp8.h) and the library entry on a
// list of shapes, each checked, then timed against cuBLASLt FP8 in the same process.
//
// Per shape and input set: fresh random fp32 inputs (seed printed; LAB_SEED=n to repeat) whose
// magnitude varies by 2^-4..2^4 per A row-block (1x128) and per B 128x128 block, so that a
// scale applied to the wrong rows/columns/k-block shows as an O(1) error. They are quantised
// on the host by the library's own quantiser (moe_quantize from src/core/formats.c, compiled
// into this binary): FP8_ROW128 for A, FP8_BLOCK128 for B, and FP8_TENSOR for cuBLASLt's
// per-tensor copy. The references are fp64 GEMMs on the GPU of the DEQUANTISED operands
// (moe_dequantize), each cross-checked against a CPU fp64 dot product at sampled elements.
// Against them the only error left is accumulation (the tensor core's reduced-precision sum
// within a 128-K block, fp32 across blocks) and the bf16 output rounding:
//   bf16 rounding alone: relative error <= 2^-9 per element, about 1.1e-3-1.7e-3 Frobenius
//   (the bf16 lab measures 1.7e-3 for cuBLAS); the FP8 tensor-core accumulation keeps about
//   14 bits inside a block (DeepSeek-V3 report), ~1e-4 relative; so the tolerance is 5e-3:
//   3x headroom over what is expected, while a wrong scale, a wrong fragment row, a lost
//   k-block or an unpromoted partial (scaled by the wrong block's scale) gives >= 1e-1.
// Outputs are poisoned (NaN) before every checked run; a non-finite output fails.
// Timing: a CUDA graph of REPS launches (rotating 3 input sets when one fits in L2), median of
// 20 replays / REPS, every impl of a shape checked first and then all timed in 5 interleaved
// rounds (lab_graph_medians: no impl always first on a cool card).
//
//   gemm_fp8_lab [--variants fp8v1,fp8v2,fp8v3,fp8v3_160,fp8v3_144,fp8v4,fp8v4_128,fp8v6,fp8v6_128,fp8v4u,fp8v4u_128,fp8v8,fp8v8_128,fp8engine,fp8engine_pt,fp8pt,fp8pt_128,fp8pt_c2,fp8pt_128_c2,fp8pt_128_s7_c2] [--filter SUBSTR] [--json rows.jsonl] [--quick] [--check-only] [--sanitize]
//   gemm_fp8_lab --selftest      (host only: the quantisation harness against moe_quantize)
//
// Last line: "N passed, M failed"; exit status 1 if any check failed.
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <algorithm>
#include <thread>
#include <vector>

#include "lab_fp8.h"
#include "lab_util.h"


static const double TOLERANCE = 5e-3; // relative Frobenius error against the fp64 reference
static const int TIMED = 20;
static const int WARMUP = 1; // untimed replays before each impl's turn in a round
static const int REPS = 10;
static const int SETS = 3;
static const int ROUNDS = 5; // interleaved timing rounds (lab_graph_medians)

struct shape {
    const char *name;
    int64_t m, n, k;
    bool big; // skipped by --quick
};

// Squares for the floors; DeepSeek-V3's per-expert GEMMs at T = 16384 (uniform routing: rows =
// T*8/256 = 512; GEMM1 N = 2*2048 gate+up, K = 7168; GEMM2 N = 7168, K = 2048); 16 experts'
// rows stacked (what a grouped kernel sees per column block); tails in M, N and K (K = 1040 =
// 8 blocks + 16: the last scale block is partial); an odd number of 128-row blocks (9), so a
// cluster-of-2 variant's last cluster has a CTA without rows, both with K = 1040 (the scale rows
// too short for TMA: the ring variants and the engine only) and with K = 1024 (every variant);
// 33 row blocks, where the engine runs 128-wide tiles in clusters (8 waves); DeepSeek-V3's
// q_a_proj at T = 4096, where its tile rule takes 192 (2 waves against 3 of 128-wide tiles).
static const shape SHAPES[] = {
    {"square-4096", 4096, 4096, 4096, false},
    {"square-8192", 8192, 8192, 8192, true},
    {"deepseek-v3-gemm1-expert", 512, 4096, 7168, false},
    {"deepseek-v3-gemm2-expert", 512, 7168, 2048, false},
    {"deepseek-v3-gemm1-x16-experts", 8192, 4096, 7168, true},
    {"deepseek-v3-gemm2-x16-experts", 8192, 7168, 2048, true},
    {"tails-1000x1000x1040", 1000, 1000, 1040, false},
    {"tails-1100x1000x1040", 1100, 1000, 1040, false},
    {"odd-rows-1100x1000x1024", 1100, 1000, 1024, false},
    {"odd-rows-4224x4096x1024", 4224, 4096, 1024, false},
    {"deepseek-v3-q-a-proj", 4096, 1536, 7168, false},
};

// ---- device kernels ------------------------------------------------------------------------
// Reference: C[i, j] = sum_k A[i, k] * B[j, k] in fp64 from fp32 operands; 16 x 16 blocks.
__global__ void reference_gemm_f64(const float *a, const float *b, double *c, int64_t m, int64_t n, int64_t k) {
    __shared__ double as[16][17], bs[16][17];
    const int64_t row = blockIdx.y * 16 + threadIdx.y;
    const int64_t col = blockIdx.x * 16 + threadIdx.x;
    const int64_t b_row = blockIdx.x * 16 + threadIdx.y;
    double sum = 0.0;
    for (int64_t k0 = 0; k0 < k; k0 += 16) {
        const int64_t kk = k0 + threadIdx.x;
        as[threadIdx.y][threadIdx.x] = (row < m && kk < k) ? (double)a[row * k + kk] : 0.0;
        bs[threadIdx.y][threadIdx.x] = (b_row < n && kk < k) ? (double)b[b_row * k + kk] : 0.0;
        __syncthreads();
        for (int t = 0; t < 16; ++t) sum += as[threadIdx.y][t] * bs[threadIdx.x][t];
        __syncthreads();
    }
    if (row < m && col < n) c[row * n + col] = sum;
}

// Accumulates sum (c - ref)^2, sum ref^2 and the count of non-finite c (bf16) into out[0..2].
__global__ void compare_bf16(const __nv_bfloat16 *c, const double *ref, int64_t count, double *out) {
    double diff = 0.0, norm = 0.0, bad = 0.0;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < count; i += (int64_t)gridDim.x * blockDim.x) {
        float v = __bfloat162float(c[i]);
        if (!isfinite(v)) {
            bad += 1.0;
            continue;
        }
        double d = (double)v - ref[i];
        diff += d * d;
        norm += ref[i] * ref[i];
    }
    for (int off = 16; off > 0; off /= 2) {
        diff += __shfl_down_sync(0xffffffffu, diff, off);
        norm += __shfl_down_sync(0xffffffffu, norm, off);
        bad += __shfl_down_sync(0xffffffffu, bad, off);
    }
    if (threadIdx.x % 32 == 0) {
        atomicAdd(&out[0], diff);
        atomicAdd(&out[1], norm);
        atomicAdd(&out[2], bad);
    }
}

// ---- host: inputs, quantisation (the library's), references ----------------------------------
// Uniform in [-1, 1) times 2^e, e in [-4, 4] drawn per (row block of `block_rows`, 128 columns).
// Runs f(r0, r1) over row chunks (multiples of 128 rows: block boundaries) on all cores.
template <class F> static void parallel_rows(int64_t rows, F f) {
    unsigned nt = std::max(1u, std::thread::hardware_concurrency());
    int64_t blocks = (rows + 127) / 128;
    int64_t per = (blocks + nt - 1) / nt;
    std::vector<std::thread> ts;
    for (unsigned t = 0; t < nt; ++t) {
        int64_t r0 = (int64_t)t * per * 128, r1 = std::min(rows, r0 + per * 128);
        if (r0 >= r1) break;
        ts.emplace_back(f, r0, r1);
    }
    for (auto &th : ts) th.join();
}

static void fill_inputs(std::vector<float> &x, int64_t rows, int64_t cols, int64_t block_rows, uint64_t seed) {
    x.resize((size_t)(rows * cols));
    const int64_t kblocks = (cols + 127) / 128;
    parallel_rows(rows, [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r)
            for (int64_t c = 0; c < cols; ++c) {
                uint64_t blk =
                    lab_splitmix64(seed ^ lab_splitmix64((uint64_t)((r / block_rows) * kblocks + c / 128) + 0x5bd1e995ull));
                int e = (int)(blk % 9) - 4;
                uint64_t u = lab_splitmix64(seed ^ lab_splitmix64((uint64_t)(r * cols + c)));
                float v = (float)(u >> 40) * (1.0f / 16777216.0f) * 2.0f - 1.0f;
                x[(size_t)(r * cols + c)] = ldexpf(v, e);
            }
    });
}

// One quantised matrix: codes, scales, and its dequantised fp32 copy.
struct qmat {
    std::vector<uint8_t> codes;
    std::vector<float> scales;
    std::vector<float> deq;
    int64_t scale_cols = 0;
};

static void quantize(moe_format fmt, const std::vector<float> &x, int64_t rows, int64_t cols, qmat &q) {
    moe_format_layout lay;
    if (moe_format_layout_get(fmt, rows, cols, &lay) != MOE_STATUS_OK) {
        fprintf(stderr, "moe_format_layout_get failed\n");
        exit(2);
    }
    q.codes.resize(lay.code_bytes);
    q.scales.resize((size_t)(lay.scale_rows * lay.scale_cols));
    q.deq.resize((size_t)(rows * cols));
    q.scale_cols = lay.scale_cols;
    if (fmt == MOE_FORMAT_FP8_TENSOR) { // one scale over the whole matrix: not split
        if (moe_quantize(fmt, x.data(), rows, cols, cols, q.codes.data(), q.scales.data(), NULL) != MOE_STATUS_OK ||
            moe_dequantize(fmt, q.codes.data(), q.scales.data(), 1.0f, rows, cols, q.deq.data(), cols) != MOE_STATUS_OK) {
            fprintf(stderr, "moe_quantize/moe_dequantize failed: %s\n", moe_last_error(NULL));
            exit(2);
        }
        return;
    }
    // Row chunks on 128-row boundaries quantise exactly as the whole matrix would.
    const int64_t scale_row_div = fmt == MOE_FORMAT_FP8_BLOCK128 ? 128 : 1;
    parallel_rows(rows, [&](int64_t r0, int64_t r1) {
        const float *src = x.data() + r0 * cols;
        uint8_t *codes = q.codes.data() + r0 * cols;
        float *scales = q.scales.data() + (r0 / scale_row_div) * q.scale_cols;
        if (moe_quantize(fmt, src, r1 - r0, cols, cols, codes, scales, NULL) != MOE_STATUS_OK ||
            moe_dequantize(fmt, codes, scales, 1.0f, r1 - r0, cols, q.deq.data() + r0 * cols, cols) != MOE_STATUS_OK) {
            fprintf(stderr, "moe_quantize/moe_dequantize failed: %s\n", moe_last_error(NULL));
            exit(2);
        }
    });
}

template <class T> static T *upload(const std::vector<T> &v) {
    T *d;
    CUDA_OK(cudaMalloc(&d, v.size() * sizeof(T)));
    CUDA_OK(cudaMemcpy(d, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
    return d;
}

// Rows of `cols` floats -> rows of `ld` (>= cols), zero-padded.
static std::vector<float> padded_rows(const std::vector<float> &v, int64_t cols, int64_t ld) {
    const int64_t rows = (int64_t)v.size() / cols;
    std::vector<float> p((size_t)(rows * ld), 0.0f);
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) p[(size_t)(r * ld + c)] = v[(size_t)(r * cols + c)];
    return p;
}

// rows x cols row-major -> cols x rows row-major.
static std::vector<float> transposed(const std::vector<float> &v, int64_t rows, int64_t cols) {
    std::vector<float> t(v.size());
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) t[(size_t)(c * rows + r)] = v[(size_t)(r * cols + c)];
    return t;
}

// The fp64 reference of deq_a . deq_b^T on the GPU, checked against CPU fp64 at sampled
// elements (bound: fp64 summation in any order, K * 2^-52 * sum |a b|). Returns violations.
static int make_reference(const shape &sh, const qmat &qa, const qmat &qb, double **ref, uint64_t seed) {
    float *da = upload(qa.deq), *db = upload(qb.deq);
    CUDA_OK(cudaMalloc(ref, (size_t)(sh.m * sh.n) * sizeof(double)));
    dim3 grid((unsigned)((sh.n + 15) / 16), (unsigned)((sh.m + 15) / 16));
    reference_gemm_f64<<<grid, dim3(16, 16)>>>(da, db, *ref, sh.m, sh.n, sh.k);
    CUDA_OK(cudaGetLastError());
    CUDA_OK(cudaDeviceSynchronize());
    CUDA_OK(cudaFree(da));
    CUDA_OK(cudaFree(db));
    int bad = 0;
    uint64_t x = seed;
    for (int i = 0; i < 24; ++i) {
        x = lab_splitmix64(x);
        int64_t r = i == 0 ? 0 : i == 1 ? sh.m - 1 : (int64_t)(x % (uint64_t)sh.m);
        x = lab_splitmix64(x);
        int64_t c = i == 0 ? 0 : i == 1 ? sh.n - 1 : (int64_t)(x % (uint64_t)sh.n);
        double got, exact = 0.0, mag = 0.0;
        CUDA_OK(cudaMemcpy(&got, *ref + r * sh.n + c, sizeof got, cudaMemcpyDeviceToHost));
        for (int64_t t = 0; t < sh.k; ++t) {
            double p = (double)qa.deq[(size_t)(r * sh.k + t)] * (double)qb.deq[(size_t)(c * sh.k + t)];
            exact += p;
            mag += fabs(p);
        }
        if (!(fabs(got - exact) <= (double)sh.k * ldexp(1.0, -52) * mag + 1e-300)) {
            if (bad < 3) printf("  reference wrong at (%lld, %lld): %.17g vs %.17g\n", (long long)r, (long long)c, got, exact);
            ++bad;
        }
    }
    return bad;
}

static double relative_error(const shape &sh, const void *c, const double *ref, double *scratch) {
    double host[3];
    CUDA_OK(cudaMemset(scratch, 0, 3 * sizeof(double)));
    compare_bf16<<<1024, 256>>>((const __nv_bfloat16 *)c, ref, sh.m * sh.n, scratch);
    CUDA_OK(cudaGetLastError());
    CUDA_OK(cudaMemcpy(host, scratch, sizeof host, cudaMemcpyDeviceToHost));
    if (host[2] > 0) return INFINITY;
    if (host[1] == 0.0) return host[0] == 0.0 ? 0.0 : INFINITY;
    return sqrt(host[0] / host[1]);
}

// ---- implementations -------------------------------------------------------------------------
struct operand_set {
    uint8_t *a, *b;        // block-scaled codes
    float *sa, *sb;        // their scales
    int64_t lds_a, lds_b;
    uint8_t *ta, *tb;      // per-tensor codes (cuBLASLt)
    float *tsa, *tsb;      // their one scale each
    float *sa_t;           // sa transposed, [kb][row]: cuBLASLt's layout of 1x128 scales ("lt-block")
    float *sb_lt;          // sb with its rows padded to a multiple of 4 k-blocks (cuBLASLt's 128x128 scales)
    double *ref, *ref_tensor;
};

struct impl {
    const char *name;
    const char *what;
    lab_fp8_fn fn;      // NULL: cuBLASLt
    int8_t fast_accum;  // cuBLASLt only: CUBLASLT_MATMUL_DESC_FAST_ACCUM
    int8_t lt_block;    // cuBLASLt only: our block-scaled operands (else the per-tensor ones)
    int8_t tensor;      // ours: on the per-tensor operands (ta, tb, tsa, tsb: cuBLASLt's "cublaslt" work)
};

// Whether an implementation computes on the per-tensor operands (else the block-scaled ones).
static bool tensor_operands(const impl &im) { return (!im.fn && !im.lt_block) || im.tensor; }

static cublasLtHandle_t g_lt;
static void *g_lt_ws;
static const size_t LT_WS_BYTES = 64u << 20;

static moe_status engine_entry(const moe__hopper_gemm_fp8_args *a, cudaStream_t s, char *why, size_t n) {
    return moe__hopper_gemm_fp8(a, s, why, n);
}

// cuBLASLt FP8: column-major view C^T[N, M] = B[N, K] . A[M, K]^T, i.e. op(B) = T on the K x N
// column-major view of B, op(A) = N (the "TN" layout FP8 requires), per-tensor scales by
// pointer, fp32 compute, bf16 out. Algorithm: the heuristic's first. fast_accum 0 (the
// default) keeps cuBLASLt's own periodic promotion, like ours; 1 is what training recipes use.
// lt_block: the same e4m3 codes and scales ours get, as cuBLASLt's 1-D (VEC128_32F, the
// activations) and 2-D (BLK128x128_32F, the weights) block scaling (cuBLAS >= 12.9, sm_90): the
// same work as our kernel. Of the four layouts its scale tensors could have, the lab's check
// passed one (session 21, call V3): the activations' scales [kb][row] (rows fastest: sa_t), the
// weights' as ours (row-major [n block][kb]); the other three were wrong (rel. error 1.1-1.3).
// Where K / 128 is not a multiple of 4 (the tails shapes) it failed with our unpadded rows; sb_lt
// pads them to 4 k-blocks (16 bytes), a guess the check decides.
static moe_status lt_matmul(const shape &sh, const operand_set &op, void *c, int8_t fast_accum, int8_t lt_block,
                            cudaStream_t stream, char *why, size_t why_len) {
    cublasLtMatmulDesc_t desc = NULL;
    cublasLtMatrixLayout_t lb = NULL, la = NULL, lc = NULL;
    cublasLtMatmulPreference_t pref = NULL;
    cublasStatus_t st = cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    const cublasOperation_t t = CUBLAS_OP_T, n = CUBLAS_OP_N;
    if (!st) st = cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof t);
    if (!st) st = cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &n, sizeof n);
    if (!st) st = cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast_accum, sizeof fast_accum);
    const float *scale_w = lt_block ? op.sb_lt : op.tsb;
    const float *scale_x = lt_block ? op.sa_t : op.tsa;
    if (!st) st = cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &scale_w, sizeof scale_w);
    if (!st) st = cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &scale_x, sizeof scale_x);
    if (lt_block) {
        const int32_t mode_w = CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F, mode_x = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
        if (!st) st = cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &mode_w, sizeof mode_w);
        if (!st) st = cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mode_x, sizeof mode_x);
    }
    const uint8_t *codes_w = lt_block ? op.b : op.tb, *codes_x = lt_block ? op.a : op.ta;
    if (!st) st = cublasLtMatrixLayoutCreate(&lb, CUDA_R_8F_E4M3, sh.k, sh.n, sh.k);
    if (!st) st = cublasLtMatrixLayoutCreate(&la, CUDA_R_8F_E4M3, sh.k, sh.m, sh.k);
    if (!st) st = cublasLtMatrixLayoutCreate(&lc, CUDA_R_16BF, sh.n, sh.m, sh.n);
    if (!st) st = cublasLtMatmulPreferenceCreate(&pref);
    if (!st)
        st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &LT_WS_BYTES,
                                                  sizeof LT_WS_BYTES);
    cublasLtMatmulHeuristicResult_t heur;
    int found = 0;
    if (!st) st = cublasLtMatmulAlgoGetHeuristic(g_lt, desc, lb, la, lc, lc, pref, 1, &heur, &found);
    if (!st && found < 1) st = CUBLAS_STATUS_NOT_SUPPORTED;
    const float alpha = 1.0f, beta = 0.0f;
    if (!st)
        st = cublasLtMatmul(g_lt, desc, &alpha, codes_w, lb, codes_x, la, &beta, c, lc, c, lc, &heur.algo, g_lt_ws,
                            LT_WS_BYTES, stream);
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (lc) cublasLtMatrixLayoutDestroy(lc);
    if (la) cublasLtMatrixLayoutDestroy(la);
    if (lb) cublasLtMatrixLayoutDestroy(lb);
    if (desc) cublasLtMatmulDescDestroy(desc);
    if (st) {
        snprintf(why, why_len, "cublasLt FP8 matmul: status %d", (int)st);
        // FP8 cuBLASLt has shape rules of its own (e.g. dimensions multiple of 16 in some
        // versions): a peer that declines a shape is reported as skipped, not as our failure.
        return st == CUBLAS_STATUS_NOT_SUPPORTED ? MOE_STATUS_UNSUPPORTED : MOE_STATUS_DEVICE_ERROR;
    }
    return MOE_STATUS_OK;
}

static moe_status launch(const impl &im, const shape &sh, const operand_set &op, void *c, cudaStream_t stream,
                         char *why, size_t why_len) {
    if (!im.fn) return lt_matmul(sh, op, c, im.fast_accum, im.lt_block, stream, why, why_len);
    moe__hopper_gemm_fp8_args args;
    memset(&args, 0, sizeof args);
    args.a = im.tensor ? op.ta : op.a;
    args.lda = sh.k;
    args.a_scales = im.tensor ? op.tsa : op.sa;
    args.lds_a = im.tensor ? 1 : op.lds_a;
    args.b = im.tensor ? op.tb : op.b;
    args.ldb = sh.k;
    args.b_scales = im.tensor ? op.tsb : op.sb;
    args.lds_b = im.tensor ? 1 : op.lds_b;
    args.tensor_scales = im.tensor;
    args.c = c;
    args.ldc = sh.n;
    args.m = sh.m;
    args.n = sh.n;
    args.k = sh.k;
    return im.fn(&args, stream, why, why_len);
}

// The impl's graph of REPS launches (rotating the input sets), instantiated; NULL if the capture
// failed (said on stdout).
static cudaGraphExec_t capture_impl(const impl &im, const shape &sh, const std::vector<operand_set> &ops, void *c,
                                    cudaStream_t stream) {
    char why[256] = "";
    cudaGraph_t graph;
    moe_status st = MOE_STATUS_OK;
    CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    for (int r = 0; r < REPS && st == MOE_STATUS_OK; ++r)
        st = launch(im, sh, ops[r % ops.size()], c, stream, why, sizeof why);
    cudaError_t cap = cudaStreamEndCapture(stream, &graph);
    if (st != MOE_STATUS_OK || cap != cudaSuccess) {
        printf("  %s: capture failed: %s %s\n", im.name, why, cudaGetErrorString(cap));
        cudaGetLastError();
        return NULL;
    }
    return lab_instantiate(graph);
}

// Host only (no GPU): the chunked quantisation above must equal one moe_quantize call over the
// whole matrix, byte for byte, and the dequantised copy must equal moe_dequantize's. Returns
// the number of mismatching formats.
static int selftest_quantizer(uint64_t seed) {
    const int64_t rows = 1000, cols = 1040;
    std::vector<float> x;
    fill_inputs(x, rows, cols, 128, seed);
    int bad = 0;
    const moe_format fmts[] = {MOE_FORMAT_FP8_ROW128, MOE_FORMAT_FP8_BLOCK128, MOE_FORMAT_FP8_TENSOR};
    for (moe_format fmt : fmts) {
        qmat q;
        quantize(fmt, x, rows, cols, q);
        std::vector<uint8_t> codes(q.codes.size());
        std::vector<float> scales(q.scales.size()), deq(q.deq.size());
        moe_quantize(fmt, x.data(), rows, cols, cols, codes.data(), scales.data(), NULL);
        moe_dequantize(fmt, codes.data(), scales.data(), 1.0f, rows, cols, deq.data(), cols);
        const bool same = codes == q.codes && scales == q.scales &&
                          memcmp(deq.data(), q.deq.data(), deq.size() * sizeof(float)) == 0;
        // And the dequantised values are close to the inputs (e4m3: relative step 2^-3 at worst
        // against the block max; 1/16 of the block max bounds the error for normal codes).
        double worst = 0.0;
        for (size_t i = 0; i < x.size(); ++i) worst = std::max(worst, (double)fabsf(x[i] - q.deq[i]));
        printf("selftest %s: chunked == whole %s, max |x - deq| = %.3g (inputs up to 16)\n", moe_format_name(fmt),
               same ? "yes" : "NO", worst);
        bad += !same || !(worst <= 1.0);
    }
    return bad;
}

int main(int argc, char **argv) {
    const char *variants = "fp8v1,fp8v2,fp8v3,fp8v3_160,fp8v3_144,fp8engine";
    const char *filter = NULL;
    const char *json_path = NULL;
    bool quick = false;
    bool check_only = false; // one launch per impl and shape, no timing (for a profiler)
    // Our kernels only, one launch per shape, no reference and no check: for compute-sanitizer's
    // racecheck, under which the fp64 reference kernel (shared-memory tiles) takes minutes.
    bool sanitize = false;
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--variants") && i + 1 < argc) variants = argv[++i];
        else if (!strcmp(argv[i], "--filter") && i + 1 < argc) filter = argv[++i];
        else if (!strcmp(argv[i], "--json") && i + 1 < argc) json_path = argv[++i];
        else if (!strcmp(argv[i], "--quick")) quick = true;
        else if (!strcmp(argv[i], "--check-only")) check_only = true;
        else if (!strcmp(argv[i], "--sanitize")) sanitize = true;
        else if (!strcmp(argv[i], "--selftest")) { // host only: the quantiser harness
            int bad = selftest_quantizer(12345);
            printf("%d passed, %d failed\n", 3 - bad, bad);
            return bad ? 1 : 0;
        } else {
            fprintf(stderr, "usage: %s [--variants fp8v1,fp8v2,fp8v3,fp8v3_160,fp8v3_144,fp8v4,fp8v4_128,fp8v6,fp8v6_128,fp8v4u,fp8v4u_128,fp8v8,fp8v8_128,fp8engine,fp8engine_pt,fp8pt,fp8pt_128,fp8pt_c2,fp8pt_128_c2,fp8pt_128_s7_c2] [--filter SUBSTR] [--json FILE] [--quick] [--check-only] [--sanitize]\n", argv[0]);
            return 2;
        }
    }
    const impl all[] = {
        {"fp8v1", "128x128x128 tile, 6 stages, TMA + cp.async scales, 2 wgmma consumer warpgroups, promotion every 128 of K",
         lab_gemm_fp8_v1, 0},
        {"fp8v2", "fp8v1 with two partial accumulators: k-block kb+1's wgmmas overlap kb's promotion", lab_gemm_fp8_v2, 0},
        {"fp8v3", "128 x 192 tiles, 5 stages: B scales of two 128-column blocks a tile", lab_gemm_fp8_v3, 0},
        {"fp8v3_160", "fp8v3 with 128 x 160 tiles, 6 stages", lab_gemm_fp8_v3_160, 0},
        {"fp8v3_144", "fp8v3 with 128 x 144 tiles (cuBLASLt's width at 8192^3), 6 stages", lab_gemm_fp8_v3_144, 0},
        {"fp8v4", "fp8v3 (128 x 192, 5 stages) with the scales by TMA in the stage's transaction, no scale ring",
         lab_gemm_fp8_v4, 0},
        {"fp8v4_128", "fp8v1 (128 x 128, 6 stages) with the scales by TMA in the stage's transaction", lab_gemm_fp8_v4_128,
         0},
        {"fp8v6", "fp8v4 with the consumers' ACQUIRE_FIRST order: stage kb waited for and its scales read while kb-1's wgmmas run",
         lab_gemm_fp8_v6, 0},
        {"fp8v6_128", "fp8v4_128 with the ACQUIRE_FIRST order", lab_gemm_fp8_v6_128, 0},
        {"fp8v4u", "fp8v4 with the warp-uniform warpgroup index", lab_gemm_fp8_v4u, 0},
        {"fp8v4u_128", "fp8v4_128 with the warp-uniform warpgroup index", lab_gemm_fp8_v4u_128, 0},
        {"fp8v8", "fp8v6 in clusters of 2 along M, B multicast", lab_gemm_fp8_v8, 0},
        {"fp8v8_128", "fp8v4u_128 in clusters of 2 along M, B multicast (cuBLASLt's same-work configuration)",
         lab_gemm_fp8_v8_128, 0},
        {"fp8engine", "library entry moe__hopper_gemm_fp8", engine_entry, 0},
        {"fp8engine_pt", "library entry moe__hopper_gemm_fp8 on per-tensor operands (tensor_scales = 1)", engine_entry,
         0, 0, 1},
        {"fp8pt", "per-tensor operands: 128 x 192, 5 stages, ACQUIRE_FIRST, no scales in the stage", lab_gemm_fp8_pt, 0,
         0, 1},
        {"fp8pt_128", "per-tensor operands: 128 x 128, 6 stages, ISSUE_THEN_WAIT_U", lab_gemm_fp8_pt_128, 0, 0, 1},
        {"fp8pt_c2", "fp8pt in clusters of 2 along M, B multicast", lab_gemm_fp8_pt_c2, 0, 0, 1},
        {"fp8pt_128_c2", "fp8pt_128 in clusters of 2 along M, B multicast", lab_gemm_fp8_pt_128_c2, 0, 0, 1},
        {"fp8pt_128_s7_c2", "fp8pt_128_c2 with 7 stages (they fit without the scale boxes)", lab_gemm_fp8_pt_128_s7_c2,
         0, 0, 1},
    };
    std::vector<impl> impls;
    // The ratio column is against "cublaslt" (promoting accumulation, like ours); "lt-fast" is
    // the fast-accumulation mode beside it for reference.
    impls.push_back({"cublaslt", "cublasLtMatmul e4m3 x e4m3 -> bf16, per-tensor scales, fp32 compute, heuristic algo", NULL, 0});
    impls.push_back({"lt-fast", "as cublaslt with CUBLASLT_MATMUL_DESC_FAST_ACCUM = 1", NULL, 1});
    impls.push_back({"lt-block", "cublasLtMatmul on our block-scaled operands (VEC128 x BLK128x128 scales): the same work",
                     NULL, 0, 1});
    for (const impl &im : lab_pick_variants(all, sizeof all / sizeof all[0], variants)) impls.push_back(im);

    uint64_t seed = getenv("LAB_SEED") ? strtoull(getenv("LAB_SEED"), NULL, 10) : (uint64_t)time(NULL);
    cudaDeviceProp prop;
    CUDA_OK(cudaGetDeviceProperties(&prop, 0));
    printf("device: %s, %d SMs, L2 %d MB; seed %llu (LAB_SEED to repeat)\n", prop.name, prop.multiProcessorCount,
           prop.l2CacheSize >> 20, (unsigned long long)seed);
    fflush(stdout);
    if (cublasLtCreate(&g_lt) != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "cublasLtCreate failed\n");
        return 2;
    }
    CUDA_OK(cudaMalloc(&g_lt_ws, LT_WS_BYTES));
    cudaStream_t stream;
    CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    double *scratch;
    CUDA_OK(cudaMalloc(&scratch, 3 * sizeof(double)));
    FILE *json = json_path ? fopen(json_path, "a") : NULL;
    if (json_path && !json) {
        fprintf(stderr, "cannot open %s\n", json_path);
        return 2;
    }
    const char *commit = getenv("LAB_COMMIT") ? getenv("LAB_COMMIT") : "unknown";

    int passed = 0, failed = 0;
    printf("%-44s %-9s %9s %9s %9s %8s  %s\n", "shape (M x N x K)", "impl", "ms", "TFLOP/s", "vs Lt", "err", "check");
    for (const shape &sh : SHAPES) {
        if (filter && !strstr(sh.name, filter)) continue;
        if (quick && sh.big) continue;
        const size_t c_bytes = (size_t)(sh.m * sh.n) * 2;
        const size_t set_bytes = (size_t)(sh.m * sh.k + sh.n * sh.k) + c_bytes;
        const int sets = set_bytes <= (size_t)prop.l2CacheSize && !sanitize ? SETS : 1;
        std::vector<operand_set> ops((size_t)sets);
        int ref_bad = 0;
        for (int s = 0; s < sets; ++s) {
            std::vector<float> xa, xb;
            fill_inputs(xa, sh.m, sh.k, 1, seed * 1000003u + 2 * s);
            fill_inputs(xb, sh.n, sh.k, 128, seed * 1000003u + 2 * s + 1);
            qmat qa, qb, ta, tb;
            quantize(MOE_FORMAT_FP8_ROW128, xa, sh.m, sh.k, qa);
            quantize(MOE_FORMAT_FP8_BLOCK128, xb, sh.n, sh.k, qb);
            quantize(MOE_FORMAT_FP8_TENSOR, xa, sh.m, sh.k, ta);
            quantize(MOE_FORMAT_FP8_TENSOR, xb, sh.n, sh.k, tb);
            operand_set &op = ops[(size_t)s];
            op.a = upload(qa.codes);
            op.b = upload(qb.codes);
            op.sa = upload(qa.scales);
            op.sb = upload(qb.scales);
            op.lds_a = qa.scale_cols;
            op.lds_b = qb.scale_cols;
            op.ta = upload(ta.codes);
            op.tb = upload(tb.codes);
            op.tsa = upload(ta.scales);
            op.tsb = upload(tb.scales);
            op.sa_t = upload(transposed(qa.scales, sh.m, qa.scale_cols));
            op.sb_lt = upload(padded_rows(qb.scales, qb.scale_cols, (qb.scale_cols + 3) / 4 * 4));
            op.ref = op.ref_tensor = NULL;
            if (!sanitize) {
                ref_bad += make_reference(sh, qa, qb, &op.ref, seed + s);
                ref_bad += make_reference(sh, ta, tb, &op.ref_tensor, seed + 7 * s + 1);
            }
        }
        char dims[96];
        snprintf(dims, sizeof dims, "%s (%lldx%lldx%lld)", sh.name, (long long)sh.m, (long long)sh.n, (long long)sh.k);
        if (ref_bad) {
            printf("%-44s reference FAILED its fp64 cross-check at %d samples: shape skipped\n", dims, ref_bad);
            ++failed;
        }
        void *c;
        CUDA_OK(cudaMalloc(&c, c_bytes));
        // Every impl checked first, then all timed together in interleaved rounds, then reported.
        typedef lab_checked<impl, moe_status> checked;
        std::vector<checked> rows;
        std::vector<cudaGraphExec_t> execs;
        for (const impl &im : impls) {
            if (ref_bad) break;
            char why[256] = "";
            if (sanitize) { // (a refused launch counts as failed, a run neither way)
                if (!im.fn) continue;
                const moe_status st = launch(im, sh, ops[0], c, stream, why, sizeof why);
                if (st == MOE_STATUS_OK) CUDA_OK(cudaStreamSynchronize(stream));
                else ++failed;
                printf("%-44s %-9s ran once, not checked (--sanitize)%s%s\n", dims, im.name, st != MOE_STATUS_OK ? ": " : "",
                       why);
                fflush(stdout);
                continue;
            }
            double worst = 0.0;
            moe_status st = MOE_STATUS_OK;
            for (int s = 0; s < sets && st == MOE_STATUS_OK; ++s) {
                CUDA_OK(cudaMemset(c, 0xFF, c_bytes)); // NaN in bf16
                st = launch(im, sh, ops[(size_t)s], c, stream, why, sizeof why);
                if (st != MOE_STATUS_OK) break;
                CUDA_OK(cudaStreamSynchronize(stream));
                CUDA_OK(cudaGetLastError());
                // The per-tensor cuBLASLt peers and our per-tensor variants compute on the per-tensor
                // operands: checked against their reference; lt-block with the block-scaled ones.
                worst = std::max(worst, relative_error(sh, c, tensor_operands(im) ? ops[(size_t)s].ref_tensor : ops[(size_t)s].ref,
                                                       scratch));
            }
            if (!im.fn && st == MOE_STATUS_UNSUPPORTED) {
                printf("%-44s %-9s skipped: %s\n", dims, im.name, why);
                continue;
            }
            checked r = {&im, worst, st, st == MOE_STATUS_OK && worst <= TOLERANCE, ""};
            snprintf(r.why, sizeof r.why, "%s", why);
            rows.push_back(r);
            execs.push_back(r.correct && !check_only ? capture_impl(im, sh, ops, c, stream) : NULL);
        }
        std::vector<std::vector<double>> round_ms(rows.size()); // each impl's median per round
        const std::vector<double> times =
            check_only ? std::vector<double>(rows.size(), -1.0) : lab_graph_medians(execs, stream, WARMUP, TIMED, REPS, ROUNDS, &round_ms);
        double lt_ms = -1.0, blk_ms = -1.0;
        for (size_t i = 0; i < rows.size(); ++i) {
            if (!rows[i].im->fn && !rows[i].im->fast_accum && !rows[i].im->lt_block) lt_ms = times[i];
            if (rows[i].im->lt_block) blk_ms = times[i];
        }
        for (size_t i = 0; i < rows.size(); ++i) {
            const impl &im = *rows[i].im;
            const double ms = times[i], worst = rows[i].worst;
            const moe_status st = rows[i].st;
            const char *why = rows[i].why;
            const bool ok = rows[i].correct && (ms > 0 || check_only);
            const double tflops = ms > 0 ? 2.0 * sh.m * sh.n * sh.k / (ms * 1e-3) / 1e12 : 0.0;
            const double ratio = (ms > 0 && lt_ms > 0) ? lt_ms / ms : 0.0;
            if (!ok) ++failed;
            else ++passed;
            printf("%-44s %-9s %9.4f %9.1f %8.3fx %8.1e  %s%s%s\n", dims, im.name, ms, tflops, ratio, worst,
                   ok ? "pass" : "FAIL", st != MOE_STATUS_OK ? ": " : "", why);
            fflush(stdout);
            if (json) {
                fprintf(json,
                        "{\"shape\": \"%s\", \"M\": %lld, \"N\": %lld, \"K\": %lld, \"out\": \"bf16\", "
                        "\"dtype\": \"fp8-e4m3\", \"impl\": \"%s\", \"what\": \"%s\", \"ms\": %.6f, \"tflops\": %.2f, "
                        "\"vs_cublaslt\": %.4f, \"vs_lt_block\": %.4f, \"err\": %.3e, \"pass\": %s, \"operands\": \"%s\", \"input_sets\": %d, "
                        "\"timing\": \"interleaved, %d rounds\", \"round_ms\": %s, \"commit\": \"%s\", \"seed\": %llu, \"gpu\": \"%s\"}\n",
                        sh.name, (long long)sh.m, (long long)sh.n, (long long)sh.k, im.name, im.what, ms, tflops, ratio,
                        ms > 0 && blk_ms > 0 ? blk_ms / ms : 0.0, isfinite(worst) ? worst : -1.0, ok ? "true" : "false",
                        tensor_operands(im) ? "per-tensor" : "block", sets, ROUNDS, lab_json_list(round_ms[i]).c_str(), commit, (unsigned long long)seed,
                        prop.name);
                fflush(json);
            }
        }
        CUDA_OK(cudaFree(c));
        for (operand_set &op : ops) {
            void *ptrs[] = {op.a, op.b, op.sa, op.sb, op.ta, op.tb, op.tsa, op.tsb, op.sa_t, op.sb_lt, op.ref, op.ref_tensor};
            for (void *p : ptrs) CUDA_OK(cudaFree(p));
        }
    }
    if (json) fclose(json);
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
