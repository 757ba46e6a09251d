// Kernel lab driver: every variant (lab.h) and the library entry on a list of shapes, each
// checked, then timed against cuBLAS in the same process.
//
// Per shape: fresh random bf16 inputs (seed printed; LAB_SEED=n to repeat), a simple fp32 CUDA
// reference GEMM, itself cross-checked against fp64 dot products on the CPU at sampled
// elements (a rigorous fp32 summation bound), then for each implementation: output poisoned
// with NaN, one run, relative Frobenius error against the reference <= 1e-2 and no
// non-finite value (so an unwritten element fails), then timing: a CUDA graph of REPS
// launches (rotating among 3 input sets when they fit in L2), median of 20 replays / REPS, every
// impl of a shape checked first and then all timed in 5 interleaved rounds
// (lab_graph_medians). cuBLAS (cublasGemmEx, bf16 in, fp32 compute) is checked the same
// way, which also checks the reference and the checker.
//
//   gemm_lab [--variants v1,v1b,v2,v3,engine] [--filter SUBSTR] [--json rows.jsonl] [--quick]
//
// Prints a table; appends one JSON object per row to --json. Exit status 1 if any check
// failed. Last line: "N passed, M failed".
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <algorithm>
#include <vector>

#include "lab.h"
#include "lab_util.h"

#define CUBLAS_OK(call)                                                                    \
    do {                                                                                   \
        cublasStatus_t st_ = (call);                                                       \
        if (st_ != CUBLAS_STATUS_SUCCESS) {                                                \
            fprintf(stderr, "%s:%d: %s failed: status %d\n", __FILE__, __LINE__, #call, (int)st_); \
            exit(2);                                                                       \
        }                                                                                  \
    } while (0)

static const double TOLERANCE = 1e-2; // relative Frobenius error against the fp32 reference
static const int TIMED = 20;          // replays timed, median taken
static const int WARMUP = 1;          // untimed replays before each impl's turn in a round
static const int ROUNDS = 5;          // interleaved timing rounds (lab_graph_medians)
static const int REPS = 10;           // launches per replayed graph
static const int SETS = 3;            // input sets rotated when a set fits in L2

struct shape {
    const char *name;
    int64_t m, n, k;
    moe_dtype out;
    bool big; // skipped by --quick
};

// Squares for the dense floors, the per-expert GEMMs of the PERF.md shapes at T = 16384 with
// uniform routing (rows = T*k/E), one dense-equivalent, and ragged shapes for the tails.
static const shape SHAPES[] = {
    {"square-4096", 4096, 4096, 4096, MOE_DTYPE_BF16, false},
    {"square-4096-f32out", 4096, 4096, 4096, MOE_DTYPE_F32, false},
    {"square-8192", 8192, 8192, 8192, MOE_DTYPE_BF16, true},
    {"qwen3-30b-a3b-gemm1-expert", 1024, 1536, 2048, MOE_DTYPE_BF16, false},
    {"qwen3-30b-a3b-gemm2-expert", 1024, 2048, 768, MOE_DTYPE_BF16, false},
    {"qwen3-30b-a3b-gemm1-dense-equiv", 131072, 1536, 2048, MOE_DTYPE_BF16, true},
    {"deepseek-v3-gemm1-expert", 512, 4096, 7168, MOE_DTYPE_BF16, false},
    {"deepseek-v3-gemm2-expert", 512, 7168, 2048, MOE_DTYPE_BF16, false},
    {"gpt-oss-120b-gemm1-expert", 512, 5760, 2880, MOE_DTYPE_BF16, false},
    {"mixtral-8x7b-gemm1-expert", 4096, 28672, 4096, MOE_DTYPE_BF16, true},
    {"tails-1000", 1000, 1000, 1000, MOE_DTYPE_BF16, false},
    {"tails-odd-n-f32out", 777, 1001, 264, MOE_DTYPE_F32, false},
};

// ---- device helpers ----------------------------------------------------------------------
// Uniform in [-1, 1), rounded to bf16.
__global__ void fill_random(__nv_bfloat16 *p, int64_t count, uint64_t seed) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < count; i += (int64_t)gridDim.x * blockDim.x) {
        uint64_t r = lab_splitmix64(seed ^ lab_splitmix64((uint64_t)i));
        float u = (float)(r >> 40) * (1.0f / 16777216.0f); // [0, 1)
        p[i] = __float2bfloat16_rn(2.0f * u - 1.0f);
    }
}

