/* The Hopper engine's K-grouped GEMM (moe__hopper_wgrad, src/cuda/hopper/gemm_wgrad.h) against
 * the CPU oracle moe__cpu_wgrad, on fresh random bf16 operands and block-aligned plans:
 *   - experts with no rows, one row, 63/64/65/130 rows, and random counts; N and K with tails
 *     (not multiples of the 128 x 256 tile), padded leading dimensions;
 *   - the plan's padding rows (and every row outside the experts' ranges) hold NaN: a sum that
 *     read one would be NaN;
 *   - beta 0 over dW poisoned with NaN (every element must be written), beta 1 and 0.5 over
 *     random dW; fp32 and bf16 dW; dW's lddw padding columns hold a sentinel that must survive;
 *   - the three store paths of interior tiles: checked pairs (odd lddw), aligned pairs (the
 *     default store), bulk copies through shared memory (store MOE__WGRAD_STORE_BULK with fp32,
 *     beta 0, lddw a multiple of 4);
 *   - a second launch gives the same bits (deterministic), and so does a CUDA graph replay;
 *   - bad arguments: the status and a message naming the argument (checked first, on the host,
 *     so that they run in CI too).
 * Tolerance per element: 1e-5 of sum |g| |a| over the expert's rows (fp32 accumulation of up to
 * ~10^4 products), plus half a bf16 ulp of the value for bf16 dW.
 *   test_gpu_wgrad [--perf]
 * --perf: also PERF.md-shaped weight gradients (qwen3-30b-a3b, deepseek-v3 with 16 of its
 * experts; rows per expert uniform in [0, 2 T k / E] at T = 16384), sampled checks, the bulk
 * store's bits against the default's, and both stores timed interleaved: ROUNDS rounds, each
 * timing both (the order alternating) over REPS launches; the median of all launches per store
 * and each round's. Exit 77 without a sm_90 device (after the host checks). */
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hopper/gemm_wgrad.h"
#include "internal.h"
#include "moefuse.h"

static int failures = 0;
#define CUDA_OK(x)                                                                                   \
    do {                                                                                             \
        cudaError_t e_ = (x);                                                                        \
        if (e_ != cudaSuccess) {                                                                     \
            printf("CUDA error %s at line %d: %s\n", cudaGetErrorString(e_), __LINE__, #x);          \
            exit(1);                                                                                 \
        }                                                                                            \
    } while (0)

static uint64_t rng = 88172645463325252ull;
static double uniform(void) { /* xorshift64: [0, 1) */
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}

/* ---- argument checks (host only) ------------------------------------------------------------ */
static void expect_refusal(const char *what, const moe__hopper_wgrad_args *a, moe_status want, const char *word) {
    char why[256] = "";
    const moe_status st = moe__hopper_wgrad(a, NULL, why, sizeof why);
    if (st != want || !strstr(why, word)) {
        printf("FAIL refusal %s: status %d (expected %d), message \"%s\" (expected to name %s)\n", what, (int)st,
               (int)want, why, word);
        ++failures;
    }
}

static void check_refusals(void) {
    static int64_t dummy[4] __attribute__((aligned(16)));
    moe__hopper_wgrad_args ok = {dummy, 8, dummy, 8, 1, dummy, dummy, 1, 8, 8, dummy, 8, MOE_DTYPE_F32, 0.0f, 0};
    moe__hopper_wgrad_args a;
    expect_refusal("NULL args", NULL, MOE_STATUS_NULL_POINTER, "args");
    a = ok, a.g = NULL;
    expect_refusal("g NULL", &a, MOE_STATUS_NULL_POINTER, "g/a/dw");
    a = ok, a.counts = NULL;
    expect_refusal("counts NULL", &a, MOE_STATUS_NULL_POINTER, "counts");
    a = ok, a.n = 0;
    expect_refusal("n 0", &a, MOE_STATUS_INVALID_ARGUMENT, "n, k, rows");
    a = ok, a.experts = 0;
    expect_refusal("experts 0", &a, MOE_STATUS_INVALID_ARGUMENT, "experts");
    a = ok, a.ldg = 12;
    expect_refusal("ldg 12", &a, MOE_STATUS_INVALID_ARGUMENT, "ldg");
    a = ok, a.lda = 4;
    expect_refusal("lda < k", &a, MOE_STATUS_INVALID_ARGUMENT, "lda");
    a = ok, a.lddw = 7;
    expect_refusal("lddw < k", &a, MOE_STATUS_INVALID_ARGUMENT, "lddw");
    a = ok, a.g = (const char *)dummy + 2;
    expect_refusal("g misaligned", &a, MOE_STATUS_INVALID_ARGUMENT, "16-byte");
    a = ok, a.dw_dtype = MOE_DTYPE_F16;
    expect_refusal("dw f16", &a, MOE_STATUS_DTYPE_MISMATCH, "dw_dtype");
    a = ok, a.beta = NAN;
    expect_refusal("beta NaN", &a, MOE_STATUS_INVALID_ARGUMENT, "beta");
    a = ok, a.store = 2;
    expect_refusal("store 2", &a, MOE_STATUS_INVALID_ARGUMENT, "store");
}

/* ---- one case ------------------------------------------------------------------------------- */
typedef struct {
    const char *name;
    int64_t experts, n, k;
    const int64_t *counts; /* NULL: random in [0, max_count] */
    int64_t max_count;
    int64_t ldg_pad, lda_pad, lddw_pad; /* elements beyond n, k, k */
    moe_dtype dtype;
    float beta;
    int samples; /* 0: every element checked; else this many random elements */
    int graph;   /* also captured in a CUDA graph and replayed */
    int store;   /* MOE__WGRAD_STORE_* */
} wcase;

static const float SENTINEL = 12345.0f;

static uint16_t *bf16_host(const float *v, int64_t count) {
    uint16_t *b = malloc((size_t)count * 2);
    for (int64_t i = 0; i < count; i++) b[i] = moe_float_to_bf16(v[i]);
    return b;
}

static void *upload(const void *host, size_t bytes) {
    void *d = NULL;
    CUDA_OK(cudaMalloc(&d, bytes));
    CUDA_OK(cudaMemcpy(d, host, bytes, cudaMemcpyHostToDevice));
    return d;
}

/* Element (e, i, c) of dW from the oracle, and the bound of its error, on the float operands. */
static void oracle_at(const wcase *w, const int64_t *off, const int64_t *cnt, const float *g, int64_t ldg,
                      const float *a, int64_t lda, const float *ag, const float *aa, int64_t e, int64_t i, int64_t c,
                      float old, float *ref, double *tol) {
    float r = old, s = 0.0f;
    moe__cpu_wgrad(1, 1, 1, off + e, cnt + e, g + i, ldg, a + c, lda, w->beta, &r, 1);
    moe__cpu_wgrad(1, 1, 1, off + e, cnt + e, ag + i, ldg, aa + c, lda, 0.0f, &s, 1);
    *ref = r;
    /* (beta 0: old is the NaN poison, never part of the value) */
    *tol = 1e-5 * (double)s + (w->beta != 0.0f ? fabs((double)w->beta * old) * 1e-6 : 0.0) +
           (w->dtype == MOE_DTYPE_BF16 ? fabs((double)r) / 256.0 : 0.0) + 1e-30;
}

static float dw_value(const void *dw, moe_dtype t, int64_t at) {
    return t == MOE_DTYPE_F32 ? ((const float *)dw)[at] : moe_bf16_to_float(((const uint16_t *)dw)[at]);
}

enum { ROUNDS = 5, REPS = 8 };
static void time_arms(const moe__hopper_wgrad_args *const arms[2], cudaStream_t s, double med[2],
                      double round_med[ROUNDS][2]);

static void run_case(const wcase *w, int perf) {
    const int64_t E = w->experts, N = w->n, K = w->k;
    const int64_t ldg = N + w->ldg_pad, lda = K + w->lda_pad, lddw = K + w->lddw_pad;
    int64_t *cnt = malloc((size_t)E * 8), *off = malloc((size_t)(E + 1) * 8);
    off[0] = 0;
    for (int64_t e = 0; e < E; e++) {
        cnt[e] = w->counts ? w->counts[e] : (int64_t)(uniform() * (double)(w->max_count + 1));
        off[e + 1] = off[e] + (cnt[e] + 127) / 128 * 128;
    }
    const int64_t rows = off[E] > 0 ? off[E] : 128;
    /* Operands: bf16-exact values in [-1, 1); NaN on every row outside the experts' ranges. */
    float *g = malloc((size_t)(rows * ldg) * 4), *a = malloc((size_t)(rows * lda) * 4);
    float *ag = malloc((size_t)(rows * ldg) * 4), *aa = malloc((size_t)(rows * lda) * 4);
    for (int64_t r = 0; r < rows; r++) {
        int live = 0;
        for (int64_t e = 0; e < E && !live; e++) live = r >= off[e] && r < off[e] + cnt[e];
        for (int64_t i = 0; i < ldg; i++)
            g[r * ldg + i] = live ? moe_bf16_to_float(moe_float_to_bf16((float)(2.0 * uniform() - 1.0))) : NAN;
        for (int64_t i = 0; i < lda; i++)
            a[r * lda + i] = live ? moe_bf16_to_float(moe_float_to_bf16((float)(2.0 * uniform() - 1.0))) : NAN;
    }
    for (int64_t i = 0; i < rows * ldg; i++) ag[i] = fabsf(g[i]);
    for (int64_t i = 0; i < rows * lda; i++) aa[i] = fabsf(a[i]);
    /* dW: NaN where beta = 0 (must be overwritten), else random; its padding columns a sentinel. */
    const int64_t dw_count = E * N * lddw;
    const size_t esz = w->dtype == MOE_DTYPE_F32 ? 4 : 2;
    float *dw0 = malloc((size_t)dw_count * 4);
    for (int64_t i = 0; i < dw_count; i++) {
        const int pad = i % lddw >= K;
        dw0[i] = pad ? SENTINEL : w->beta == 0.0f ? NAN : moe_bf16_to_float(moe_float_to_bf16((float)(uniform() - 0.5)));
    }
    void *dw0_dev_host = w->dtype == MOE_DTYPE_F32 ? (void *)dw0 : (void *)bf16_host(dw0, dw_count);
    uint16_t *gb = bf16_host(g, rows * ldg), *ab = bf16_host(a, rows * lda);
    void *d_g = upload(gb, (size_t)(rows * ldg) * 2), *d_a = upload(ab, (size_t)(rows * lda) * 2);
    void *d_off = upload(off, (size_t)(E + 1) * 8), *d_cnt = upload(cnt, (size_t)E * 8);
    void *d_dw = upload(dw0_dev_host, (size_t)dw_count * esz);
    moe__hopper_wgrad_args args = {d_g, ldg, d_a, lda, rows, d_off, d_cnt, E, N, K, d_dw, lddw, w->dtype, w->beta,
                                   w->store};
    cudaStream_t s;
    CUDA_OK(cudaStreamCreate(&s));
    char why[256] = "";
    moe_status st = moe__hopper_wgrad(&args, s, why, sizeof why);
    CUDA_OK(cudaStreamSynchronize(s));
    void *out = malloc((size_t)dw_count * esz), *again = malloc((size_t)dw_count * esz);
    CUDA_OK(cudaMemcpy(out, d_dw, (size_t)dw_count * esz, cudaMemcpyDeviceToHost));
    int bad = 0, checked = 0;
    double worst = 0.0;
    if (st != MOE_STATUS_OK) {
        printf("FAIL %s: status %d: %s\n", w->name, (int)st, why);
        ++failures;
        goto done;
    }
    /* Repeat (from the same starting dW), eagerly or by a graph: the same bits. */
    CUDA_OK(cudaMemcpy(d_dw, dw0_dev_host, (size_t)dw_count * esz, cudaMemcpyHostToDevice));
    if (w->graph) {
        cudaGraph_t graph;
        cudaGraphExec_t exec;
        CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
        st = moe__hopper_wgrad(&args, s, why, sizeof why);
        CUDA_OK(cudaStreamEndCapture(s, &graph));
        CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
        CUDA_OK(cudaGraphLaunch(exec, s));
        CUDA_OK(cudaGraphExecDestroy(exec));
        CUDA_OK(cudaGraphDestroy(graph));
    } else {
        st = moe__hopper_wgrad(&args, s, why, sizeof why);
    }
    CUDA_OK(cudaStreamSynchronize(s));
    CUDA_OK(cudaMemcpy(again, d_dw, (size_t)dw_count * esz, cudaMemcpyDeviceToHost));
    if (st != MOE_STATUS_OK || memcmp(out, again, (size_t)dw_count * esz) != 0) {
        printf("FAIL %s: the %s gave other bits than the first launch\n", w->name, w->graph ? "graph replay" : "second launch");
        ++bad;
    }
    /* Against the oracle: every element, or a sample; the padding columns untouched. */
    const int64_t total = w->samples ? w->samples : E * N * K;
    for (int64_t t = 0; t < total; t++) {
        int64_t e, i, c;
        if (w->samples) {
            e = (int64_t)(uniform() * E), i = (int64_t)(uniform() * N), c = (int64_t)(uniform() * K);
        } else {
            e = t / (N * K), i = t / K % N, c = t % K;
        }
        const int64_t at = e * N * lddw + i * lddw + c;
        float ref;
        double tol;
        oracle_at(w, off, cnt, g, ldg, a, lda, ag, aa, e, i, c, dw0[at], &ref, &tol);
        const float got = dw_value(out, w->dtype, at);
        const double err = fabs((double)got - (double)ref);
        ++checked;
        if (!(err <= tol)) {
            if (bad < 5)
                printf("    %s: dW[%lld][%lld][%lld] = %.6g, expected %.6g (tolerance %.3g; expert rows %lld)\n",
                       w->name, (long long)e, (long long)i, (long long)c, (double)got, (double)ref, tol, (long long)cnt[e]);
            ++bad;
        } else if (err / (tol > 0 ? tol : 1) > worst) {
            worst = err / tol;
        }
    }
    for (int64_t r = 0; r < E * N && w->lddw_pad; r++)
        for (int64_t c = K; c < lddw; c++)
            if (dw_value(out, w->dtype, r * lddw + c) != SENTINEL) {
                if (bad < 5) printf("    %s: padding column %lld of dW row %lld overwritten\n", w->name, (long long)c, (long long)r);
                ++bad;
            }
    printf("%s %-34s E=%lld N=%lld K=%lld rows=%lld %s beta=%g: %d checked, worst err/tol %.3f%s\n", bad ? "FAIL" : "ok  ",
           w->name, (long long)E, (long long)N, (long long)K, (long long)rows, moe_dtype_name(w->dtype), (double)w->beta,
           checked, worst, w->graph ? ", graph replay identical" : ", repeat identical");
    if (bad) ++failures;
    if (perf && !bad) {
        /* The bulk store from the same starting dW: the same bits (one sum order, another exit). */
        moe__hopper_wgrad_args bulk = args;
        bulk.store = MOE__WGRAD_STORE_BULK;
        CUDA_OK(cudaMemcpy(d_dw, dw0_dev_host, (size_t)dw_count * esz, cudaMemcpyHostToDevice));
        st = moe__hopper_wgrad(&bulk, s, why, sizeof why);
        CUDA_OK(cudaStreamSynchronize(s));
        CUDA_OK(cudaMemcpy(again, d_dw, (size_t)dw_count * esz, cudaMemcpyDeviceToHost));
        if (st != MOE_STATUS_OK || memcmp(out, again, (size_t)dw_count * esz) != 0) {
            printf("FAIL %s: the bulk store gave other bits than the default store (%s)\n", w->name, why);
            ++failures;
            goto done;
        }
        int64_t live = 0;
        for (int64_t e = 0; e < E; e++) live += cnt[e];
        const moe__hopper_wgrad_args *arms[2] = {&args, &bulk};
        double med[2], round_med[ROUNDS][2];
        time_arms(arms, s, med, round_med);
        for (int arm = 0; arm < 2; arm++) {
            printf("     time, %s store: median of %d launches in %d rounds %.4f ms, %.1f TFLOP/s (2 x %lld rows x N x K);"
                   " rounds", arm ? "bulk " : "pairs", ROUNDS * REPS, ROUNDS, med[arm],
                   2.0 * (double)live * (double)N * (double)K / (med[arm] * 1e-3) / 1e12, (long long)live);
            for (int r = 0; r < ROUNDS; r++) printf(" %.4f", round_med[r][arm]);
            printf("\n");
        }
        printf("     pairs / bulk time: %.3f\n", med[0] / med[1]);
    }
done:
    CUDA_OK(cudaStreamDestroy(s));
    cudaFree(d_g), cudaFree(d_a), cudaFree(d_off), cudaFree(d_cnt), cudaFree(d_dw);
    if (dw0_dev_host != dw0) free(dw0_dev_host);
    free(out), free(again), free(gb), free(ab), free(g), free(a), free(ag), free(aa), free(dw0), free(cnt), free(off);
}

static int cmp_double(const void *x, const void *y) {
    const double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof v[0], cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* The two stores timed interleaved (a kernel runs slower the later it comes in a process,
 * docs/hopper_gemm.md, session 30): after 3 warm-up launches each, ROUNDS rounds, each timing
 * REPS launches of one arm and then of the other, the first arm alternating. */
static void time_arms(const moe__hopper_wgrad_args *const arms[2], cudaStream_t s, double med[2],
                      double round_med[ROUNDS][2]) {
    cudaEvent_t t0, t1;
    CUDA_OK(cudaEventCreate(&t0));
    CUDA_OK(cudaEventCreate(&t1));
    double all[2][ROUNDS * REPS], one[REPS];
    char why[256];
    for (int arm = 0; arm < 2; arm++)
        for (int i = 0; i < 3; i++) moe__hopper_wgrad(arms[arm], s, why, sizeof why);
    for (int r = 0; r < ROUNDS; r++)
        for (int turn = 0; turn < 2; turn++) {
            const int arm = (r + turn) % 2;
            for (int i = 0; i < REPS; i++) {
                CUDA_OK(cudaEventRecord(t0, s));
                moe__hopper_wgrad(arms[arm], s, why, sizeof why);
                CUDA_OK(cudaEventRecord(t1, s));
                CUDA_OK(cudaEventSynchronize(t1));
                float f;
                CUDA_OK(cudaEventElapsedTime(&f, t0, t1));
                all[arm][r * REPS + i] = one[i] = f;
            }
            round_med[r][arm] = median(one, REPS);
        }
    for (int arm = 0; arm < 2; arm++) med[arm] = median(all[arm], ROUNDS * REPS);
    CUDA_OK(cudaEventDestroy(t0));
    CUDA_OK(cudaEventDestroy(t1));
}

int main(int argc, char **argv) {
    int perf = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--perf")) perf = 1;
        else {
            fprintf(stderr, "usage: %s [--perf]\n", argv[0]);
            return 2;
        }
    }
    check_refusals();
    int devices = 0, major = 0, minor = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
        printf("argument checks: %s; no CUDA device: skipped the GPU cases\n", failures ? "FAILED" : "passed");
        return failures ? 1 : 77;
    }
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0);
    cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0);
    if (major != 9 || minor != 0) {
        printf("device sm_%d%d: the Hopper kernel needs sm_90; skipped\n", major, minor);
        return failures ? 1 : 77;
    }
    static const int64_t edge[6] = {0, 1, 63, 64, 65, 130};
    const wcase cases[] = {
        {"edges-f32", 6, 200, 320, edge, 0, 8, 16, 5, MOE_DTYPE_F32, 0.0f, 0, 0, MOE__WGRAD_STORE_PAIRS},
        {"edges-bf16-beta1", 6, 136, 264, edge, 0, 0, 8, 0, MOE_DTYPE_BF16, 1.0f, 0, 1, MOE__WGRAD_STORE_PAIRS},
        {"random-f32-beta0.5", 9, 256, 512, NULL, 700, 0, 0, 3, MOE_DTYPE_F32, 0.5f, 0, 0, MOE__WGRAD_STORE_PAIRS},
        {"random-f32-graph", 5, 384, 768, NULL, 1500, 0, 0, 0, MOE_DTYPE_F32, 0.0f, 0, 1, MOE__WGRAD_STORE_PAIRS},
        {"one-expert-long", 1, 128, 256, (const int64_t[]){5000}, 0, 0, 0, 0, MOE_DTYPE_F32, 0.0f, 0, 0,
         MOE__WGRAD_STORE_PAIRS},
        /* even lddw: the interior tiles take the aligned-pair stores, with beta and without */
        {"interior-f32-beta0.5", 4, 256, 512, NULL, 600, 0, 0, 2, MOE_DTYPE_F32, 0.5f, 0, 0, MOE__WGRAD_STORE_PAIRS},
        {"interior-bf16-beta0", 4, 256, 512, NULL, 600, 0, 0, 0, MOE_DTYPE_BF16, 0.0f, 0, 0, MOE__WGRAD_STORE_PAIRS},
        /* fp32, beta 0, lddw a multiple of 4: the interior tiles by bulk copies where asked (p.bulk), else pairs */
        {"bulk-edges-f32", 6, 256, 512, edge, 0, 0, 0, 4, MOE_DTYPE_F32, 0.0f, 0, 1, MOE__WGRAD_STORE_BULK},
        {"pairs-edges-f32", 6, 256, 512, edge, 0, 0, 0, 4, MOE_DTYPE_F32, 0.0f, 0, 1, MOE__WGRAD_STORE_PAIRS},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(&cases[i], 0);
    if (perf) {
        const wcase big[] = {
            {"qwen3-30b-a3b dW2 (N=H, K=I)", 128, 2048, 768, NULL, 2048, 0, 0, 0, MOE_DTYPE_F32, 0.0f, 4096, 0,
             MOE__WGRAD_STORE_PAIRS},
            {"qwen3-30b-a3b dW13 (N=2I, K=H)", 128, 1536, 2048, NULL, 2048, 0, 0, 0, MOE_DTYPE_F32, 0.0f, 4096, 0,
             MOE__WGRAD_STORE_PAIRS},
            {"deepseek-v3 dW2, 16 experts", 16, 7168, 2048, NULL, 1024, 0, 0, 0, MOE_DTYPE_F32, 0.0f, 4096, 0,
             MOE__WGRAD_STORE_PAIRS},
            {"deepseek-v3 dW13, 16 experts", 16, 4096, 7168, NULL, 1024, 0, 0, 0, MOE_DTYPE_F32, 0.0f, 4096, 0,
             MOE__WGRAD_STORE_PAIRS},
        };
        for (size_t i = 0; i < sizeof big / sizeof big[0]; i++) run_case(&big[i], 1);
    }
    printf("%s: %d failure(s)\n", failures ? "FAIL" : "PASS", failures);
    return failures ? 1 : 0;
}