// The reference: C[i, j] = sum_k A[i, k] * B[j, k] in fp32, one output per thread, 16 x 16
// blocks staging 16 x 16 pieces of A and B in shared memory.
__global__ void reference_gemm(const __nv_bfloat16 *a, const __nv_bfloat16 *b, float *c, int64_t m, int64_t n,
                               int64_t k) {
    __shared__ float as[16][17], bs[16][17];
    const int64_t row = blockIdx.y * 16 + threadIdx.y;
    const int64_t col = blockIdx.x * 16 + threadIdx.x;
    const int64_t b_row = blockIdx.x * 16 + threadIdx.y; // the B row (output column) this thread stages
    float sum = 0.0f;
    for (int64_t k0 = 0; k0 < k; k0 += 16) {
        const int64_t kk = k0 + threadIdx.x;
        as[threadIdx.y][threadIdx.x] = (row < m && kk < k) ? __bfloat162float(a[row * k + kk]) : 0.0f;
        bs[threadIdx.y][threadIdx.x] = (b_row < n && kk < k) ? __bfloat162float(b[b_row * k + kk]) : 0.0f;
        __syncthreads();
        for (int t = 0; t < 16; ++t) sum += as[threadIdx.y][t] * bs[threadIdx.x][t];
        __syncthreads();
    }
    if (row < m && col < n) c[row * n + col] = sum;
}

// Accumulates sum (c - ref)^2, sum ref^2 and the count of non-finite c into out[0..2].
__global__ void compare(const void *c, int c_f32, const float *ref, int64_t count, double *out) {
    double diff = 0.0, norm = 0.0, bad = 0.0;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < count; i += (int64_t)gridDim.x * blockDim.x) {
        float v = c_f32 ? ((const float *)c)[i] : __bfloat162float(((const __nv_bfloat16 *)c)[i]);
        if (!isfinite(v)) {
            bad += 1.0;
            continue;
        }
        double d = (double)v - (double)ref[i];
        diff += d * d;
        norm += (double)ref[i] * ref[i];
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

// ---- host helpers ------------------------------------------------------------------------
static float bf16_to_float(uint16_t bits) {
    uint32_t u = (uint32_t)bits << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

struct operands {
    __nv_bfloat16 *a[SETS], *b[SETS];
    float *ref[SETS];
    int sets;
};

// Checks the fp32 reference of set `s` against fp64 dot products at sampled elements, with
// the worst-case bound of fp32 summation: |err| <= K * 2^-23 * sum |a_k b_k| (the products of
// bf16 values are exact in fp32). Returns the number of violations.
static int check_reference(const shape &sh, const operands &op, int s, uint64_t seed) {
    const int samples = 24;
    std::vector<uint16_t> arow(sh.k), brow(sh.k);
    int bad = 0;
    uint64_t x = seed;
    for (int i = 0; i < samples; ++i) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        int64_t r = i == 0 ? 0 : i == 1 ? sh.m - 1 : (int64_t)((x >> 33) % (uint64_t)sh.m);
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        int64_t c = i == 0 ? 0 : i == 1 ? sh.n - 1 : (int64_t)((x >> 33) % (uint64_t)sh.n);
        CUDA_OK(cudaMemcpy(arow.data(), op.a[s] + r * sh.k, sh.k * 2, cudaMemcpyDeviceToHost));
        CUDA_OK(cudaMemcpy(brow.data(), op.b[s] + c * sh.k, sh.k * 2, cudaMemcpyDeviceToHost));
        float got;
        CUDA_OK(cudaMemcpy(&got, op.ref[s] + r * sh.n + c, 4, cudaMemcpyDeviceToHost));
        double exact = 0.0, mag = 0.0;
        for (int64_t t = 0; t < sh.k; ++t) {
            double p = (double)bf16_to_float(arow[t]) * (double)bf16_to_float(brow[t]);
            exact += p;
            mag += fabs(p);
        }
        double bound = (double)sh.k * ldexp(1.0, -23) * mag + 1e-30;
        if (!(fabs((double)got - exact) <= bound)) {
            if (bad < 3)
                printf("  reference wrong at (%lld, %lld): %.9g vs fp64 %.9g (bound %.3g)\n", (long long)r,
                       (long long)c, got, exact, bound);
            ++bad;
        }
    }
    return bad;
}

static double relative_error(const shape &sh, const void *c, const float *ref, double *scratch) {
    double host[3];
    CUDA_OK(cudaMemset(scratch, 0, 3 * sizeof(double)));
    compare<<<1024, 256>>>(c, sh.out == MOE_DTYPE_F32, ref, sh.m * sh.n, scratch);
    CUDA_OK(cudaGetLastError());
    CUDA_OK(cudaMemcpy(host, scratch, sizeof host, cudaMemcpyDeviceToHost));
    if (host[2] > 0) return INFINITY;  // non-finite output: unwritten (poison) or overflow
    if (host[1] == 0.0) return host[0] == 0.0 ? 0.0 : INFINITY;
    return sqrt(host[0] / host[1]);
}

// One implementation under test: launches C = A . B^T for input set s on `stream`.
struct impl {
    const char *name;
    const char *what;
    lab_gemm_fn fn;   // NULL: cuBLAS
};

static cublasHandle_t g_cublas;

static moe_status engine_entry(const moe__hopper_gemm_args *a, cudaStream_t s, char *why, size_t n) {
    return moe__hopper_gemm_dense(a, s, why, n);
}

static moe_status launch(const impl &im, const shape &sh, const operands &op, int s, void *c, cudaStream_t stream,
                         char *why, size_t why_len) {
    if (im.fn) {
        moe__hopper_gemm_args args;
        memset(&args, 0, sizeof args);
        args.a = op.a[s];
        args.lda = sh.k;
        args.b = op.b[s];
        args.ldb = sh.k;
        args.c = c;
        args.ldc = sh.n;
        args.c_dtype = sh.out;
        args.m = sh.m;
        args.n = sh.n;
        args.k = sh.k;
        return im.fn(&args, stream, why, why_len);
    }
    // Column-major view: C^T[N, M] = B[N, K] . A[M, K]^T, i.e. op(B) = T (K x N stored), op(A) = N.
    const float alpha = 1.0f, beta = 0.0f;
    CUBLAS_OK(cublasSetStream(g_cublas, stream));
    cublasStatus_t st = cublasGemmEx(g_cublas, CUBLAS_OP_T, CUBLAS_OP_N, (int)sh.n, (int)sh.m, (int)sh.k, &alpha,
                                     op.b[s], CUDA_R_16BF, (int)sh.k, op.a[s], CUDA_R_16BF, (int)sh.k, &beta, c,
                                     sh.out == MOE_DTYPE_F32 ? CUDA_R_32F : CUDA_R_16BF, (int)sh.n,
                                     CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (st != CUBLAS_STATUS_SUCCESS) {
        snprintf(why, why_len, "cublasGemmEx: status %d", (int)st);
        return MOE_STATUS_DEVICE_ERROR;
    }
    return MOE_STATUS_OK;
}

// The impl's graph of REPS launches (rotating the input sets), instantiated; NULL if the capture
// failed (said on stdout).
static cudaGraphExec_t capture_impl(const impl &im, const shape &sh, const operands &op, void *c, cudaStream_t stream) {
    char why[256] = "";
    cudaGraph_t graph;
    CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    moe_status st = MOE_STATUS_OK;
    for (int r = 0; r < REPS && st == MOE_STATUS_OK; ++r) st = launch(im, sh, op, r % op.sets, c, stream, why, sizeof why);
    cudaError_t cap = cudaStreamEndCapture(stream, &graph);
    if (st != MOE_STATUS_OK || cap != cudaSuccess) {
        printf("  %s: capture failed: %s %s\n", im.name, why, cudaGetErrorString(cap));
        cudaGetLastError();
        return NULL;
    }
    return lab_instantiate(graph);
}

int main(int argc, char **argv) {
    const char *variants = "v1,v1b,v2,engine";
    const char *filter = NULL;
    const char *json_path = NULL;
    bool quick = false;
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--variants") && i + 1 < argc) variants = argv[++i];
        else if (!strcmp(argv[i], "--filter") && i + 1 < argc) filter = argv[++i];
        else if (!strcmp(argv[i], "--json") && i + 1 < argc) json_path = argv[++i];
        else if (!strcmp(argv[i], "--quick")) quick = true;
        else {
            fprintf(stderr, "usage: %s [--variants v1,v1b,v2,v3,engine] [--filter SUBSTR] [--json FILE] [--quick]\n", argv[0]);
            return 2;
        }
    }
    const impl all[] = {
        {"v1", "128x256 tile, 4 stages, TMA producer + 2 wgmma consumer warpgroups, persistent", lab_gemm_v1},
        {"v1b", "v1 with a 128x128 tile, 6 stages", lab_gemm_v1b},
        {"v3", "v1 with a 128x192 tile, 5 stages", lab_gemm_v3},
        {"v2", "v1 in clusters of 2 along M, B tile multicast", lab_gemm_v2},
        {"engine", "library entry moe__hopper_gemm_dense (heuristic tile width)", engine_entry},
    };
    std::vector<impl> impls;
    impls.push_back({"cublas", "cublasGemmEx bf16 in, fp32 compute, default algo", NULL});
    for (const impl &im : lab_pick_variants(all, sizeof all / sizeof all[0], variants)) impls.push_back(im);

    uint64_t seed = getenv("LAB_SEED") ? strtoull(getenv("LAB_SEED"), NULL, 10) : (uint64_t)time(NULL);
    cudaDeviceProp prop;
    CUDA_OK(cudaGetDeviceProperties(&prop, 0));
    printf("device: %s, %d SMs, L2 %d MB; seed %llu (LAB_SEED to repeat)\n", prop.name, prop.multiProcessorCount,
           prop.l2CacheSize >> 20, (unsigned long long)seed);
    fflush(stdout);
    CUBLAS_OK(cublasCreate(&g_cublas));
    void *cublas_ws;
    const size_t ws_bytes = 64u << 20;
    CUDA_OK(cudaMalloc(&cublas_ws, ws_bytes));
    CUBLAS_OK(cublasSetWorkspace(g_cublas, cublas_ws, ws_bytes));
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
    printf("%-34s %-6s %-7s %9s %9s %9s %8s  %s\n", "shape (M x N x K)", "impl", "out", "ms", "TFLOP/s", "vs cuBLAS",
           "err", "check");
    for (const shape &sh : SHAPES) {
        if (filter && !strstr(sh.name, filter)) continue;
        if (quick && sh.big) continue;
        const size_t a_bytes = (size_t)sh.m * sh.k * 2, b_bytes = (size_t)sh.n * sh.k * 2;
        const size_t c_bytes = (size_t)sh.m * sh.n * (sh.out == MOE_DTYPE_F32 ? 4 : 2);
        operands op;
        // Rotate input sets when one set would sit in L2 between launches (PERF.md protocol).
        op.sets = a_bytes + b_bytes + c_bytes <= (size_t)prop.l2CacheSize ? SETS : 1;
        int ref_bad = 0;
        for (int s = 0; s < op.sets; ++s) {
            CUDA_OK(cudaMalloc(&op.a[s], a_bytes));
            CUDA_OK(cudaMalloc(&op.b[s], b_bytes));
            CUDA_OK(cudaMalloc(&op.ref[s], (size_t)sh.m * sh.n * 4));
            fill_random<<<1024, 256>>>(op.a[s], sh.m * sh.k, seed * 1000003u + 2 * s);
            fill_random<<<1024, 256>>>(op.b[s], sh.n * sh.k, seed * 1000003u + 2 * s + 1);
            dim3 grid((unsigned)((sh.n + 15) / 16), (unsigned)((sh.m + 15) / 16));
            reference_gemm<<<grid, dim3(16, 16)>>>(op.a[s], op.b[s], op.ref[s], sh.m, sh.n, sh.k);
            CUDA_OK(cudaGetLastError());
            CUDA_OK(cudaDeviceSynchronize());
            ref_bad += check_reference(sh, op, s, seed + s);
        }
        if (ref_bad) {
            printf("%-34s reference FAILED its fp64 cross-check at %d samples: shape skipped\n", sh.name, ref_bad);
            ++failed;
        }
        void *c;
        CUDA_OK(cudaMalloc(&c, c_bytes));
        char dims[96];
        snprintf(dims, sizeof dims, "%s (%lldx%lldx%lld)", sh.name, (long long)sh.m, (long long)sh.n, (long long)sh.k);
        // Every impl checked first, then all timed together in interleaved rounds, then reported.
        typedef lab_checked<impl, moe_status> checked;
        std::vector<checked> rows;
        std::vector<cudaGraphExec_t> execs;
        for (const impl &im : impls) {
            if (ref_bad) break;
            char why[256] = "";
            double worst = 0.0;
            moe_status st = MOE_STATUS_OK;
            for (int s = 0; s < op.sets && st == MOE_STATUS_OK; ++s) {
                CUDA_OK(cudaMemset(c, 0xFF, c_bytes)); // NaN in bf16 and in fp32
                st = launch(im, sh, op, s, c, stream, why, sizeof why);
                if (st != MOE_STATUS_OK) break;
                CUDA_OK(cudaStreamSynchronize(stream));
                CUDA_OK(cudaGetLastError());
                worst = std::max(worst, relative_error(sh, c, op.ref[s], scratch));
            }
            checked r = {&im, worst, st, st == MOE_STATUS_OK && worst <= TOLERANCE, ""};
            snprintf(r.why, sizeof r.why, "%s", why);
            rows.push_back(r);
            execs.push_back(r.correct ? capture_impl(im, sh, op, c, stream) : NULL);
        }
        std::vector<std::vector<double>> round_ms; // each impl's median per round
        const std::vector<double> times = lab_graph_medians(execs, stream, WARMUP, TIMED, REPS, ROUNDS, &round_ms);
        double cublas_ms = -1.0;
        for (size_t i = 0; i < rows.size(); ++i)
            if (!rows[i].im->fn) cublas_ms = times[i];
        for (size_t i = 0; i < rows.size(); ++i) {
            const impl &im = *rows[i].im;
            const double ms = times[i], worst = rows[i].worst;
            const moe_status st = rows[i].st;
            const char *why = rows[i].why;
            const bool ok = rows[i].correct && ms > 0; // a launch that cannot be captured and timed fails too
            const double tflops = ms > 0 ? 2.0 * sh.m * sh.n * sh.k / (ms * 1e-3) / 1e12 : 0.0;
            const double ratio = (ms > 0 && cublas_ms > 0) ? cublas_ms / ms : 0.0;
            ok ? ++passed : ++failed;
            printf("%-34s %-6s %-7s %9.4f %9.1f %8.3fx %8.1e  %s%s%s\n", dims, im.name,
                   sh.out == MOE_DTYPE_F32 ? "f32" : "bf16", ms, tflops, ratio, worst, ok ? "pass" : "FAIL",
                   st != MOE_STATUS_OK ? ": " : "", why);
            fflush(stdout);
            if (json) {
                fprintf(json,
                        "{\"shape\": \"%s\", \"M\": %lld, \"N\": %lld, \"K\": %lld, \"out\": \"%s\", "
                        "\"impl\": \"%s\", \"what\": \"%s\", \"ms\": %.6f, \"tflops\": %.2f, "
                        "\"vs_cublas\": %.4f, \"err\": %.3e, \"pass\": %s, \"input_sets\": %d, \"timing\": \"interleaved, %d rounds\", \"round_ms\": %s, "
                        "\"commit\": \"%s\", \"seed\": %llu, \"gpu\": \"%s\"}\n",
                        sh.name, (long long)sh.m, (long long)sh.n, (long long)sh.k,
                        sh.out == MOE_DTYPE_F32 ? "f32" : "bf16", im.name, im.what, ms, tflops, ratio,
                        isfinite(worst) ? worst : -1.0, ok ? "true" : "false", op.sets, ROUNDS, lab_json_list(round_ms[i]).c_str(), commit,
                        (unsigned long long)seed, prop.name);
                fflush(json);
            }
        }
        CUDA_OK(cudaFree(c));
        for (int s = 0; s < op.sets; ++s) {
            CUDA_OK(cudaFree(op.a[s]));
            CUDA_OK(cudaFree(op.b[s]));
            CUDA_OK(cudaFree(op.ref[s]));
        }
    }
    if (json) fclose(json);
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
